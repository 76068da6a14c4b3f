// The C++ runtime of sdqlite's generated code (§5.5 "Destination-Passing Style & C++ Code
// Generation"): the semiring operations of Fig. langs on nested dictionaries and dense
// arrays, with the interpreter's semantics (semantics/values.py):
//
//   {int -> D}        sdql::dict<D>  a hash map (boost::unordered_flat_map, measured best
//                                    of the Debian maps); it never stores a zero: prune()
//                                    drops entries that became zero, lookup() never inserts
//   {dense_int -> D}  sdql::arr<D>   positions start .. start+n-1, zeros kept; a view over
//                                    caller memory or a shared buffer (copy on write)
//   int, real, bool   sdql::i64, double, bool
//   a destination     sdql::vec<D>   the outer layer of a result whose keys are known to lie
//                                    in 0 .. n-1 (sdqlite/check/sizes.py), n given by the caller
//                     sdql::dense_ref<L>  L layers of known sizes over reals, written in place
//                                    into the caller's (numpy's) zeroed memory, row major
//
// `+` and `*` (the tensor product) are add/mul, with in-place forms for destinations
// (add_into, mul_add_into).  Integer arithmetic is checked (64 bits; the interpreter's
// integers are unbounded), real overflow is read off the floating-point flags.  Failures
// are thrown as sdql::failure and reported through the entry point's status; so is an
// interrupt (Ctrl-C), which the loops poll.  The caller's arrays are checked once, before
// any kernel reads them (sdql_check_*: bounds, monotone pointers, sorted unique keys,
// finite values), by the front door (codegen/inputs.py, sdqlite_door.h).
#pragma once

#include <boost/container/small_vector.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace sdql {

using i64 = std::int64_t;

// ---- failures ---------------------------------------------------------------------------

enum code : i64 { OK = 0, DOMAIN = 1, RANGE = 2, REAL_OVERFLOW = 3, INT_OVERFLOW = 4,
                  NO_MEMORY = 5, OTHER = 6, OUTSIDE = 7, INTERRUPTED = 8, RECHECK = 9 };

struct failure {
  i64 code, op, span;  // op: index in the unary-operation table; span: index in the span table
  double value;        // the argument of a unary operation outside its domain
};

struct status {
  i64 flags;    // set by the caller: 1 = stop on Ctrl-C
  i64 threads;  // set by the caller: how many threads a loop at the top may use
  i64 code, op, span;
  double value;
  char message[256];
  double real;  // a number's result (no output is made for it)
  i64 integer;  // an int's or a bool's
};

[[noreturn]] inline void fail(i64 c, i64 op = -1, double value = 0, i64 span = -1) {
  throw failure{c, op, span, value};
}

// Set by the SIGINT handler that run() installs while a kernel runs; polled by every loop.
inline std::atomic<int> interrupted{0};

// How many threads a loop at the top of the kernel may use (set by run() for the call).
inline thread_local i64 threads = 1;

// A counted loop polls once a block of POLL positions (codegen/emit.py, counted): the end
// of the block that starts at k.
constexpr i64 POLL = 4096;
inline i64 block_end(i64 k, i64 end) { return end - k > POLL ? k + POLL : end; }

#define SDQL_POLL() \
  if (__builtin_expect(::sdql::interrupted.load(std::memory_order_relaxed), 0)) \
  ::sdql::fail(::sdql::INTERRUPTED)

inline i64 iadd(i64 a, i64 b) {
  i64 r;
  if (__builtin_add_overflow(a, b, &r)) fail(INT_OVERFLOW);
  return r;
}

inline i64 imul(i64 a, i64 b) {
  i64 r;
  if (__builtin_mul_overflow(a, b, &r)) fail(INT_OVERFLOW);
  return r;
}

// ---- the value types ---------------------------------------------------------------------

template <class V> using dict = boost::unordered_flat_map<i64, V>;

template <class V> struct arr {
  i64 start = 0, n = 0;
  const V* p = nullptr;                    // position start is p[0]
  std::shared_ptr<std::vector<V>> own;     // null for a view over the caller's memory

  i64 end() const { return start + n; }
  const V& at(i64 pos) const { return p[pos - start]; }

  // Writable positions, copied first unless this array alone owns exactly its buffer.
  V* mut() {
    if (!own || own.use_count() > 1 || p != own->data() || i64(own->size()) != n) {
      own = std::make_shared<std::vector<V>>(p, p + n);
      p = own->data();
    }
    return own->data();
  }
};

// Position `pos` of `a` brought towards the cache ahead of its read (nothing if outside).
template <class V> inline void ahead(const arr<V>& a, i64 pos) {
  if (std::uint64_t(pos - a.start) < std::uint64_t(a.n)) __builtin_prefetch(a.p + (pos - a.start));
}

template <class V> arr<V> owned(std::vector<V>&& items, i64 start) {
  arr<V> a;
  if (items.empty()) return a;  // the empty array starts at 0, as in the interpreter
  a.own = std::make_shared<std::vector<V>>(std::move(items));
  a.p = a.own->data();
  a.n = i64(a.own->size());
  a.start = start;
  return a;
}

// A destination layer stored densely: keys 0 .. n-1, a zero for each missing one.
template <class V> struct vec {
  std::vector<V> items;
  explicit vec(i64 n = 0) : items(std::size_t(n)) {}
  V& operator[](i64 k) {  // the sizes analysis puts every key inside: checked if SDQL_CHECKED
#ifdef SDQL_CHECKED
    if (k < 0 || k >= i64(items.size())) fail(OUTSIDE, -1, double(k));
#endif
    return items[std::size_t(k)];
  }
};

// A sparse layer of scalars under a destination's array layer (a matrix result's row),
// written only by adding: d[k] += v appends (k, v), and the entries are merged by key
// (compact) when the row would grow past twice its distinct keys, so that rows written in
// any order cost an append each, not a hash table's random access each (a matrix result
// of 10^5 rows in 10^5 tables misses the cache at every update).  The values of one key
// are added in the order they came, as a hash map would.  Sorted by key and without zeros
// once pruned, so that a CSR result comes back with sorted column indices.  A row of one
// entry is stored in place: no allocation.
inline void add_into(double& a, double b);
inline void add_into(i64& a, i64 b);

template <class V> struct row {
  static constexpr i64 SPREAD = i64(1) << 22;  // keys below: merged through a scratch table
  boost::container::small_vector<std::pair<i64, V>, 1> entries;
  std::size_t distinct = 0;  // entries[0, distinct) have distinct keys
  bool small = true;         // every key in [0, SPREAD)

  V& operator[](i64 k) {
    if (!entries.empty() && entries.back().first == k) return entries.back().second;
    if (entries.size() == entries.capacity() && entries.size() >= 8) grow();
    small = small && std::uint64_t(k) < std::uint64_t(SPREAD);
    return entries.emplace_back(k, V{}).second;
  }

  void grow() {  // full: merge first if half may be repeats, then keep room for as many again
    if (entries.size() >= 2 * distinct) compact();
    if (2 * entries.size() > entries.capacity()) entries.reserve(2 * entries.size());
  }

  void compact() {  // each key once, at its first place, its values added in order
    if (distinct == entries.size()) return;
    if (small) {
      thread_local std::vector<std::int32_t> slot;  // key -> its place, or -1
      i64 top = 0;
      for (const auto& e : entries) top = std::max(top, e.first + 1);
      if (i64(slot.size()) < top) slot.resize(std::size_t(top), -1);
      std::size_t u = 0;
      for (std::size_t i = 0; i < entries.size(); i++) {
        const auto [k, v] = entries[i];
        auto& s = slot[std::size_t(k)];
        if (s < 0) {
          s = std::int32_t(u);
          entries[u++] = {k, v};
        } else {
          add_into(entries[std::size_t(s)].second, v);
        }
      }
      for (std::size_t i = 0; i < u; i++) slot[std::size_t(entries[i].first)] = -1;
      entries.resize(u);
    } else {  // (keys anywhere: sorted, stable, so that values still add in order)
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::size_t u = 0;
      for (std::size_t i = 0; i < entries.size(); i++) {
        if (u > 0 && entries[u - 1].first == entries[i].first)
          add_into(entries[u - 1].second, entries[i].second);
        else
          entries[u++] = entries[i];
      }
      entries.resize(u);
    }
    distinct = entries.size();
  }

  template <class F> void each(F&& f) const {  // a key may come more than once until pruned
    for (const auto& e : entries) f(e.first, e.second);
  }

  i64 size() const { return i64(entries.size()); }  // (an upper bound until pruned)

  void clear() {
    entries.clear();
    distinct = 0;
    small = true;
  }
};

// L destination layers of known sizes over reals, written into the caller's zeroed memory
// (row major, shape[0] x ... x shape[L-1]): a[k] is the sub-array of the first layer's
// key k, and at the last layer the real itself.  Keys are checked as vec's are (SDQL_CHECKED).
template <int L> struct dense_ref {
  double* p;
  const i64* shape;
  i64 stride;  // the reals under one key of the first layer

  dense_ref(double* p_, const i64* shape_) : p(p_), shape(shape_), stride(1) {
    for (int l = 1; l < L; l++) stride *= shape[l];  // (no division: a size may be 0)
  }

  decltype(auto) operator[](i64 k) const {  // (as vec's: checked if SDQL_CHECKED)
#ifdef SDQL_CHECKED
    if (k < 0 || k >= shape[0]) fail(OUTSIDE, -1, double(k));
#endif
    if constexpr (L == 1) {
      return static_cast<double&>(p[k]);
    } else {
      return dense_ref<L - 1>(p + k * stride, shape + 1);
    }
  }
};

template <class T> struct is_dict : std::false_type {};
template <class V> struct is_dict<dict<V>> : std::true_type {};
template <class T> struct is_arr : std::false_type {};
template <class V> struct is_arr<arr<V>> : std::true_type {};
template <class T> constexpr bool is_scalar_v = std::is_arithmetic_v<T>;

// D1 ⊗ D2 (Fig. langs): real ⊗ D = D, {I -> D1} ⊗ D2 = {I -> D1 ⊗ D2}
template <class A, class B> struct otimes { using type = B; };
template <class V, class B> struct otimes<dict<V>, B> {
  using type = dict<typename otimes<V, B>::type>;
};
template <class V, class B> struct otimes<arr<V>, B> {
  using type = arr<typename otimes<V, B>::type>;
};
template <class A, class B> using otimes_t = typename otimes<A, B>::type;

// ---- zero ------------------------------------------------------------------------------

template <class T> const T& zero() {
  static const T z{};
  return z;
}

inline bool is_zero(double x) { return x == 0; }
inline bool is_zero(i64 x) { return x == 0; }
inline bool is_zero(std::int32_t x) { return x == 0; }
template <class V> bool is_zero(const dict<V>& d) { return d.empty(); }
// an array counts as zero (inside a dictionary) when every position holds zero
template <class V> bool is_zero(const arr<V>& a) {
  for (i64 i = 0; i < a.n; i++)
    if (!is_zero(a.p[i])) return false;
  return true;
}

// Drop the entries that became zero, innermost first.  Only dictionary layers written in
// place (dest[k] += ...) can hold them: arrays are always added to canonically.
template <class T> void prune(T& x) {
  if constexpr (is_dict<T>::value) {
    using V = typename T::mapped_type;
    if constexpr (is_dict<V>::value)
      for (auto& kv : x) prune(kv.second);
    boost::unordered::erase_if(x, [](const auto& kv) { return is_zero(kv.second); });
  }
}

template <int L> void prune(const dense_ref<L>&) {}  // it stores reals at every position

template <class V> void prune(row<V>& r) {  // and sorted by key, as encode wants it
  r.compact();
  auto& e = r.entries;
  e.erase(std::remove_if(e.begin(), e.end(), [](const auto& x) { return is_zero(x.second); }),
          e.end());
  std::sort(e.begin(), e.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  r.distinct = e.size();
}

template <class V> void prune(vec<V>& x) {  // a dense destination keeps its positions
  if constexpr (is_dict<V>::value)
    for (auto& v : x.items) prune(v);
}

template <class V> void prune(vec<row<V>>& x) {
  for (auto& r : x.items) prune(r);
}

// ---- construction and lookup -------------------------------------------------------------

template <class V> dict<V> single(i64 k, const V& v) {  // {k -> v}, {k -> 0} = {}
  dict<V> d;
  if (!is_zero(v)) d.emplace(k, v);
  return d;
}

template <class V> const V& lookup(const dict<V>& d, i64 k) {  // never inserts
  auto it = d.find(k);
  return it == d.end() ? zero<V>() : it->second;
}

template <class V> const V& lookup(const arr<V>& a, i64 k) {  // zero out of range
  return k >= a.start && k < a.end() ? a.at(k) : zero<V>();
}

// A sum's accumulator whose keys lie in [0, n) (a dense workspace, as TACO's: Kjolstad et
// al., CGO 2019): its values in an array of n, zeroed lazily by calloc (pages untouched
// cost nothing), and the keys it was given, in the order they came.  Adding is a store,
// where a hash map would hash and probe.  prune() then lists the keys in order, once,
// those whose value is not zero: by scanning the array where the keys are many, by
// sorting them where they are few.  Read only by a loop over it or a lookup into it
// (codegen/results.py, workspaces): what a loop over a dictionary would read.
template <class V> struct work {
  struct freer {
    void operator()(V* p) const { std::free(p); }
  };
  i64 n;
  std::unique_ptr<V[], freer> values;
  std::vector<i64> keys;  // (a key may come twice: its value back to zero, then not)

  explicit work(i64 n_) : n(n_), values(static_cast<V*>(std::calloc(std::size_t(std::max<i64>(n_, 1)), sizeof(V)))) {
    if (!values) throw std::bad_alloc();
  }

  V& operator[](i64 k) {  // the sizes analysis puts every key inside: checked if SDQL_CHECKED
#ifdef SDQL_CHECKED
    if (k < 0 || k >= n) fail(OUTSIDE, -1, double(k));
#endif
    V& v = values[std::size_t(k)];
    if (is_zero(v)) keys.push_back(k);
    return v;
  }

  void prune() {  // the keys in order, once each, their values not zero
    if (i64(keys.size()) * 8 >= n) {  // many: the array in order
      keys.clear();
      for (i64 k = 0; k < n; k++)
        if (!is_zero(values[std::size_t(k)])) keys.push_back(k);
      return;
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    keys.erase(std::remove_if(keys.begin(), keys.end(),
                              [&](i64 k) { return is_zero(values[std::size_t(k)]); }),
               keys.end());
  }

  struct iterator {  // (key, value) of the pruned keys
    const work* w;
    const i64* p;
    std::pair<i64, V> operator*() const { return {*p, w->values[std::size_t(*p)]}; }
    iterator& operator++() {
      ++p;
      return *this;
    }
    bool operator!=(const iterator& o) const { return p != o.p; }
  };
  iterator begin() const { return {this, keys.data()}; }
  iterator end() const { return {this, keys.data() + keys.size()}; }
};

template <class V> void prune(work<V>& w) { w.prune(); }

template <class V> const V& lookup(const work<V>& w, i64 k) {  // zero out of range
  return k >= 0 && k < w.n ? w.values[std::size_t(k)] : zero<V>();
}

// An index array of 32-bit integers (scipy's default) reads as 64-bit ints.
inline i64 lookup(const arr<std::int32_t>& a, i64 k) {
  return k >= a.start && k < a.end() ? i64(a.at(k)) : 0;
}

// A position that a loop's bounds keep inside the array (codegen/emit.py, Extents: the
// formats' lengths, which the front door checks): read without a check, but in the checked
// build (-DSDQL_CHECKED, the sanitizer run) a position outside is an internal error.
template <class V> const V& at(const arr<V>& a, i64 k) {
#ifdef SDQL_CHECKED
  if (k < a.start || k >= a.end()) throw std::logic_error("an unchecked read outside its array");
#endif
  return a.at(k);
}

inline i64 at(const arr<std::int32_t>& a, i64 k) { return i64(at<std::int32_t>(a, k)); }

// A lookup into a temporary returns its entry by value (a reference would dangle).
template <class V> V lookup(dict<V>&& d, i64 k) { return lookup(static_cast<const dict<V>&>(d), k); }
template <class V> V lookup(arr<V>&& a, i64 k) { return lookup(static_cast<const arr<V>&>(a), k); }

inline arr<i64> range(i64 lo, i64 hi) {  // (lo:hi)
  std::vector<i64> items;
  if (hi > lo) {
    items.resize(std::size_t(hi - lo));
    for (i64 k = lo; k < hi; k++) items[std::size_t(k - lo)] = k;
  }
  return owned(std::move(items), lo);
}

inline i64 range_at(i64 lo, i64 hi, i64 k) { return lo <= k && k < hi ? k : 0; }  // (lo:hi)(k)

template <class V> arr<V> subarray(const arr<V>& a, i64 lo, i64 hi) {  // a(lo:hi)
  if (hi <= lo) return arr<V>{};
  if (lo >= a.start && hi <= a.end()) {  // inside: share a's positions
    arr<V> s = a;
    s.p = a.p + (lo - a.start);
    s.start = lo;
    s.n = hi - lo;
    return s;
  }
  std::vector<V> items(std::size_t(hi - lo));
  for (i64 k = lo; k < hi; k++) items[std::size_t(k - lo)] = lookup(a, k);
  return owned(std::move(items), lo);
}

template <class V> arr<V> array_of(std::vector<V> items) { return owned(std::move(items), 0); }

// ---- + ------------------------------------------------------------------------------------

inline void add_into(double& a, double b) { a += b; }
inline void add_into(i64& a, i64 b) { a = iadd(a, b); }

template <class V> void add_into(dict<V>& a, const dict<V>& b) {
  if (a.empty()) {
    a = b;
    return;
  }
  for (const auto& [k, v] : b) {
    auto [it, fresh] = a.try_emplace(k, v);
    if (!fresh) {
      add_into(it->second, v);
      if (is_zero(it->second)) a.erase(it);
    }
  }
}

// positions: the hull of both, missing ones zero (semantics/values.py, add)
template <class V> void add_into(arr<V>& a, const arr<V>& b) {
  if (b.n == 0) return;
  if (a.n == 0) {
    a = b;
    return;
  }
  i64 lo = std::min(a.start, b.start), hi = std::max(a.end(), b.end());
  if (lo != a.start || hi != a.end()) {
    std::vector<V> items(std::size_t(hi - lo));
    for (i64 i = 0; i < a.n; i++) items[std::size_t(a.start - lo + i)] = a.p[i];
    a = owned(std::move(items), lo);
  }
  V* m = a.mut();
  for (i64 i = 0; i < b.n; i++) add_into(m[b.start - lo + i], b.p[i]);
}

template <class V> void add_into(vec<V>& a, const dict<V>& b) {
  for (const auto& [k, v] : b) add_into(a[k], v);
}

template <class V> void add_into(row<V>& a, const dict<V>& b) {  // zeros stay until prune()
  for (const auto& [k, v] : b) add_into(a[k], v);
}

template <class V> void add_into(row<V>& a, const row<V>& b) {
  b.each([&](i64 k, const V& v) { add_into(a[k], v); });
}

template <class V> void add_into(vec<row<V>>& a, const dict<dict<V>>& b) {
  for (const auto& [k, v] : b) add_into(a[k], v);
}

template <int L, class V> void add_into(dense_ref<L> a, const arr<V>& b) {
  for (i64 k = b.start; k < b.end(); k++) {
    decltype(auto) entry = a[k];
    add_into(entry, b.at(k));
  }
}

template <int L, class V> void add_into(dense_ref<L> a, const dict<V>& b) {
  for (const auto& [k, v] : b) {
    decltype(auto) entry = a[k];
    add_into(entry, v);
  }
}

inline double add(double a, double b) { return a + b; }
inline i64 add(i64 a, i64 b) { return iadd(a, b); }
template <class T> T add(const T& a, const T& b) {
  T out = a;
  add_into(out, b);
  return out;
}

// ---- * (the tensor product) ----------------------------------------------------------------

inline double scalar_mul(double a, double b) { return a * b; }
inline i64 scalar_mul(i64 a, i64 b) { return imul(a, b); }

template <class S, class B> B scale(S s, const B& b) {  // s * b for a scalar s
  if constexpr (is_scalar_v<B>) {
    return scalar_mul(s, b);
  } else if constexpr (is_dict<B>::value) {
    B out;
    for (const auto& [k, v] : b) {
      auto x = scale(s, v);
      if (!is_zero(x)) out.emplace(k, std::move(x));
    }
    return out;
  } else {  // a dense array keeps its positions
    using V = std::remove_cv_t<std::remove_reference_t<decltype(*b.p)>>;
    std::vector<V> items;
    items.reserve(std::size_t(b.n));
    for (i64 i = 0; i < b.n; i++) items.push_back(scale(s, b.p[i]));
    return owned(std::move(items), b.start);
  }
}

template <class A, class B> otimes_t<A, B> mul(const A& a, const B& b) {
  using R = otimes_t<A, B>;
  if constexpr (is_scalar_v<A>) {
    return scale(a, b);
  } else if constexpr (is_dict<A>::value) {  // {k -> x} * b = {k -> x * b}
    R out;
    for (const auto& [k, v] : a) {
      auto x = mul(v, b);
      if (!is_zero(x)) out.emplace(k, std::move(x));
    }
    return out;
  } else {
    using V = std::remove_cv_t<std::remove_reference_t<decltype(*a.p)>>;
    std::vector<otimes_t<V, B>> items;
    items.reserve(std::size_t(a.n));
    for (i64 i = 0; i < a.n; i++) items.push_back(mul(a.p[i], b));
    return owned(std::move(items), a.start);
  }
}

// dest += s * b without building s * b (destination-passing style)
template <class D, class S, class B> void scale_add_into(D&& dest, S s, const B& b) {
  if constexpr (is_scalar_v<B>) {
    add_into(dest, scalar_mul(s, b));
  } else if constexpr (is_dict<B>::value) {
    for (const auto& [k, v] : b) scale_add_into(dest[k], s, v);
  } else {
    add_into(dest, scale(s, b));
  }
}

// dest += a * b without building a * b; entries that became zero stay until prune()
template <class D, class A, class B> void mul_add_into(D&& dest, const A& a, const B& b) {
  if constexpr (is_scalar_v<A>) {
    scale_add_into(dest, a, b);
  } else if constexpr (is_dict<A>::value) {
    for (const auto& [k, v] : a) mul_add_into(dest[k], v, b);
  } else {
    add_into(dest, mul(a, b));
  }
}

// ---- moving values across the C boundary ---------------------------------------------------
//
// A value of a type with L dictionary layers travels as 2L + 1 flat buffers: per layer, a
// pointer array (entries of instance i are ptr[i] .. ptr[i+1]-1; the root is instance 0)
// and an index array (a sparse layer's key per entry, a dense layer's start per instance),
// then the leaf values.  Instances of a layer are the entries of the layer above, in order.

struct layer {
  const i64* ptr;
  const i64* idx;
};

template <class T> struct depth : std::integral_constant<int, 0> {};
template <class V> struct depth<dict<V>> : std::integral_constant<int, 1 + depth<V>::value> {};
template <class V> struct depth<arr<V>> : std::integral_constant<int, 1 + depth<V>::value> {};
template <class V> struct depth<vec<V>> : std::integral_constant<int, 1 + depth<V>::value> {};
template <class V> struct depth<row<V>> : std::integral_constant<int, 1 + depth<V>::value> {};

template <class T> struct leaf { using type = T; };
template <class V> struct leaf<dict<V>> : leaf<V> {};
template <class V> struct leaf<arr<V>> : leaf<V> {};
template <class V> struct leaf<vec<V>> : leaf<V> {};
template <class V> struct leaf<row<V>> : leaf<V> {};

template <class T> T decode_at(const layer* L, const void* vals, i64 inst) {
  if constexpr (is_scalar_v<T>) {
    return static_cast<const T*>(vals)[inst];
  } else if constexpr (is_dict<T>::value) {
    using V = typename T::mapped_type;
    T d;
    i64 a = L->ptr[inst], b = L->ptr[inst + 1];
    d.reserve(std::size_t(b - a));
    for (i64 e = a; e < b; e++) {
      V v = decode_at<V>(L + 1, vals, e);
      if (is_zero(v)) continue;
      auto [it, fresh] = d.try_emplace(L->idx[e], v);
      if (!fresh) {
        add_into(it->second, v);  // a repeated key adds up
        if (is_zero(it->second)) d.erase(it);
      }
    }
    return d;
  } else {
    using V = std::remove_cv_t<std::remove_reference_t<decltype(*T{}.p)>>;
    i64 a = L->ptr[inst], b = L->ptr[inst + 1];
    if constexpr (is_scalar_v<V>) {  // a view over the caller's values
      T view;
      if (b > a) {
        view.start = L->idx[inst];
        view.n = b - a;
        view.p = static_cast<const V*>(vals) + a;
      }
      return view;
    } else {
      std::vector<V> items;
      items.reserve(std::size_t(b - a));
      for (i64 e = a; e < b; e++) items.push_back(decode_at<V>(L + 1, vals, e));
      return owned(std::move(items), L->idx[inst]);
    }
  }
}

// the next input value from the caller's buffers (advancing `next`)
template <class T> T decode(void* const* data, i64& next) {
  constexpr int D = depth<T>::value;
  layer L[D + 1];
  for (int l = 0; l < D; l++) {
    L[l].ptr = static_cast<const i64*>(data[next++]);
    L[l].idx = static_cast<const i64*>(data[next++]);
  }
  return decode_at<T>(L, data[next++], 0);
}

// A flat array of the caller's, read in place: one buffer (its values) and its count in
// `lens`; positions 0 .. n-1.  The storage formats' arrays and 1-d numpy inputs come so.
template <class V> arr<V> flat(void* const* data, const i64* lens, i64& next) {
  arr<V> a;
  a.n = lens[next];
  a.p = a.n > 0 ? static_cast<const V*>(data[next]) : nullptr;
  next++;
  return a;
}

inline std::atomic<i64> outputs_live{0};  // results made and not yet released

// An allocator whose resize() leaves new numbers unset (a kernel writes them next): a
// result's arrays are sized to what they may hold without a pass that zeroes them.
// A large one is laid out in 2 MiB pages where the system allows it, as numpy's are: its
// first writes then fault once a page of 2 MiB, not of 4 KiB (most of the time of writing
// a large result, in a small VM).
template <class T> struct uninit : std::allocator<T> {
  using value_type = T;
  static constexpr std::size_t PAGE = std::size_t(1) << 21, LARGE = std::size_t(1) << 22;
  template <class U> struct rebind { using other = uninit<U>; };
  uninit() = default;
  template <class U> uninit(const uninit<U>&) noexcept {}
  template <class U, class... A> void construct(U* p, A&&... a) {
    if constexpr (sizeof...(A) == 0) ::new (static_cast<void*>(p)) U;
    else ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T) - PAGE) throw std::bad_alloc();
    if (n * sizeof(T) < LARGE) return std::allocator<T>::allocate(n);
    const std::size_t bytes = (n * sizeof(T) + PAGE - 1) / PAGE * PAGE;
    void* p = std::aligned_alloc(PAGE, bytes);
    if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);  // (a hint: refused, the pages are 4 KiB ones)
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) {
    if (n * sizeof(T) < LARGE) std::allocator<T>::deallocate(p, n);
    else std::free(p);
  }
};
template <class T, class U> bool operator==(const uninit<T>&, const uninit<U>&) { return true; }
template <class T, class U> bool operator!=(const uninit<T>&, const uninit<U>&) { return false; }
template <class T> using buffer = std::vector<T, uninit<T>>;

struct output {
  std::vector<buffer<i64>> index;  // ptr, idx per layer
  buffer<std::int32_t> narrow;     // index[moved]'s keys, when they are 32-bit ones
  i64 moved = -1;
  i64 narrowed = 0;                // a bit for each index buffer of 32-bit ints
  buffer<double> reals;
  buffer<i64> ints;
  output() { ++outputs_live; }
  ~output() { --outputs_live; }
  output(const output&) = delete;
  output& operator=(const output&) = delete;
};

// Outputs freed by the caller are kept for the next call (the last few, up to KEEP bytes
// of capacity), emptied: its buffers then reuse pages already touched.  Fresh pages cost
// a fault each, which in a small VM is most of the time of writing a large result.
struct recycler {
  static constexpr std::size_t KEEP = std::size_t(1) << 26, SLOTS = 2;
  std::mutex m;
  std::vector<std::unique_ptr<output>> kept;

  static std::size_t bytes(const output& o) {
    std::size_t b = 8 * (o.reals.capacity() + o.ints.capacity()) + 4 * o.narrow.capacity();
    for (const auto& v : o.index) b += 8 * v.capacity();
    return b;
  }

  std::unique_ptr<output> take() {
    {
      std::lock_guard<std::mutex> lock(m);
      if (!kept.empty()) {
        auto o = std::move(kept.back());
        kept.pop_back();
        return o;
      }
    }
    return std::make_unique<output>();
  }

  void give(output* o) {
    std::unique_ptr<output> mine(o);
    for (auto& v : o->index) v.clear();
    o->narrow.clear();
    o->moved = -1;
    o->narrowed = 0;
    o->reals.clear();
    o->ints.clear();
    std::lock_guard<std::mutex> lock(m);
    std::size_t total = bytes(*o);
    for (const auto& k : kept) total += bytes(*k);
    if (kept.size() < SLOTS && total <= KEEP) kept.push_back(std::move(mine));
  }
};

inline recycler outputs;

template <class T> void encode_at(const T& x, output& o, int level);

template <class V> void encode_at(const vec<V>& x, output& o, int level) {  // a dense layer
  auto& P = o.index[std::size_t(2 * level)];
  o.index[std::size_t(2 * level + 1)].push_back(0);
  P.push_back(P.back() + i64(x.items.size()));
  for (const auto& v : x.items) encode_at(v, o, level + 1);
}

template <class V> void encode_at(const row<V>& x, output& o, int level) {  // keys sorted
  const auto out_of_order = [](const auto& a, const auto& b) { return a.first >= b.first; };
  if (std::adjacent_find(x.entries.begin(), x.entries.end(), out_of_order) != x.entries.end()) {
    row<V> sorted;  // (prune() sorts)
    x.each([&](i64 k, const V& v) { add_into(sorted[k], v); });
    prune(sorted);
    return encode_at(sorted, o, level);
  }
  auto& P = o.index[std::size_t(2 * level)];
  auto& K = o.index[std::size_t(2 * level + 1)];
  for (const auto& e : x.entries) K.push_back(e.first);
  P.push_back(i64(K.size()));
  for (const auto& e : x.entries) encode_at(e.second, o, level + 1);
}

template <class T> void encode_at(const T& x, output& o, int level) {
  if constexpr (std::is_same_v<T, double>) {
    o.reals.push_back(x);
  } else if constexpr (is_scalar_v<T>) {
    o.ints.push_back(i64(x));
  } else if constexpr (is_dict<T>::value) {
    auto& P = o.index[std::size_t(2 * level)];
    auto& K = o.index[std::size_t(2 * level + 1)];
    for (const auto& kv : x) K.push_back(kv.first);
    P.push_back(i64(K.size()));
    for (const auto& kv : x) encode_at(kv.second, o, level + 1);  // same order as the keys
  } else {
    auto& P = o.index[std::size_t(2 * level)];
    o.index[std::size_t(2 * level + 1)].push_back(x.start);
    P.push_back(P.back() + x.n);
    for (i64 i = 0; i < x.n; i++) encode_at(x.p[i], o, level + 1);
  }
}

// How many instances (and leaves) each layer below x holds: encode reserves them first.
template <class T> void count_at(const T& x, i64* n) {
  if constexpr (is_scalar_v<T>) {
    n[0]++;
  } else if constexpr (is_dict<T>::value) {
    n[0] += i64(x.size());
    for (const auto& kv : x) count_at(kv.second, n + 1);
  } else if constexpr (is_arr<T>::value) {
    n[0] += x.n;
    for (i64 i = 0; i < x.n; i++) count_at(x.p[i], n + 1);
  } else if constexpr (std::is_same_v<T, row<typename leaf<T>::type>>) {
    n[0] += x.size();
    n[1] += x.size();
  } else {  // vec
    n[0] += i64(x.items.size());
    for (const auto& v : x.items) count_at(v, n + 1);
  }
}

// A matrix result whose rows the kernel writes in key order (codegen/results.py, "rows"):
// the row being written is the tail of the CSR arrays themselves, its entries appended as
// they come (a write to the key just written adds into it); when the next row starts the
// tail is made sorted, each key once, without zeros.  Rows never written stay empty.  No
// storage per row and no copy: the arrays are the output itself.
template <class V, class I = i64> struct csr;

// result[k][j] and result[k] of a matrix written by add(k, j, v) (a csr, a csr_writer),
// as destinations: added into.
template <class M> struct matrix_entry {
  M* m;
  i64 k, j;
  void operator+=(typename M::value v) const { m->add(k, j, v); }
};

template <class M> struct matrix_row {
  M* m;
  i64 k;
  matrix_entry<M> operator[](i64 j) const { return {m, k, j}; }
};

// The n 64-bit ints at p as 32-bit ones, in the first half of their bytes: a block at a
// time through a copy, which the compiler vectorizes.  (Entry by entry, each 4-byte store
// may overlap a later 8-byte load for all the compiler knows: 1.2 ns an entry, VVA's 10^5
// row pointers 117 us.  A block's 32-bit copy ends before the next block's 64-bit ints
// start: its 4 KiB of them start at byte 8 * 512 * b, it goes to byte 4 * 512 * b.)
inline void narrow_in_place(i64* p, i64 n) {
  constexpr i64 B = 512;
  auto* bytes = reinterpret_cast<unsigned char*>(p);
  std::int32_t copy[B];
  for (i64 b = 0; b < n; b += B) {
    const i64 m = std::min(B, n - b);
    for (i64 i = 0; i < m; i++) copy[i] = std::int32_t(p[b + i]);
    std::memcpy(bytes + 4 * b, copy, std::size_t(4 * m));
  }
}

// A matrix's CSR arrays, written row by row; its column keys of type I (32 bits where
// the result's columns are known to fit: a third less to write than 64-bit ones).  A key
// outside the rows or the columns the sizes analysis gave the result fails OUTSIDE (the
// net under that analysis, so the caller need not look at the keys again).
template <class V, class I> struct csr {
  using value = V;
  std::unique_ptr<output> o = outputs.take();
  buffer<i64>& pos;  // pos, idx and val are sized to their capacity while rows are written
  buffer<I>& idx;
  buffer<V>& val;
  i64 *p0, *pe, *pn;  // pos: [p0, pe) written (the current row is pe - p0 - 1), pn its end
  // idx: the current row is [kr, ke), of which [kr, km) is merged (each key once); kc is
  // the capacity's end; val at the same places.  Cursors are pointers, not counts: no
  // store of an int into the arrays may change them, so none is read again after one.
  I *k0 = nullptr, *kr = nullptr, *km = nullptr, *ke = nullptr, *kc = nullptr;
  V* v0 = nullptr;
  bool shuffled = false;  // a key of the current row came after a larger one
  bool small = true;      // every key of the current row is in [0, row<V>::SPREAD)
  bool dense = false;     // the current row is added up in the table (to_dense)
  bool done = false;
  std::vector<V> ws;                        // the table: values by key, and the keys'
  std::vector<std::uint64_t> bits, summary;  // presence (all zero between rows)
  i64 lo = 0, hi = 0;                       // the current row's smallest and largest key
  std::vector<std::pair<i64, V>> scratch;   // (merge's)
  // A row's keys are in [0, cols) where `bounded` (the columns are known, or the keys
  // 32-bit ones), else anywhere (cols is then INT64_MAX).
  static constexpr bool WIDE = std::is_same_v<I, i64>;
  i64 cols;
  bool bounded;

  // n rows of m columns (m < 0: not known)
  csr(i64 n, i64 m)
      : pos(index(2)), idx(keys()), val(leaves()),
        cols(std::min(m < 0 ? INT64_MAX : m, WIDE ? INT64_MAX : i64(INT32_MAX) + 1)),
        bounded(m >= 0 || !WIDE) {
    o->index[0] = {0, n};  // a dense outer layer of n rows, starting at 0
    o->index[1] = {0};
    pos.resize(std::size_t(n + 1));
    p0 = pos.data();
    pn = p0 + n + 1;
    *p0 = 0;
    pe = n > 0 ? p0 + 1 : p0;  // row 0 started; none where there is none (any row fails)
    reserve(std::max<i64>(n, 16), 0);  // a guess, an entry a row (untouched until written)
  }

  buffer<i64>& index(std::size_t k) {
    o->index.resize(4);
    return o->index[k];
  }

  buffer<I>& keys() {
    if constexpr (std::is_same_v<I, i64>) {
      return index(3);
    } else {
      index(3);
      o->moved = 3;
      o->narrowed |= 1 << 3;
      return o->narrow;
    }
  }

  buffer<V>& leaves() {
    if constexpr (std::is_same_v<V, double>) return o->reals;
    else return o->ints;
  }

  void reserve(i64 c, i64 used) {  // room for c entries, the first `used` kept
    const i64 r = kr - k0, m = km - k0;
    idx.resize(std::size_t(c));
    val.resize(std::size_t(c));
    k0 = idx.data();
    v0 = val.data();
    kc = k0 + c;
    kr = k0 + r;
    km = k0 + m;
    ke = k0 + used;
  }

  matrix_row<csr> operator[](i64 k) { return {this, k}; }

  i64 rows() const { return pn - p0 - 1; }
  i64 rows_begun() const { return pe - p0; }  // (the current row is the last of them)

  // Room for about `entries` entries in all, if that is more than there is: the arrays
  // then grow without a copy.  (A guess: beyond 2^27 entries they grow as they fill.)
  void expect(i64 entries) {
    const i64 c = std::min(entries, i64(1) << 27);
    if (c > kc - k0) reserve(c, ke - k0);
  }

  void add(i64 k, i64 j, V v) {  // result[k][j] += v
    if (pe - p0 - 1 != k) start(k);  // (then neither dense nor with entries)
    // (the table holds keys below cols only: a key found inside it needs no check)
    if (dense && std::uint64_t(j) < std::uint64_t(ws.size())) return touch(j, v);
    if (bounded && std::uint64_t(j) >= std::uint64_t(cols)) fail(OUTSIDE, -1, double(j));
    if (dense) {
      if (std::uint64_t(j) < std::uint64_t(row<V>::SPREAD)) {
        grow(j + 1);
        return touch(j, v);
      }
      spill();  // (a key beyond the table's reach: appended, the row sorted when it ends)
    } else if (ke > kr) {
      const i64 last = ke[-1];
      if (last == j) return add_into(v0[ke - 1 - k0], v);
      if (j < last && small && std::uint64_t(j) < std::uint64_t(row<V>::SPREAD)) {
        to_dense(j);
        return touch(j, v);
      }
      shuffled = shuffled || j < last;
      if (shuffled && ke - kr >= 2 * (km - kr) + 1024) merge();  // half may be repeats
    }
    small = small && std::uint64_t(j) < std::uint64_t(row<V>::SPREAD);
    if (ke == kc) reserve(2 * (kc - k0), ke - k0);
    v0[ke - k0] = v;
    *ke++ = I(j);
  }

  void start(i64 k) {
    if (k < 0 || k >= rows()) fail(OUTSIDE, -1, double(k));
    if (k < pe - p0 - 1) throw std::logic_error("a row of the result was written after a later one");
    end_row();
    const i64 top = ke - k0;
    while (pe - p0 <= k) *pe++ = top;  // the rows before k end here
    kr = km = ke;
    shuffled = false;
    small = true;
  }

  void end_row() {  // the current row sorted, each key once, without zeros
    if (dense) return flush();
    if (ke - kr <= 1) {  // (most rows of a diagonal: one entry, or none)
      if (ke > kr && is_zero(v0[kr - k0])) ke = kr;
      return;
    }
    tidy();
  }

  __attribute__((noinline)) void tidy() {
    if (shuffled) merge();
    I* u = kr;
    for (I* i = kr; i < ke; i++) {
      if (is_zero(v0[i - k0])) continue;
      v0[u - k0] = v0[i - k0];
      *u++ = *i;
    }
    ke = u;
  }

  // The current row sorted, its repeated keys merged, the values of each added in the
  // order they came (a stable sort).
  __attribute__((noinline)) void merge() {
    scratch.clear();
    for (I* i = kr; i < ke; i++) scratch.emplace_back(*i, v0[i - k0]);
    std::stable_sort(scratch.begin(), scratch.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    I* u = kr;
    for (const auto& [k, v] : scratch) {
      if (u > kr && u[-1] == k) {
        add_into(v0[u - 1 - k0], v);
      } else {
        *u = I(k);
        v0[u - k0] = v;
        u++;
      }
    }
    km = ke = u;
  }

  // A row out of key order whose keys are small is added up in a table (a workspace):
  // its values by key, zero between rows, and its keys' presence, a bit in a word and
  // the word's in a summary word.  The keys are listed where the row's entries go, as
  // they first come.  When the row ends, the words the summary marks, read in order, give
  // its keys sorted — or a sort of the list, when the summary's span, (largest -
  // smallest) / 4096 words, is more than four a key.  Each key's values are added in the
  // order they came, from zero: the sums of the rows appended and merged.
  __attribute__((noinline)) void to_dense(i64 j) {  // (the row so far ascending, each key once)
    grow(std::max<i64>(ke[-1], j) + 1);
    dense = true;
    lo = INT64_MAX;
    hi = -1;
    I* const end = ke;
    ke = kr;
    for (I* i = kr; i < end; i++) touch(*i, v0[i - k0]);  // (each key back in its place)
  }

  void grow(i64 top) {  // the table holds keys below top at least (doubled, up to SPREAD
    if (top <= i64(ws.size())) return;  // and the columns)
    const auto n = std::size_t(std::min({row<V>::SPREAD, std::max<i64>(top, 2 * i64(ws.size())),
                                         bounded ? cols : INT64_MAX}));
    ws.resize(n, V{});
    bits.resize((n + 63) / 64, 0);
    summary.resize((n + 4095) / 4096, 0);
  }

  void touch(i64 j, V v) {  // the table's result[k][j] += v, j inside it
    auto& word = bits[std::size_t(j >> 6)];
    const std::uint64_t bit = std::uint64_t(1) << (j & 63);
    if (!(word & bit)) {
      word |= bit;
      summary[std::size_t(j >> 12)] |= std::uint64_t(1) << ((j >> 6) & 63);
      if (ke == kc) reserve(2 * (kc - k0), ke - k0);
      *ke++ = I(j);
      lo = std::min(lo, j);
      hi = std::max(hi, j);
    }
    add_into(ws[std::size_t(j)], v);
  }

  void flush() {  // the table's row written in key order, without zeros; the table zero again
    I* u = kr;
    const auto out = [&](i64 k) {
      V& x = ws[std::size_t(k)];
      if (!is_zero(x)) {
        v0[u - k0] = x;
        *u++ = I(k);
      }
      x = V{};
    };
    if ((hi >> 12) - (lo >> 12) <= 4 * (ke - kr)) {
      for (i64 w = lo >> 12; w <= (hi >> 12); w++) {
        for (std::uint64_t m = summary[std::size_t(w)]; m; m &= m - 1) {
          const i64 b = (w << 6) + __builtin_ctzll(m);
          for (std::uint64_t x = bits[std::size_t(b)]; x; x &= x - 1) out((b << 6) + __builtin_ctzll(x));
          bits[std::size_t(b)] = 0;
        }
        summary[std::size_t(w)] = 0;
      }
    } else {  // (few keys far apart)
      std::sort(kr, ke);
      for (I* i = kr; i < ke; i++) {
        bits[std::size_t(*i >> 6)] = 0;
        summary[std::size_t(*i >> 12)] = 0;
        out(*i);
      }
    }
    km = ke = u;
    dense = false;
  }

  void spill() {  // the table's row back in the arrays, sorted: appended to from here on
    flush();
    shuffled = true;
    small = false;
  }

  void finish() {
    if (done) return;
    end_row();
    const i64 top = ke - k0;
    while (pe < pn) *pe++ = top;
    idx.resize(std::size_t(top));
    val.resize(std::size_t(top));
    if constexpr (!std::is_same_v<I, i64>) {  // 32-bit row pointers too, as scipy's, where
      if (top <= INT32_MAX) {                 // the entries allow: narrowed in place
        narrow_in_place(p0, pn - p0);
        o->narrowed |= 1 << 2;
      }
    }
    done = true;
  }
};

// A compressed layer's entries grouped by their keys (codegen/emit.py, ByKey): for each
// key j in [0, m), the entries p of rows r in [0, n) with idx[p] == j, r ascending — a
// counting sort of the positions, as scipy's csr_tocsc.  A key outside [0, m) is one the
// sizes analysis put inside the result: reported as the result's write would be.
struct keyed {
  buffer<i64> pos, row, at;  // key j's entries: row[q], at[q] for q in [pos[j], pos[j+1])
  i64 pairs = 0;             // the sum of each row's entries squared (βAᵀA's updates)
  i64 keys() const { return i64(pos.size()) - 1; }
  i64 entries() const { return i64(row.size()); }
  i64 pairs_in(i64 lo, i64 hi) const {  // keys lo .. hi - 1's share of them, roughly
    const i64 n = entries();
    return n == 0 ? 0 : i64(__int128(pairs) * (pos[std::size_t(hi)] - pos[std::size_t(lo)]) / n);
  }
};

template <class P, class I> keyed by_key(const arr<P>& pos, const arr<I>& idx, i64 n, i64 m) {
  keyed t;
  t.pos.assign(std::size_t(m + 1), 0);
  const i64 e0 = i64(at(pos, 0)), e1 = i64(at(pos, n));
  for (i64 e = e0; e < e1; e++) {
    const i64 j = i64(at(idx, e));
    if (j < 0 || j >= m) fail(OUTSIDE, -1, double(j));
    t.pos[std::size_t(j + 1)]++;
  }
  for (i64 j = 0; j < m; j++) t.pos[std::size_t(j + 1)] += t.pos[std::size_t(j)];
  t.row.resize(std::size_t(e1 - e0));
  t.at.resize(std::size_t(e1 - e0));
  std::vector<i64> next(t.pos.begin(), t.pos.end() - 1);
  for (i64 r = 0; r < n; r++) {
    const i64 len = std::min<i64>(i64(at(pos, r + 1)) - i64(at(pos, r)), i64(1) << 27);
    t.pairs = std::min(t.pairs + len * len, i64(1) << 54);  // (a guess capped below: no overflow)
    for (i64 e = i64(at(pos, r)), end = i64(at(pos, r + 1)); e < end; e++) {
      const auto q = std::size_t(next[std::size_t(at(idx, e))]++);
      t.row[q] = r;
      t.at[q] = e;
    }
  }
  return t;
}

template <class M> void prune(const matrix_row<M>&) {}  // (made so when it ends)

template <class M> void add_into(const matrix_entry<M>& e, typename M::value v) { e += v; }

template <class M> void add_into(const matrix_row<M>& a, const dict<typename M::value>& b) {
  for (const auto& [k, v] : b) a[k] += v;
}

// A csr's cursors, copied into a kernel that writes its rows in key order (``writer``;
// codegen/emit.py): a local that escapes nowhere (its row and entry proxies are inlined,
// and the slow path takes them member by member), so they stay in registers: counts over
// the arrays' starts, fewer than pointers (GCC spilled VVA's: its rows 1.3-1.5 -> 1.1 ns each,
// and a row not clean has no row of its own here, which spares a test a row).  A row is
// *clean* while its keys came in ascending order, each once, none zero: it then ends as it
// is (no sort, no pruning), and the next row starts by writing the row pointers up to it.
// Anything else — a key not above the last or outside the columns, a zero, a full array,
// a row out of order or outside — goes to csr::add with the cursors written back, and
// they are read again after.
template <class V, class I> struct csr_writer {
  using value = V;
  // `last` of a row that is not clean (no key the fast path takes is as large: it takes
  // keys in [0, cols), and cols is at most it; csr::add may take INT64_MAX, and the row
  // is then not clean, rightly)
  static constexpr i64 MESSY = INT64_MAX;
  static constexpr i64 NO_ROW = -2;  // `row` while the current row is not clean (and
                                     // `last` is MESSY: the two go together)
  struct cursors {  // (read from the csr again after each of its own adds)
    i64 n, cols, last;
    i64 row, e, cap;  // the current row, the entries written, room for them
    i64* p0;
    I* k0;
    V* v0;
  };
  csr<V, I>* c;  // (null once the rows are finished)
  cursors at;

  explicit csr_writer(csr<V, I>& x) : c(&x), at(load(c)) {}
  csr_writer(const csr_writer&) = delete;  // (one writer a csr, its cursors once)
  csr_writer& operator=(const csr_writer&) = delete;
  ~csr_writer() {
    if (c) sync(c, at);
  }

  static cursors load(const csr<V, I>* c) {  // the csr's; its current row clean if empty
    const bool empty = c->pe > c->p0 && c->ke == c->k0 + c->pe[-1] && !c->dense &&
                       !c->shuffled;
    return {c->rows(), c->cols, empty ? -1 : MESSY, empty ? c->rows_begun() - 1 : NO_ROW,
            c->ke - c->k0, c->kc - c->k0, c->p0, c->k0, c->v0};
  }

  // The cursors back, a clean row as csr::add leaves one (neither shuffled nor in the
  // table: it was not when found clean, and the next rows start so); nothing while a row
  // is not clean, which only csr::add has written since the cursors were read.
  static void sync(csr<V, I>* c, const cursors& a) {
    if (a.row == NO_ROW) return;
    c->pe = a.p0 + a.row + 1;
    c->ke = a.k0 + a.e;
    c->kr = c->km = a.k0 + a.p0[a.row];
    c->small = a.last < sdql::row<V>::SPREAD;
  }

  matrix_row<csr_writer> operator[](i64 k) { return {this, k}; }
  i64 rows() const { return at.n; }
  void expect(i64 entries) {
    sync(c, at);
    c->expect(entries);
    at = load(c);
  }

  void add(i64 k, i64 j, V v) {  // result[k][j] += v
    cursors& a = at;
    if (k != a.row) {  // the next row, after a clean one: it starts here (NO_ROW + 1 is
      if (k != a.row + 1 || std::uint64_t(k) >= std::uint64_t(a.n) ||  // none: -1 >= n)
          std::uint64_t(j) >= std::uint64_t(a.cols) || is_zero(v) || a.e == a.cap)
        return slow(k, j, v, true);
      a.p0[++a.row] = a.e;
    } else if (j <= a.last || j >= a.cols || is_zero(v) || a.e == a.cap) {
      return slow(k, j, v, j > a.last);  // (never for a row not clean: last is MESSY)
    }
    a.v0[a.e] = v;
    a.k0[a.e++] = I(j);
    a.last = j;
  }

  // (clean: csr::add appends to a row that is, or starts one; v and the row decide.  The
  // cursors go back and come again member by member: to the compiler they are scalars,
  // which no store of an entry may change, not a struct whose address escapes)
  void slow(i64 k, i64 j, V v, bool clean) {
    if (at.row == NO_ROW) clean = clean && k != c->rows_begun() - 1;  // (its own row: not)
    sync(c, at);
    added(c, k, j, v);
    at = load(c);
    if (clean && j >= 0 && !is_zero(v) && !c->dense && !c->shuffled) {
      at.last = j;
      at.row = c->rows_begun() - 1;
    }
  }

  __attribute__((noinline)) static void added(csr<V, I>* c, i64 k, i64 j, V v) {
    c->add(k, j, v);
  }

  // A loop whose position k writes row k's only entry, on the diagonal (emit.py's
  // diagonal_rows), runs in blocks: rows_ahead(k, stop) checks at once, for rows k ..
  // stop-1, what add checks at each entry — the rows and columns they are in, room for
  // their entries, none of the rows written yet — and makes the rows before k empty;
  // the block's diagonal(k, v) then store bare and rows_behind(stop) puts the cursors
  // where add would have left them.  Where rows_ahead says no, the block goes through add.
  bool rows_ahead(i64 k, i64 stop) {
    cursors& a = at;
    if (stop > a.n || stop > a.cols || a.row == NO_ROW || k < a.row ||  // (a row is >= 0)
        (k == a.row && a.e != a.p0[a.row]))
      return false;
    if (a.cap - a.e < stop - k) {  // doubled, room enough: cap >= n >= stop - k from the
      const i64 row = a.row;         // first (csr's guess, an entry a row); the last key
                                     // is rows_behind's to set
      sync(c, at);
      c->reserve(2 * a.cap, a.e);
      at = load(c);
      at.row = row;
    }
    for (i64 r = a.row + 1; r < k; r++) a.p0[r] = a.e;
    return true;
  }

  void diagonal(i64 k, V v) {  // result[k][k] += v, its row's only add (stored if not 0)
    cursors& a = at;
#ifdef SDQL_CHECKED
    if (k < 0 || k >= a.n || k >= a.cols || a.e >= a.cap || k < a.row)
      throw std::logic_error("a bare store outside the result's rows or arrays");
#endif
    a.p0[k] = a.e;
    a.v0[a.e] = v;
    a.k0[a.e] = I(k);
    a.e += !is_zero(v);
  }

  void rows_behind(i64 stop) {
    cursors& a = at;
    a.row = stop - 1;
    a.last = a.e > a.p0[a.row] ? a.row : -1;
  }

  void finish() {
    sync(c, at);
    c->finish();
    c = nullptr;
  }
};

template <class V, class I> csr_writer<V, I> writer(csr<V, I>& x) { return csr_writer<V, I>(x); }
template <class V, class I> void prune(csr_writer<V, I>& w) { w.finish(); }

template <class V, class I> void prune(csr<V, I>& x) { x.finish(); }

template <class T> output* encode(const T& x) {
  auto o = outputs.take();  // released if encoding throws (bad_alloc)
  constexpr int D = depth<T>::value;
  i64 n[D + 1] = {};
  if constexpr (D > 0) count_at(x, n); else n[0] = 1;
  o->index.resize(std::size_t(2 * D));
  i64 instances = 1;
  for (int l = 0; l < D; l++) {
    o->index[std::size_t(2 * l)].reserve(std::size_t(instances + 1));
    o->index[std::size_t(2 * l + 1)].reserve(std::size_t(is_scalar_v<T> ? 0 : n[l]));
    o->index[std::size_t(2 * l)].push_back(0);
    instances = n[l];
  }
  if constexpr (std::is_same_v<typename leaf<T>::type, double>) o->reals.reserve(std::size_t(n[D]));
  else o->ints.reserve(std::size_t(n[D]));
  encode_at(x, *o, 0);
  return o.release();
}

// A number comes back in the status, not as an output.
inline output* number(status* st, double x) { st->real = x; return nullptr; }
inline output* number(status* st, i64 x) { st->integer = x; return nullptr; }
inline output* number(status* st, bool x) { st->integer = x; return nullptr; }

template <class V, class I> output* encode(csr<V, I>& x) {
  x.finish();
  return x.o.release();
}

// ---- a loop at the top on several threads ------------------------------------------------
//
// A sum is a commutative monoid's reduction: the loop's positions are cut into `threads`
// contiguous chunks, the first adds into the destination itself and each other into its
// own zero of the destination's shape (local<D>), added in in chunk order after all have
// run.  The result depends on the thread count, never on scheduling.  A failure in a
// chunk is rethrown after all have stopped, the first chunk's first: the failure the
// loop run in order would meet first.  The floating-point flags of each chunk are raised
// in the caller's thread, where run() reads them.

template <class D> struct local {  // a scalar, a dict, an array: a fresh zero
  D d{};
  explicit local(const D&) {}
  D& get() { return d; }
  void into(D& dest) { add_into(dest, d); }
};

template <class V> struct local<vec<V>> {
  vec<V> d;
  explicit local(const vec<V>& x) : d(i64(x.items.size())) {}
  vec<V>& get() { return d; }
  void into(vec<V>& dest) {
    for (std::size_t i = 0; i < d.items.size(); i++) add_into(dest.items[i], d.items[i]);
  }
};

template <class V> struct local<work<V>> {  // a workspace of its own, added in by its keys
  work<V> d;
  explicit local(const work<V>& x) : d(x.n) {}
  work<V>& get() { return d; }
  void into(work<V>& dest) {
    d.prune();
    for (const i64 k : d.keys) add_into(dest[k], d.values[std::size_t(k)]);
  }
};

template <int L> struct local<dense_ref<L>> {
  std::vector<double> buf;
  dense_ref<L> d;
  explicit local(const dense_ref<L>& x)
      : buf(std::size_t(x.shape[0] * x.stride)), d(buf.data(), x.shape) {}
  dense_ref<L>& get() { return d; }
  void into(dense_ref<L>& dest) {
    for (std::size_t i = 0; i < buf.size(); i++) dest.p[i] += buf[i];
  }
};

template <class V, class I> struct local<csr<V, I>> {  // rows of its own, appended after
  csr<V, I> d;                                        // the others'
  explicit local(const csr<V, I>& x) : d(x.rows(), x.bounded ? x.cols : -1) {}
  csr<V, I>& get() { return d; }
  void into(csr<V, I>& dest) {  // (this chunk's rows all come after the destination's)
    d.end_row();
    const i64 written = d.pe - d.p0;  // rows 0 .. written - 1: the last one ends at ke
    for (i64 k = 0; k < written; k++) {
      const i64 a = d.p0[k], b = k + 1 < written ? d.p0[k + 1] : d.ke - d.k0;
      if (a == b) continue;
      dest.start(k);
      const i64 used = dest.ke - dest.k0;
      if (dest.kc - dest.ke < b - a) dest.reserve(std::max(2 * (dest.kc - dest.k0), used + b - a), used);
      std::copy(d.k0 + a, d.k0 + b, dest.ke);
      std::copy(d.v0 + a, d.v0 + b, dest.v0 + (dest.ke - dest.k0));
      dest.ke += b - a;
      dest.km = dest.ke;  // (sorted, each key once, no zeros: as its row ended)
    }
    outputs.give(d.o.release());
  }
};

// A chunk's destination: an array of known size is a view, copied (its fields then stay
// in registers); any other destination is itself.
template <class D> D& view(D& d) { return d; }
template <int L> dense_ref<L> view(dense_ref<L>& d) { return d; }

template <class D, class F> void parallel(i64 lo, i64 hi, D& dest, F&& body) {
  const i64 n = hi > lo ? hi - lo : 0, T = std::min(threads, n);
  if (T <= 1) return body(lo, hi, dest);
  const auto cut = [&](i64 t) { return lo + i64((__int128(n) * t) / T); };
  std::vector<local<D>> parts;
  parts.reserve(std::size_t(T - 1));
  for (i64 t = 1; t < T; t++) parts.emplace_back(dest);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(T));
  std::vector<int> flags(static_cast<std::size_t>(T));
  const auto chunk = [&](i64 t) {
    std::feclearexcept(FE_ALL_EXCEPT);
    try {
      if (t == 0) body(lo, cut(1), dest);
      else body(cut(t), cut(t + 1), parts[std::size_t(t - 1)].get());
    } catch (...) {
      errors[std::size_t(t)] = std::current_exception();
    }
    flags[std::size_t(t)] = std::fetestexcept(FE_ALL_EXCEPT);
  };
  const int before = std::fetestexcept(FE_ALL_EXCEPT);
  std::vector<std::thread> workers;
  i64 started = 1;
  try {
    for (; started < T; started++) workers.emplace_back(chunk, started);
  } catch (const std::system_error&) {  // no thread to be had: the rest run here
  }
  chunk(0);
  for (i64 t = started; t < T; t++) chunk(t);
  for (auto& w : workers) w.join();
  std::feraiseexcept(before);
  for (const int f : flags) std::feraiseexcept(f);
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  for (i64 t = 1; t < T; t++) parts[std::size_t(t - 1)].into(dest);
}

// Ctrl-C while a kernel runs: the handler run() installs sets the flag the loops poll.
inline void on_sigint(int) { interrupted.store(1, std::memory_order_relaxed); }

struct sigint_guard {  // installed for a call from the main thread; the old handler restored
  bool on;
  struct sigaction old {};
  explicit sigint_guard(bool on_) : on(on_) {
    if (!on) return;
    struct sigaction mine {};
    mine.sa_handler = on_sigint;
    sigemptyset(&mine.sa_mask);
    sigaction(SIGINT, &mine, &old);
  }
  ~sigint_guard() {
    if (on) sigaction(SIGINT, &old, nullptr);
  }
};

// Run a kernel: clear the floating-point flags, report failures through `st`.  The
// caller sets st->flags to 1 to have Ctrl-C stop the kernel (INTERRUPTED).
template <class F> int run(status* st, output** out, F&& kernel) {
  const bool catch_sigint = st->flags & 1;
  threads = std::max<i64>(1, st->threads);
  std::memset(st, 0, sizeof(status));
  st->op = st->span = -1;
  *out = nullptr;
  interrupted.store(0, std::memory_order_relaxed);
  sigint_guard guard(catch_sigint);
  try {
    std::feclearexcept(FE_ALL_EXCEPT);
    std::unique_ptr<output> o(kernel());
    if (interrupted.load(std::memory_order_relaxed)) fail(INTERRUPTED);
    if (std::fetestexcept(FE_OVERFLOW | FE_INVALID | FE_DIVBYZERO)) fail(REAL_OVERFLOW);
    *out = o.release();
    return 0;
  } catch (const failure& f) {
    st->code = f.code;
    st->op = f.op;
    st->span = f.span;
    st->value = f.value;
  } catch (const std::bad_alloc&) {
    st->code = NO_MEMORY;
  } catch (const std::exception& e) {
    st->code = OTHER;
    std::strncpy(st->message, e.what(), sizeof(st->message) - 1);
  }
  return int(st->code);
}

// ---- checking the caller's arrays, once per call (the front door) --------------------------
//
// facts[0]: 1 when the keys are sorted and unique within each segment (canonical);
// facts[1], facts[2]: the smallest and largest inner key of an entry whose value is not
// zero (1 and 0 when there is none); facts[3], facts[4]: the same for the outer keys;
// facts[7]: how many entries store a zero.
// The result is 0, or what is wrong: facts[5] says where (a position) and facts[6] what.

enum check : i64 { CHECK_OK = 0, CHECK_POS_START = 1, CHECK_POS_ORDER = 2, CHECK_POS_END = 3,
                   CHECK_KEY = 4, CHECK_VALUE = 5, CHECK_OUTER_KEY = 6 };

// What a pass learns, kept in registers (the facts array may alias nothing, but the
// compiler cannot know it) and written back once; and its first failure, if any.
struct seen {
  bool sorted = true;
  i64 zeros = 0;
  i64 lo[2] = {INT64_MAX, INT64_MAX}, hi[2] = {INT64_MIN, INT64_MIN};  // inner, outer keys
  i64 code = CHECK_OK, where = 0, what = 0;

  void note(int at, i64 k) {
    lo[at] = std::min(lo[at], k);
    hi[at] = std::max(hi[at], k);
  }

  void fail(i64 c, i64 wh, i64 wt) {
    code = c;
    where = wh;
    what = wt;
  }

  // the facts of a pass over entries that come after this one's, merged into them
  void then(const seen& b) {
    sorted = sorted && b.sorted;
    zeros += b.zeros;
    for (int at = 0; at < 2; at++) {
      lo[at] = std::min(lo[at], b.lo[at]);
      hi[at] = std::max(hi[at], b.hi[at]);
    }
  }

  i64 done(i64* facts) const {
    if (code != CHECK_OK) {
      facts[5] = where;
      facts[6] = what;
      return code;
    }
    facts[0] = sorted;
    for (int at = 0; at < 2; at++) {  // no key: the empty range (1, 0)
      facts[1 + 2 * at] = lo[at] <= hi[at] ? lo[at] : 1;
      facts[2 + 2 * at] = lo[at] <= hi[at] ? hi[at] : 0;
    }
    facts[7] = zeros;
    return CHECK_OK;
  }
};

inline i64 wrong(i64* facts, i64 code, i64 where, i64 what) {
  facts[5] = where;
  facts[6] = what;
  return code;
}

// A check in two halves on two threads when asked (a large input: the pass is bound by
// memory, which two cores read faster): the first failure is the first half's, if it has
// one, so the result is the one-thread pass's.  Without a second thread (none could be
// started), the halves run one after the other.
template <class F> seen in_halves(i64 threads, i64 split, i64 n, F&& pass) {
  seen a, b;
  if (threads < 2 || split <= 0 || split >= n) {
    pass(0, n, a);
    return a;
  }
  try {
    std::thread second([&] { pass(split, n, b); });
    pass(0, split, a);
    second.join();
  } catch (const std::system_error&) {
    pass(0, split, a);
    if (a.code == CHECK_OK) pass(split, n, b);
  }
  if (a.code == CHECK_OK && b.code != CHECK_OK) return b;
  if (a.code == CHECK_OK) a.then(b);
  return a;
}

// Rows [o0, o1) of a compressed format, pos[o0] >= 0: no entry before 0 is read, and a
// row that ends before it starts or past nnz fails before its entries are read.  What it
// sees is kept in a local (registers; out is next to the other half's) and written once.
template <class P, class I>
void check_rows(const P* pos, const I* idx, const double* val, i64 o0, i64 o1, i64 n_inner,
                i64 nnz, seen& out) {
  seen s;
  for (i64 o = o0; o < o1; o++) {
    const i64 a = i64(pos[o]), b = i64(pos[o + 1]);
    if (b < a || b > nnz) {
      s.fail(CHECK_POS_ORDER, o + 1, b);
      break;
    }
    i64 stored = 0, last = -1;
    for (i64 e = a; e < b; e++) {
      const i64 k = i64(idx[e]);
      if (k < 0 || k >= n_inner) {
        s.fail(CHECK_KEY, e, k);
        break;
      }
      if (!std::isfinite(val[e])) {
        s.fail(CHECK_VALUE, e, 0);
        break;
      }
      s.sorted &= k > last;
      last = k;
      const bool nonzero = val[e] != 0;
      stored += nonzero;
      if (nonzero) s.note(0, k);
    }
    if (s.code != CHECK_OK) break;
    s.zeros += (b - a) - stored;
    if (stored) s.note(1, o);
  }
  out = s;
}

// The passes of rows_fast and block_ok, each without a branch per entry: counts, not
// bools, so that the compiler vectorizes their sums.
template <class P> bool pointers_ok(const P* pos, i64 o0, i64 o1, i64 nnz) {
  i64 bad = 0;  // pos[o0 + 1 .. o1] ascending from pos[o0], none beyond the entries
  for (i64 o = o0; o < o1; o++) bad += (pos[o + 1] < pos[o]) | (i64(pos[o + 1]) > nnz);
  return bad == 0;
}

// 1 for a number not finite (a NaN's magnitude compares false), or one no sparse entry
// may hold (not finite, or zero); 0 otherwise: without a branch, so loops that sum them
// are vectorized.
inline i64 infinite(double x) { return !(std::fabs(x) <= std::numeric_limits<double>::max()); }
inline i64 unstorable(double x) { return infinite(x) | (x == 0); }

inline i64 not_finite(const double* v, i64 n) {  // how many of n numbers are not finite
  i64 bad = 0;
  for (i64 i = 0; i < n; i++) bad += infinite(v[i]);
  return bad;
}

inline bool values_ok(const double* val, i64 e0, i64 e1) {  // finite, and none zero
  i64 bad = 0;
  for (i64 e = e0; e < e1; e++) bad += unstorable(val[e]);
  return bad == 0;
}

// Keys e0 .. e1 - 1 (e1 > e0) as one flat array: their least and greatest, and how often
// a key is at most the one before it.
template <class I> i64 descents(const I* idx, i64 e0, i64 e1, I& lo, I& hi) {
  lo = hi = idx[e0];
  i64 n = 0;
  for (i64 e = e0 + 1; e < e1; e++) {
    lo = std::min(lo, idx[e]);
    hi = std::max(hi, idx[e]);
    n += idx[e] <= idx[e - 1];
  }
  return n;
}

// The same facts for rows [o0, o1) where nothing is wrong and no value is zero, in
// passes without a branch per entry (which the compiler vectorizes): the pointers, the
// values, the keys as one flat array (their least and greatest, and how often a key is at
// most the one before it), then the first entry of each row (where that is allowed).
// False otherwise: check_rows finds what is wrong, and where, and counts the zeros.
template <class P, class I>
bool rows_fast(const P* pos, const I* idx, const double* val, i64 o0, i64 o1, i64 n_inner,
               i64 nnz, seen& out) {
  if (!pointers_ok(pos, o0, o1, nnz)) return false;
  const i64 e0 = i64(pos[o0]), e1 = i64(pos[o1]);
  if (e1 == e0 || !values_ok(val, e0, e1)) return false;
  I lo, hi;
  i64 descents = sdql::descents(idx, e0, e1, lo, hi);
  if (lo < 0 || i64(hi) >= n_inner) return false;
  i64 first = -1, last = -1;  // the first and the last row with an entry
  for (i64 o = o0; o < o1; o++) {
    const i64 a = i64(pos[o]), b = i64(pos[o + 1]);
    if (a == b) continue;
    if (first < 0) first = o;
    last = o;
    descents -= a > e0 && idx[a] <= idx[a - 1];  // (a row's first key starts afresh)
  }
  seen s;
  s.sorted = descents == 0;
  s.note(0, i64(lo));
  s.note(0, i64(hi));
  s.note(1, first);
  s.note(1, last);
  out = s;
  return true;
}

template <class P, class I>
i64 check_compressed(const P* pos, const I* idx, const double* val, i64 n_outer, i64 n_inner,
                     i64 nnz, i64* facts, i64 threads, bool exact) {
  if (i64(pos[0]) != 0) return wrong(facts, CHECK_POS_START, 0, i64(pos[0]));
  // The second half's first row: where half the entries start.  pos is not checked yet,
  // but the search ends whatever it holds, at n_outer or at a row whose pos >= nnz / 2.
  i64 lo = 0, hi = n_outer;
  while (lo < hi) {
    const i64 mid = lo + (hi - lo) / 2;
    if (i64(pos[mid]) < nnz / 2) lo = mid + 1; else hi = mid;
  }
  seen s = in_halves(threads, lo, n_outer, [&](i64 o0, i64 o1, seen& part) {
    if (exact || i64(pos[o0]) < 0 || i64(pos[o0]) > nnz ||
        !rows_fast(pos, idx, val, o0, o1, n_inner, nnz, part))
      check_rows(pos, idx, val, o0, o1, n_inner, nnz, part);
  });
  if (s.code == CHECK_OK && i64(pos[n_outer]) != nnz)
    return wrong(facts, CHECK_POS_END, n_outer, i64(pos[n_outer]));
  return s.done(facts);
}

// The check of a CSR input left to the kernel (codegen/emit.py, `rows_checked`): its first
// loop over the input visits the rows in order, in blocks, each block reading its own rows
// only; before a block runs, its rows are checked as the door checks them (rows_fast),
// and the kernel then reads them while they are still in the cache.  A block that is not
// plainly right — a wrong array, keys out of order or repeated, a stored zero — stops the
// kernel (RECHECK): the door then checks the whole input and runs it the usual way, which
// finds what is wrong and where.  `inner` is the column count, or -1: checked already.
constexpr i64 CHECK_BLOCK = 8192;  // entries a block, on average (in L2, with their keys)

// What a kernel's check of a CSR input's block looks at: the values too, or the pointers
// and keys only, where the kernel's result checks the values (emit.values_in_result).
enum check_values : bool { VALUES_IN_RESULT = false, VALUES_CHECKED = true };

// Rows [o0, o1) as rows_fast finds them, canonical and without a zero (no facts kept),
// in passes without a branch per entry or per row; their values not looked at where
// VALUES_IN_RESULT.
template <class P, class I>
bool block_ok(const P* pos, const I* idx, const double* val, i64 o0, i64 o1, i64 n_inner,
              i64 nnz, check_values values = VALUES_CHECKED) {
  const i64 e0 = i64(pos[o0]), e1 = i64(pos[o1]);
  if (e0 < 0 || e0 > nnz || !pointers_ok(pos, o0, o1, nnz)) return false;
  if (e1 == e0) return true;
  // one pass over the entries: their values (finite, none zero) and keys (least, greatest,
  // how often one is at most the one before it)
  I lo = idx[e0], hi = idx[e0];
  i64 descents = 0;
  const auto key = [&](i64 e) {
    lo = std::min(lo, idx[e]);
    hi = std::max(hi, idx[e]);
    descents += idx[e] <= idx[e - 1];
  };
  if (values) {  // (in the keys' pass: one pass over the block)
    i64 bad = unstorable(val[e0]);
    for (i64 e = e0 + 1; e < e1; e++) {
      bad += unstorable(val[e]);
      key(e);
    }
    if (bad) return false;
  } else {
    for (i64 e = e0 + 1; e < e1; e++) key(e);
  }
  for (i64 o = o0; o < o1; o++) {  // a row's first key starts afresh
    const i64 a = i64(pos[o]);
    const bool first = (a > e0) & (a < i64(pos[o + 1]));
    const i64 q = first ? a : e0;
    descents -= first & (idx[q] <= idx[first ? q - 1 : q]);
  }
  return descents == 0 && lo >= 0 && i64(hi) < n_inner;
}

template <class P, class I>
i64 checked_block(i64 k, i64 end, const arr<P>& pos, const arr<I>& idx, const arr<double>& val,
                  i64 inner, check_values values = VALUES_CHECKED) {
  if (inner < 0) return block_end(k, end);
  const i64 rows = pos.n - 1, nnz = idx.n;
  const i64 step = nnz > 0 ? std::clamp<i64>(CHECK_BLOCK * rows / nnz, 1, POLL) : POLL;
  const i64 stop = end - k > step ? k + step : end;
  if (k < 0 || stop > rows || val.n != nnz || pos.start != 0 || idx.start != 0 ||
      val.start != 0)
    fail(RECHECK);
  if (!block_ok(pos.p, idx.p, val.p, k, stop, inner, nnz, values)) fail(RECHECK);
  return stop;
}

// The values a kernel's blocks did not check (VALUES_IN_RESULT), each a factor of a term
// added into its result: one not finite leaves an entry of the result so (NaN times
// anything, an infinity times 0 or not, and a sum with such a term), which is then
// checked; a zero adds nothing (to a sum that is never -0: it starts at +0).
template <int L> void values_in_result(const dense_ref<L>& r, i64 inner) {
  if (inner >= 0 && not_finite(r.p, r.stride * r.shape[0]) != 0) fail(RECHECK);
}
inline void values_in_result(double r, i64 inner) {
  if (inner >= 0 && !std::isfinite(r)) fail(RECHECK);
}

// Coordinates: outer keys (rows, or a vector's keys), inner keys (columns; none for a
// vector).  Canonical: the (outer, inner) pairs strictly increasing.
// The facts of entries [e0, e1) where nothing is wrong and no value is zero, in passes
// without a branch per entry (vectorized), as rows_fast; false otherwise (the exact loop
// then finds what is wrong, and where, and counts the zeros).
template <class R, class C>
bool coo_fast(const R* outer, const C* inner, const double* val, i64 e0, i64 e1, i64 n_outer,
              i64 n_inner, seen& out) {
  if (e1 == e0 || !values_ok(val, e0, e1)) return false;
  R rlo = outer[e0], rhi = outer[e0];
  for (i64 e = e0 + 1; e < e1; e++) {
    rlo = std::min(rlo, outer[e]);
    rhi = std::max(rhi, outer[e]);
  }
  if (rlo < 0 || i64(rhi) >= n_outer) return false;
  i64 descents = 0;  // (an entry not after the one before it: against e0 - 1 too)
  seen s;
  if (inner) {
    C clo = inner[e0], chi = inner[e0];
    for (i64 e = e0 + 1; e < e1; e++) {
      clo = std::min(clo, inner[e]);
      chi = std::max(chi, inner[e]);
    }
    if (clo < 0 || i64(chi) >= n_inner) return false;
    for (i64 e = std::max<i64>(e0, 1); e < e1; e++)
      descents += (outer[e] < outer[e - 1]) | ((outer[e] == outer[e - 1]) & (inner[e] <= inner[e - 1]));
    s.note(0, i64(clo));
    s.note(0, i64(chi));
  } else {
    for (i64 e = std::max<i64>(e0, 1); e < e1; e++) descents += outer[e] <= outer[e - 1];
  }
  s.sorted = descents == 0;
  s.note(1, i64(rlo));
  s.note(1, i64(rhi));
  out = s;
  return true;
}

template <class R, class C>
i64 check_coo(const R* outer, const C* inner, const double* val, i64 nnz, i64 n_outer,
              i64 n_inner, i64* facts, i64 threads, bool exact) {
  seen s = in_halves(threads, nnz / 2, nnz, [&](i64 e0, i64 e1, seen& out) {
    if (!exact && coo_fast(outer, inner, val, e0, e1, n_outer, n_inner, out)) return;
    seen part;  // in registers, written once (see check_rows)
    for (i64 e = e0; e < e1; e++) {
      const i64 r = i64(outer[e]), c = inner ? i64(inner[e]) : 0;
      if (r < 0 || r >= n_outer) {
        part.fail(CHECK_OUTER_KEY, e, r);
        break;
      }
      if (inner && (c < 0 || c >= n_inner)) {
        part.fail(CHECK_KEY, e, c);
        break;
      }
      if (!std::isfinite(val[e])) {
        part.fail(CHECK_VALUE, e, 0);
        break;
      }
      if (e > 0) {
        const i64 r0 = i64(outer[e - 1]), c0 = inner ? i64(inner[e - 1]) : 0;
        if (r < r0 || (r == r0 && c <= c0)) part.sorted = false;
      }
      if (val[e] != 0) {
        part.note(1, r);
        if (inner) part.note(0, c);
      } else {
        part.zeros++;
      }
    }
    out = part;
  });
  return s.done(facts);
}

template <class F> i64 by_width(i64 w, F&& f) {  // an index array's integers: 32 or 64 bits
  if (w == 4) return f(std::int32_t{});
  return f(i64{});
}

}  // namespace sdql

// The result's buffers, then its release (one definition per shared object).
extern "C" {
// Its first n buffers (index buffers, then the leaf values): their data and counts, in
// one call; it returns which index buffers hold 32-bit ints, bit k for buffer k (the
// others are 64-bit).
sdql::i64 sdql_output_buffers(const sdql::output* o, sdql::i64 n, const void** data,
                              sdql::i64* counts) {
  const auto layers = sdql::i64(o->index.size());
  for (sdql::i64 k = 0; k < n; k++) {
    if (k == o->moved) {
      data[k] = o->narrow.data();
      counts[k] = sdql::i64(o->narrow.size());
    } else if (k < layers) {
      data[k] = o->index[std::size_t(k)].data();
      counts[k] = sdql::i64(o->index[std::size_t(k)].size());
    } else if (!o->ints.empty()) {  // the leaf values: int (and bool) or real
      data[k] = o->ints.data();
      counts[k] = sdql::i64(o->ints.size());
    } else {
      data[k] = o->reals.data();
      counts[k] = sdql::i64(o->reals.size());
    }
  }
  return o->narrowed;
}

void sdql_output_free(sdql::output* o) { sdql::outputs.give(o); }

sdql::i64 sdql_outputs_live() {  // made and not yet freed by the caller (kept ones are free)
  std::lock_guard<std::mutex> lock(sdql::outputs.m);
  return sdql::outputs_live - sdql::i64(sdql::outputs.kept.size());
}
}

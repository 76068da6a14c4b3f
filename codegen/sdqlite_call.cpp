// The front door's fast path (codegen/fast.py): a Python extension of one function,
// call(plans, inputs).  A plan is what the first call with data of one signature worked
// out (api.Door): the inputs' kinds and shapes, how the kernel's buffers are taken from
// them, the destination, the entry point.  Data that fit a plan are checked, laid out and
// run here, with no Python in between; anything else is declined (NotImplemented): data of
// another signature, data not plainly right (a number not finite, keys out of order or
// out of range, a zero stored, an array not contiguous), a kernel that fails.  The Python
// door then makes the call as it always does, and says what is wrong.  So this path only
// ever answers what the Python door would: the checks below are each a sufficient
// condition for the door's own (codegen/inputs.py), and the buffers are the ones it makes.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "sdqlite_runtime.h"

namespace {

using sdql::i64;
using entry_fn = int (*)(void* const*, const i64*, sdql::status*, sdql::output**);

// An input's kind; a buffer's part of its input; the destination; what comes back (the
// tables of fast.py, in the same order).
enum Kind { NUMPY, CSR, COO, FLOAT };
enum Part { LEN, POS, IDX, VAL, DATA, CONST };
enum Dest { NONE, DENSE, VEC, ROWS };
enum Back { REAL, INT, BOOL, ARRAY, HANDLE };
enum Field { NAMES, ITEMS, SLOTS, DEST, WORK, CHECKS, ENTRY, BACK, FINISH, OUTPUT, HANDED,
             THREADS, PARALLEL_FROM, MAIN, FIELDS };
using buffers_fn = i64 (*)(const sdql::output*, i64, const void**, i64*);

constexpr int MOST = 64;  // inputs, and buffers taken from them (a call of more is declined)

// One input's arrays as read, and its numbers.
struct input {
  const void* p[3] = {nullptr, nullptr, nullptr};
  i64 n[3] = {0, 0, 0};
  i64 len = 0;  // its LEN part
  double real = 0;
  i64 cols = -1;  // a CSR matrix's columns, which the kernel checks its keys against
};

// An error set while references are let go is held aside meanwhile: a finalizer or the
// cycle collector, run by the release, must not find it pending.
struct held {
  PyObject *type, *value, *trace;
  held() { PyErr_Fetch(&type, &value, &trace); }
  ~held() { PyErr_Restore(type, value, trace); }
};

// The buffers taken from Python objects, released when the call ends.
struct taken {
  Py_buffer b[MOST];
  int n = 0;
  ~taken() {
    held error;
    for (int i = 0; i < n; i++) PyBuffer_Release(&b[i]);
  }
  // obj's buffer, if obj is exactly of `type` (none: any type) and C-contiguous with
  // `ndim` dimensions; null otherwise (no error set).
  Py_buffer* take(PyObject* obj, PyObject* type, int ndim, bool writable = false) {
    if (n == MOST || (type && reinterpret_cast<PyObject*>(Py_TYPE(obj)) != type)) return nullptr;
    Py_buffer& v = b[n];
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                                        (writable ? PyBUF_WRITABLE : 0)) != 0) {
      PyErr_Clear();
      return nullptr;
    }
    n++;
    return v.ndim == ndim ? &v : nullptr;
  }
};

bool real(const Py_buffer* v) {
  return v && v->itemsize == 8 && v->format && std::strcmp(v->format, "d") == 0;
}

bool integer(const Py_buffer* v, i64 size) {  // 32- or 64-bit ints, as numpy writes them
  return v && v->itemsize == size && v->format && v->format[0] && !v->format[1] &&
         std::strchr(size == 4 ? "i" : "lq", v->format[0]);
}

i64 count(const Py_buffer* v) { return v->len / v->itemsize; }

template <class I> i64 at(const void* p, i64 i) { return i64(static_cast<const I*>(p)[i]); }
i64 at(const void* p, i64 size, i64 i) { return size == 4 ? at<std::int32_t>(p, i) : at<i64>(p, i); }

// A vector's keys strictly increasing and below n, its values finite and none zero: what
// check_sparse finds canonical with no zero stored (then entries() are these arrays).
template <class I> bool canonical(const I* keys, const double* vals, i64 nnz, i64 n) {
  I lo, hi;
  return nnz == 0 || (sdql::values_ok(vals, 0, nnz) &&
                      sdql::descents(keys, 0, nnz, lo, hi) == 0 && lo >= 0 && i64(hi) < n);
}

i64 number(PyObject* tuple, Py_ssize_t i) { return PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i)); }

// All the rows of a CSR matrix with index widths wa (its pointers) and wb (its keys), as
// sdql::block_ok checks a block of them.
bool whole(const void* pos, i64 wa, const void* idx, i64 wb, const double* val, i64 rows,
           i64 cols, i64 nnz) {
  return sdql::by_width(wa, [&](auto p) {
    return sdql::by_width(wb, [&](auto k) {
      return i64(sdql::block_ok(static_cast<const decltype(p)*>(pos),
                                static_cast<const decltype(k)*>(idx), val, 0, rows, cols, nnz));
    });
  }) != 0;
}

PyObject* attr(PyObject* obj, const char* name, PyObject*& owned) {
  owned = PyObject_GetAttrString(obj, name);
  if (!owned) PyErr_Clear();
  return owned;
}

struct refs {  // new references, released when the call ends
  PyObject* r[4 * MOST + 4] = {};  // (at most 4 an input, 3 more)
  int n = 0;
  PyObject* keep(PyObject* o) {
    if (o) r[n++] = o;
    return o;
  }
  ~refs() {
    held error;
    for (int i = 0; i < n; i++) Py_DECREF(r[i]);
  }
};

// Which parts of an input of each kind the kernel may be given (fast.py's FLAT; DATA: a
// float, or a numpy array read whole).
bool takes(i64 kind, i64 part) {
  switch (kind) {
    case NUMPY: return part == LEN || part == DATA;
    case CSR: return part == LEN || part == POS || part == IDX || part == VAL;
    case COO: return part == LEN || part == IDX || part == VAL;
    case FLOAT: return part == DATA;
  }
  return false;
}

PyObject* unplanned() {  // a plan fast.py did not make: a bug, said so, not a crash
  PyErr_SetString(PyExc_TypeError, "a plan made otherwise than codegen/fast.py makes it");
  return nullptr;
}

// Read input x of plan item `item` into `in`: false if it does not fit the plan or is not
// plainly right.
bool read(PyObject* x, PyObject* item, taken& t, refs& r, input& in) {
  const i64 kind = number(item, 0);
  PyObject* type = PyTuple_GET_ITEM(item, 1);
  PyObject* shape = PyTuple_GET_ITEM(item, 2);
  switch (kind) {
    case FLOAT:  // api.Door: a float where a real is read (inputs.checked)
      if (!PyFloat_CheckExact(x)) return false;
      in.real = PyFloat_AS_DOUBLE(x);
      in.p[0] = &in.real;
      in.n[0] = 1;
      return std::isfinite(in.real);
    case NUMPY: {  // a float64 array of this shape (inputs._check_numbers)
      const Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
      Py_buffer* v = t.take(x, type, int(ndim));
      if (!real(v)) return false;
      for (Py_ssize_t d = 0; d < ndim; d++)
        if (v->shape[d] != number(shape, d)) return false;
      in.p[0] = v->buf;
      in.n[0] = count(v);
      in.len = ndim ? v->shape[0] : 0;
      return sdql::not_finite(static_cast<const double*>(v->buf), in.n[0]) == 0;
    }
    case CSR: {  // inputs.trusted: the kernel checks the rest as it reads (Kernel.checks)
      if (reinterpret_cast<PyObject*>(Py_TYPE(x)) != type) return false;
      PyObject *s, *pos_o, *idx_o, *val_o;
      if (!r.keep(attr(x, "shape", s)) || PyObject_RichCompareBool(s, shape, Py_EQ) != 1 ||
          !r.keep(attr(x, "indptr", pos_o)) || !r.keep(attr(x, "indices", idx_o)) ||
          !r.keep(attr(x, "data", val_o))) {
        PyErr_Clear();
        return false;
      }
      const i64 rows = number(shape, 0), wa = number(item, 3), wb = number(item, 4);
      Py_buffer *pos = t.take(pos_o, nullptr, 1), *idx = t.take(idx_o, nullptr, 1),
                *val = t.take(val_o, nullptr, 1);
      if (!integer(pos, wa) || !integer(idx, wb) || !real(val) || count(pos) != rows + 1 ||
          at(pos->buf, wa, 0) != 0)
        return false;
      const i64 nnz = at(pos->buf, wa, rows);
      if (nnz < 0 || nnz > count(idx) || nnz > count(val)) return false;
      in.p[0] = pos->buf, in.n[0] = rows + 1;
      in.p[1] = idx->buf, in.n[1] = nnz;
      in.p[2] = val->buf, in.n[2] = nnz;
      in.len = rows;
      in.cols = number(shape, 1);
      // a matrix the kernel does not check as it reads it: checked whole here, as the
      // kernel checks a block (sdql::block_ok: canonical, no zero, nothing not finite)
      return number(item, 5) == 0 || whole(pos->buf, wa, idx->buf, wb,
                                           static_cast<const double*>(val->buf), rows,
                                           in.cols, nnz);
    }
    case COO: {  // a vector, canonical with no zero stored (inputs.check_sparse)
      if (reinterpret_cast<PyObject*>(Py_TYPE(x)) != type) return false;
      PyObject *s, *coords, *val_o;
      if (!r.keep(attr(x, "shape", s)) || PyObject_RichCompareBool(s, shape, Py_EQ) != 1 ||
          !r.keep(attr(x, "coords", coords)) || !PyTuple_CheckExact(coords) ||
          PyTuple_GET_SIZE(coords) != 1 || !r.keep(attr(x, "data", val_o))) {
        PyErr_Clear();
        return false;
      }
      const i64 wa = number(item, 3);
      Py_buffer *keys = t.take(PyTuple_GET_ITEM(coords, 0), nullptr, 1),
                *val = t.take(val_o, nullptr, 1);
      if (!integer(keys, wa) || !real(val) || count(keys) != count(val)) return false;
      const i64 nnz = count(val), n = number(shape, 0);
      const auto* vals = static_cast<const double*>(val->buf);
      if (!(wa == 4 ? canonical(static_cast<const std::int32_t*>(keys->buf), vals, nnz, n)
                    : canonical(static_cast<const i64*>(keys->buf), vals, nnz, n)))
        return false;
      in.p[1] = keys->buf, in.n[1] = nnz;
      in.p[2] = val->buf, in.n[2] = nnz;
      in.len = nnz;
      return true;
    }
  }
  return false;
}

// The buffers of a result handed back in `out`, owned by `owner` (native.Output), as a
// list of numpy arrays over them, each keeping the owner (native.Native.collect).
PyObject* collect(PyObject* plan, PyObject* owner, const sdql::output* out) {
  PyObject* handed = PyTuple_GET_ITEM(plan, HANDED);  // (sdql_output_buffers, count, leaf)
  const auto buffers = reinterpret_cast<buffers_fn>(PyLong_AsVoidPtr(PyTuple_GET_ITEM(handed, 0)));
  const i64 n = number(handed, 1);
  const int leaf = int(number(handed, 2));
  const void* data[MOST];
  i64 counts[MOST];
  if (n < 1 || n > MOST) return unplanned();
  const i64 narrowed = buffers(out, n, data, counts);
  PyObject* list = PyList_New(n);
  for (i64 k = 0; list && k < n; k++) {
    const int type = k < n - 1 ? (narrowed >> k & 1 ? NPY_INT32 : NPY_INT64) : leaf;
    npy_intp dims[1] = {npy_intp(counts[k])};
    PyObject* a;
    if (counts[k] == 0 || !data[k]) {
      dims[0] = 0;
      a = PyArray_ZEROS(1, dims, type, 0);
    } else {
      a = PyArray_New(&PyArray_Type, 1, dims, type, nullptr, const_cast<void*>(data[k]), 0,
                      NPY_ARRAY_CARRAY, nullptr);
      if (a && PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(a), Py_NewRef(owner)) != 0)
        Py_CLEAR(a);  // (the reference is stolen even then)
    }
    if (!a) Py_CLEAR(list);
    else PyList_SET_ITEM(list, k, a);
  }
  return list;
}

// One plan tried: a new reference to the result, NotImplemented (declined), or null with
// an error set (KeyboardInterrupt, or one raised by the plan's finish).
PyObject* attempt(PyObject* plan, PyObject* given) {
  PyObject* names = PyTuple_GET_ITEM(plan, NAMES);
  PyObject* items = PyTuple_GET_ITEM(plan, ITEMS);
  const Py_ssize_t k = PyTuple_GET_SIZE(names);
  if (PyDict_GET_SIZE(given) != k || k > MOST) Py_RETURN_NOTIMPLEMENTED;
  input in[MOST];
  taken t;
  refs r;
  for (Py_ssize_t i = 0; i < k; i++) {
    PyObject* x = PyDict_GetItemWithError(given, PyTuple_GET_ITEM(names, i));
    if (!x || !read(x, PyTuple_GET_ITEM(items, i), t, r, in[i])) {
      PyErr_Clear();
      Py_RETURN_NOTIMPLEMENTED;
    }
  }
  // the kernel's arguments: its input buffers (codegen/native.py), the destination, the
  // workspaces' sizes, the column counts of the inputs it checks
  void* ptrs[3 * MOST];
  i64 lens[3 * MOST];
  i64 cells[3 * MOST];
  int m = 0;
  i64 work = 0;
  PyObject* slots = PyTuple_GET_ITEM(plan, SLOTS);
  PyObject* dest = PyTuple_GET_ITEM(plan, DEST);
  PyObject* shape = PyTuple_GET_ITEM(dest, 1);
  PyObject* sizes = PyTuple_GET_ITEM(plan, WORK);
  PyObject* checks = PyTuple_GET_ITEM(plan, CHECKS);
  if (PyTuple_GET_SIZE(slots) + PyTuple_GET_SIZE(shape) + PyTuple_GET_SIZE(sizes) +
          PyTuple_GET_SIZE(checks) > 3 * MOST)
    Py_RETURN_NOTIMPLEMENTED;  // (more than a call here holds)
  for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(slots); s++) {
    PyObject* slot = PyTuple_GET_ITEM(slots, s);
    const i64 i = number(slot, 0), part = number(slot, 1);
    if (!(part == CONST ? i == -1 : 0 <= i && i < k && takes(number(PyTuple_GET_ITEM(items, i), 0), part)))
      return unplanned();
    const input& x = in[i < 0 ? 0 : i];
    switch (part) {
      case LEN:
        cells[m] = x.len;
        ptrs[m] = &cells[m], lens[m] = 1;
        break;
      case POS: case IDX: case VAL:
        ptrs[m] = const_cast<void*>(x.p[part - POS]), lens[m] = x.n[part - POS];
        break;
      case DATA:
        ptrs[m] = const_cast<void*>(x.p[0]), lens[m] = x.n[0];
        break;
      case CONST: {  // an array of the plan's own (a dense layer's pointers)
        Py_buffer* v = t.take(PyTuple_GET_ITEM(slot, 2), nullptr, 1);
        if (!v) Py_RETURN_NOTIMPLEMENTED;
        ptrs[m] = v->buf, lens[m] = count(v);
        break;
      }
    }
    work += lens[m++];
  }
  PyObject* array = nullptr;  // a dense destination
  switch (number(dest, 0)) {
    case DENSE: {  // numpy's zeroed array, written in place
      npy_intp dims[NPY_MAXDIMS];
      const int nd = int(PyTuple_GET_SIZE(shape));
      if (nd < 1 || nd > NPY_MAXDIMS) Py_RETURN_NOTIMPLEMENTED;
      for (int d = 0; d < nd; d++) dims[d] = npy_intp(number(shape, d));
      array = r.keep(PyArray_ZEROS(nd, dims, NPY_DOUBLE, 0));
      if (!array) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
      }
      ptrs[m] = PyArray_DATA(reinterpret_cast<PyArrayObject*>(array)), lens[m++] = dims[0];
      for (int d = 1; d < nd; d++) ptrs[m] = nullptr, lens[m++] = dims[d];
      break;
    }
    case VEC:
      ptrs[m] = nullptr, lens[m++] = number(shape, 0);
      break;
    case ROWS:
      ptrs[m] = nullptr, lens[m++] = number(shape, 0);
      ptrs[m] = nullptr, lens[m++] = number(shape, 1);
      break;
  }
  for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(sizes); s++)
    ptrs[m] = nullptr, lens[m++] = number(sizes, s);
  for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(checks); s++) {
    const i64 i = number(checks, s);
    if (i < 0 || i >= k) return unplanned();
    ptrs[m] = nullptr, lens[m++] = in[i].cols;  // (-1, not checked, for all but a CSR matrix)
  }
  // an output handle comes back in an Output made before the call (native.py: an interrupt
  // after it leaks nothing)
  const i64 back = number(plan, BACK);
  PyObject* owner = nullptr;
  sdql::output* none = nullptr;
  sdql::output** out = &none;
  if (back == HANDLE) {
    PyObject* handed = PyTuple_GET_ITEM(plan, HANDED);
    if (!PyTuple_CheckExact(handed) || PyTuple_GET_SIZE(handed) != 3) return unplanned();
    PyObject* handle;
    owner = r.keep(PyObject_CallNoArgs(PyTuple_GET_ITEM(plan, OUTPUT)));
    Py_buffer* v = owner && r.keep(attr(owner, "handle", handle))
                       ? t.take(handle, nullptr, 0, true) : nullptr;
    if (!v || v->len != sizeof(void*)) {
      PyErr_Clear();
      Py_RETURN_NOTIMPLEMENTED;
    }
    out = static_cast<sdql::output**>(v->buf);
  }
  sdql::status st{};
  st.flags = PyThread_get_thread_ident() == PyLong_AsUnsignedLong(PyTuple_GET_ITEM(plan, MAIN));
  st.threads = work >= number(plan, PARALLEL_FROM) ? number(plan, THREADS) : 1;
  const auto entry = reinterpret_cast<entry_fn>(PyLong_AsVoidPtr(PyTuple_GET_ITEM(plan, ENTRY)));
  int code;
  Py_BEGIN_ALLOW_THREADS
  code = entry(ptrs, lens, &st, out);
  Py_END_ALLOW_THREADS
  if (code == sdql::INTERRUPTED) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    return nullptr;
  }
  if (code != 0 || (back == HANDLE && !*out))  // (the door runs it again and says why)
    Py_RETURN_NOTIMPLEMENTED;
  PyObject* got;
  switch (back) {
    case REAL: got = PyFloat_FromDouble(st.real); break;
    case INT: got = PyLong_FromLongLong(st.integer); break;
    case BOOL: got = PyBool_FromLong(st.integer != 0); break;
    case ARRAY: got = Py_NewRef(array); break;
    default: got = collect(plan, owner, *out); break;
  }
  PyObject* finish = PyTuple_GET_ITEM(plan, FINISH);
  if (!got || finish == Py_None) return got;
  PyObject* done = PyObject_CallOneArg(finish, got);
  {
    held error;
    Py_DECREF(got);
  }
  return done;
}

PyObject* call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyTuple_CheckExact(args[0]) || !PyDict_CheckExact(args[1])) {
    PyErr_SetString(PyExc_TypeError, "call(plans: tuple, inputs: dict)");
    return nullptr;
  }
  for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(args[0]); p++) {
    PyObject* plan = PyTuple_GET_ITEM(args[0], p);
    if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != FIELDS) {
      PyErr_SetString(PyExc_TypeError, "a plan is a tuple made by codegen/fast.py");
      return nullptr;
    }
    PyObject* got = attempt(plan, args[1]);
    if (got != Py_NotImplemented) return got;
    Py_DECREF(got);
  }
  Py_RETURN_NOTIMPLEMENTED;
}

PyObject* layout(PyObject*, PyObject*) {  // sdql::status as compiled here (fast.py checks it)
  return Py_BuildValue("(nnnn)", Py_ssize_t(sizeof(sdql::status)),
                       Py_ssize_t(offsetof(sdql::status, message)),
                       Py_ssize_t(offsetof(sdql::status, real)), Py_ssize_t(FIELDS));
}

PyMethodDef methods[] = {
    {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call)), METH_FASTCALL,
     "call(plans, inputs): the result of the first plan the inputs fit, else NotImplemented"},
    {"layout", layout, METH_NOARGS, "the status structure's size and two offsets; FIELDS"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "sdqlite_call", nullptr, -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_sdqlite_call() {
  import_array();  // (numpy's C API: returns null, an error set, where numpy cannot be had)
  return PyModule_Create(&module);
}

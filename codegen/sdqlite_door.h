// The front door's checks and conversion (codegen/inputs.py), for the object of the runtime
// alone, which includes this after the runtime: a kernel's object does without their eight
// instantiations of each check (40% of a small kernel's build), and a build that includes
// the runtime first can take it precompiled (codegen/build.py).
#pragma once

#include "sdqlite_runtime.h"

extern "C" {
sdql::i64 sdql_check_compressed(const void* pos, sdql::i64 pos_w, const void* idx, sdql::i64 idx_w,
                                const double* val, sdql::i64 n_outer, sdql::i64 n_inner,
                                sdql::i64 nnz, sdql::i64* facts, sdql::i64 threads,
                                sdql::i64 exact) {
  return sdql::by_width(pos_w, [&](auto p) {
    return sdql::by_width(idx_w, [&](auto i) {
      return sdql::check_compressed(static_cast<const decltype(p)*>(pos),
                                    static_cast<const decltype(i)*>(idx), val, n_outer,
                                    n_inner, nnz, facts, threads, exact != 0);
    });
  });
}

sdql::i64 sdql_check_coo(const void* outer, sdql::i64 outer_w, const void* inner,
                         sdql::i64 inner_w, const double* val, sdql::i64 nnz,
                         sdql::i64 n_outer, sdql::i64 n_inner, sdql::i64* facts,
                         sdql::i64 threads, sdql::i64 exact) {
  return sdql::by_width(outer_w, [&](auto r) {
    return sdql::by_width(inner_w, [&](auto c) {
      return sdql::check_coo(static_cast<const decltype(r)*>(outer),
                             static_cast<const decltype(c)*>(inner), val, nnz, n_outer,
                             n_inner, facts, threads, exact != 0);
    });
  });
}
// A dense n × p matrix's entries that are not zero as CSR (what scipy.sparse.csr_array(a)
// makes of it), for a result written densely that comes back sparse: the rows' counts
// first (ptr[i + 1] - ptr[i]; the entries' count returned), then, into arrays of that
// many, the columns (32- or 64-bit) and values, each row's in column order.
sdql::i64 sdql_dense_counts(const double* a, sdql::i64 n, sdql::i64 p, sdql::i64* ptr) {
  ptr[0] = 0;
  for (sdql::i64 i = 0; i < n; i++) {
    sdql::i64 c = 0;
    for (sdql::i64 j = 0; j < p; j++) c += a[i * p + j] != 0;
    ptr[i + 1] = ptr[i] + c;
  }
  return ptr[n];
}

void sdql_dense_entries(const double* a, sdql::i64 n, sdql::i64 p, void* cols, int wide,
                        double* vals) {
  const auto fill = [&](auto* c) {
    sdql::i64 e = 0;
    for (sdql::i64 i = 0; i < n; i++)
      for (sdql::i64 j = 0; j < p; j++)
        if (const double x = a[i * p + j]; x != 0) {
          c[e] = decltype(+*c)(j);
          vals[e++] = x;
        }
  };
  if (wide) fill(static_cast<std::int64_t*>(cols));
  else fill(static_cast<std::int32_t*>(cols));
}

// How many of n numbers are not finite, for a dense input's check.
sdql::i64 sdql_not_finite(const double* v, sdql::i64 n) { return sdql::not_finite(v, n); }
}

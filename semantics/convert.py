"""Conversions between SDQLite values and numpy arrays, ``scipy.sparse`` matrices and files.

A numpy array is nested dense arrays (a 0-d one a scalar); a ``scipy.sparse`` matrix a
sparse ``{int -> {int -> real}}`` and a 1-d sparse array a ``{int -> real}`` (explicit
zeros dropped, as everywhere in a dictionary).  What each data file means is
``semantics/datafiles.py``'s table; ``load`` makes a value of what it reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

from sdqlite.errors import DataError
from sdqlite.syntax.types import INT, REAL, DictT, Type
from semantics.datafiles import read_data, sparse_declared
from semantics.values import DenseArray, Value, dense, single


def from_numpy(arr: Any) -> tuple[Value, Type]:
    """A numpy array as a (nested) dense array; a 0-d array as a scalar."""
    a = np.asarray(arr)
    if a.dtype.kind in "iu":
        scalar: Type = INT

        def leaf(x: Any) -> Value:
            return int(x)
    elif a.dtype.kind == "f":
        scalar = REAL
        if not np.all(np.isfinite(a)):
            raise DataError("the array holds a number that is not finite (inf or nan)")

        def leaf(x: Any) -> Value:
            return float(x)
    else:
        raise DataError(f"arrays of dtype {a.dtype} have no SDQLite type (use float or int)")

    def build(x: Any) -> Value:
        if x.ndim == 0:
            return leaf(x)
        return dense([build(x[i]) for i in range(x.shape[0])])

    t = scalar
    for _ in range(a.ndim):
        t = DictT(t, dense=True)
    return build(a), t


def from_scipy(m: Any) -> tuple[Value, Type]:
    """A scipy sparse matrix as a sparse ``{int -> {int -> real}}``, a 1-d sparse array as
    a ``{int -> real}`` (zeros dropped, duplicates added).  Its arrays are checked before
    scipy converts them: corrupted ones (an ``indptr`` or an index beyond the shape) are a
    ``DataError``, not a crash inside scipy."""
    m = check_arrays(m)
    if m.ndim == 1:
        vec = scipy.sparse.coo_array(m, copy=True)
        if vec.dtype.kind not in "iuf":
            raise DataError(f"sparse arrays of dtype {vec.dtype} have no SDQLite type")
        vec = vec.astype(np.float64)
        vec.sum_duplicates()
        if not np.all(np.isfinite(vec.data)):
            raise DataError("the array holds a number that is not finite (inf or nan)")
        vec.eliminate_zeros()
        return dict(zip(vec.coords[0].tolist(), vec.data.tolist(), strict=True)), DictT(REAL)
    coo = scipy.sparse.coo_matrix(m)
    if coo.dtype.kind not in "iuf":
        raise DataError(f"sparse matrices of dtype {coo.dtype} have no SDQLite type")
    out: dict[int, dict[int, Value]] = {}
    for i, j, x in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist(), strict=True):
        x = float(x)
        if not np.isfinite(x):
            raise DataError(f"entry ({i}, {j}) is not a finite number")
        row = out.setdefault(int(i), {})
        row[int(j)] = row.get(int(j), 0.0) + x
    cleaned = {i: {j: x for j, x in row.items() if x != 0.0} for i, row in out.items()}
    return {i: row for i, row in cleaned.items() if row}, DictT(DictT(REAL))


def check_arrays(m: Any) -> Any:
    """``m`` with its own arrays checked: pointers and indices within their bounds for
    the compressed formats (entries past the last pointer are no entries: they are left
    out, as scipy's ``nnz`` does), scipy's full check for BSR, every coordinate within
    the shape for COO."""
    try:
        if m.format in ("csr", "csc") and m.ndim == 2:
            _check_compressed(m.indptr, m.indices, len(m.data),
                              m.shape[0] if m.format == "csr" else m.shape[1],
                              m.shape[1] if m.format == "csr" else m.shape[0])
            nnz = int(m.indptr[-1])
            if len(m.indices) != nnz or len(m.data) != nnz:
                m = type(m)((m.data[:nnz], m.indices[:nnz], m.indptr), shape=m.shape)
        elif m.format in ("csr", "bsr"):
            m.check_format(full_check=True)
        elif m.format == "coo":
            for c, n in zip(m.coords, m.shape, strict=True):
                if len(c) != len(m.data):
                    raise ValueError("its coordinates and values differ in length")
                if len(c) and (c.min() < 0 or c.max() >= n):
                    raise ValueError(f"a coordinate lies outside its shape {m.shape}")
    except ValueError as err:
        raise DataError(f"a malformed sparse array: {err}") from None
    return m


def _check_compressed(pos: Any, idx: Any, nvals: int, outer: int, inner: int) -> None:
    """What scipy's own full check leaves out when the last pointer is negative."""
    if len(pos) != outer + 1 or (len(pos) and pos[0] != 0):
        raise ValueError("its indptr has the wrong length or does not start at 0")
    if np.any(np.diff(pos) < 0) or not 0 <= pos[-1] <= min(len(idx), nvals):
        raise ValueError("its indptr decreases or goes beyond its entries")
    used = idx[:pos[-1]]
    if len(used) and (used.min() < 0 or used.max() >= inner):
        raise ValueError("an index lies outside its shape")


def sparse_vector(v: Any) -> dict[int, Value]:
    """A 1-d numpy array as a sparse ``{int -> real}`` (zeros dropped)."""
    out: dict[int, Value] = {}
    for i, x in enumerate(np.asarray(v, dtype=float).tolist()):
        out.update(single(i, float(x)))
    return out


def to_numpy(v: Value, shape: tuple[int, ...] | None = None) -> Any:
    """A value as a dense numpy array; sparse dictionaries need ``shape``."""
    if isinstance(v, DenseArray):
        if v.start != 0:
            raise DataError("only dense arrays starting at position 0 convert to numpy")
        return np.array([to_numpy(x, shape[1:] if shape else None) for x in v.items])
    if isinstance(v, dict):
        if shape is None:
            raise DataError("converting a sparse dictionary to numpy needs a shape")
        out = np.zeros(shape)
        for k, x in v.items():
            if not 0 <= k < shape[0]:
                raise DataError(f"key {k} is outside the shape {shape}")
            out[k] = to_numpy(x, shape[1:])
        return out
    return np.asarray(v)


def to_scipy(v: dict[int, Any], shape: tuple[int, int]) -> Any:
    """A ``{int -> {int -> real}}`` value as a ``scipy.sparse.csr_matrix``."""
    rows, cols, data = [], [], []
    for i, row in v.items():
        for j, x in row.items():
            rows.append(i)
            cols.append(j)
            data.append(float(x))
    return scipy.sparse.csr_matrix((data, (rows, cols)), shape=shape)


def load(path: str | Path, declared: Type | None = None) -> tuple[Value, Type]:
    """Read a data file (``.npy``, ``.mtx``, ``.npz``) as a value and its type; the
    declared type of its input, when there is one, tells a vector from an n×1 matrix
    and a real from an integer (``semantics/datafiles.py``)."""
    data = read_data(path, declared)
    if not scipy.sparse.issparse(data) and sparse_declared(declared, data.ndim):
        data = scipy.sparse.coo_array(data)  # its non-zero entries (datafiles.py)
    return from_scipy(data) if scipy.sparse.issparse(data) else from_numpy(data)

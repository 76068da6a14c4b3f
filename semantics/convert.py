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
    a ``{int -> real}`` (zeros dropped, duplicates added)."""
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

"""Values across the C boundary: the flat buffers of ``codegen/sdqlite_runtime.h``.

A value of a type with L dictionary layers travels as 2L + 1 numpy arrays: per layer a
pointer array (the entries of instance i are ptr[i] .. ptr[i+1]-1; the root is the one
instance of the first layer) and an index array (a sparse layer's key per entry, a dense
layer's start position per instance), then the leaf values (float64 for real, int64 for
int, uint8 for bool).  The instances of a layer are the entries of the layer above.

From numpy arrays and the entries of ``scipy.sparse`` matrices the buffers are built
without per-entry Python work (``from_numpy``, ``from_coo``); our values (nested
``dict``/``DenseArray``) go through ``encode``/``decode``, one step per entry.
"""

from __future__ import annotations

import ctypes
from typing import Any, cast

import numpy as np

from sdqlite.errors import DataError, EvalError
from sdqlite.syntax.types import BOOL, REAL, BoolT, DictT, Type, scalar_of
from semantics.values import Value, dense

Buffers = list[Any]  # numpy arrays


def layers(t: Type) -> list[DictT]:
    out = []
    while isinstance(t, DictT):
        out.append(t)
        t = t.val
    return out


def address(a: np.ndarray[Any, Any]) -> int:
    """An array's address: through the buffer protocol (a fifth of ``a.ctypes.data``'s
    cost), or numpy's way for a read-only or empty one."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(cast(Any, a)))
    except (TypeError, ValueError):
        return int(a.ctypes.data)


def leaf_dtype(t: Type) -> Any:
    leaf = scalar_of(t)
    return np.float64 if leaf == REAL else np.uint8 if isinstance(leaf, BoolT) else np.int64


def _i64(xs: Any) -> Any:
    return np.ascontiguousarray(xs, dtype=np.int64)


# ---- our values -----------------------------------------------------------------------------


def encode(v: Value, t: Type) -> Buffers:
    """The buffers of a value of type ``t`` (sparse layers in key order)."""
    if not isinstance(t, DictT):  # a number: its one buffer
        return [np.array([v], dtype=leaf_dtype(t))]
    ls = layers(t)
    ptr: list[list[int]] = [[0] for _ in ls]
    idx: list[list[int]] = [[] for _ in ls]
    count = [0] * len(ls)
    leaves: list[Any] = []
    todo = [(v, 0)]  # depth first, a whole instance's entries before its children
    while todo:
        x, level = todo.pop()
        if level == len(ls):
            leaves.append(x)
            continue
        if ls[level].dense:
            idx[level].append(x.start)
            children = list(x.items)
        else:
            keys = sorted(x)
            idx[level] += keys
            children = [x[k] for k in keys]
        count[level] += len(children)
        ptr[level].append(count[level])
        todo += [(c, level + 1) for c in reversed(children)]
    out: Buffers = []
    for p, i in zip(ptr, idx, strict=True):
        out += [_i64(p), _i64(i)]
    if scalar_of(t) == REAL:
        out.append(np.array([float(x) for x in leaves], dtype=leaf_dtype(t)))
        return out
    wide = next((x for x in leaves if not -2**63 <= int(x) < 2**63), None)
    if wide is not None:  # the interpreter's integers are unbounded; numpy's and C++'s not
        raise EvalError(f"integer overflow: the result holds {int(wide)}, which does not fit "
                        "in 64 bits")
    out.append(np.array([int(x) for x in leaves], dtype=leaf_dtype(t)))
    return out


def decode(bufs: Buffers, t: Type) -> Value:
    """The value of type ``t`` the buffers hold (real leaves as Python floats)."""
    ls = layers(t)
    ptrs, idxs = [b.tolist() for b in bufs[0:-1:2]], [b.tolist() for b in bufs[1:-1:2]]
    leaves = bufs[-1].tolist()
    leaf = scalar_of(t)
    convert = float if leaf == REAL else bool if leaf == BOOL else int

    def at(level: int, inst: int) -> Value:
        if level == len(ls):
            return convert(leaves[inst])
        lo, hi = ptrs[level][inst], ptrs[level][inst + 1]
        if ls[level].dense:
            return dense([at(level + 1, e) for e in range(lo, hi)], idxs[level][inst])
        return {idxs[level][e]: at(level + 1, e) for e in range(lo, hi)}

    return at(0, 0)


# ---- numpy arrays and entries, without per-entry Python work ------------------------------


def from_numpy(a: Any, t: Type) -> Buffers:
    """A numpy array of ``t``'s shape: one dense layer per dimension (a 0-d array or a
    Python number for a scalar)."""
    arr = np.asarray(a)
    ls = layers(t)
    if arr.ndim != len(ls) or not all(layer.dense for layer in ls):
        raise DataError(f"a {arr.ndim}-d array is not a value of type {t}")
    out: Buffers = []
    instances = 1
    for d in range(arr.ndim):
        n = arr.shape[d]
        out += [np.arange(0, instances * n + 1, n, dtype=np.int64) if n else
                np.zeros(instances + 1, dtype=np.int64), np.zeros(instances, dtype=np.int64)]
        instances *= n
    out.append(np.ascontiguousarray(arr, dtype=leaf_dtype(t)).ravel())
    return out


def from_coo(keys: list[Any], vals: Any, t: Type) -> Buffers:
    """The buffers of a value with sparse layers only, from its entries' keys (one array
    per layer) and values; a repeated key path adds up (in the runtime)."""
    assert not any(layer.dense for layer in layers(t)), "sparse layers only"
    n = len(vals)
    perm = np.lexsort(list(reversed(keys))) if n else np.zeros(0, dtype=np.int64)
    keys = [np.asarray(k, dtype=np.int64)[perm] for k in keys]
    new = np.zeros(n, dtype=bool)  # where the key path up to this layer changes
    starts = np.zeros(1, dtype=np.int64)  # the first entry of each instance of this layer
    out: Buffers = []
    for k in keys:
        new = new.copy()
        new[:1] = True
        new[1:] |= k[1:] != k[:-1]
        entries = np.flatnonzero(new)
        out += [_i64(np.append(np.searchsorted(entries, starts), len(entries))), _i64(k[entries])]
        starts = entries
    out.append(np.ascontiguousarray(np.asarray(vals)[perm], dtype=leaf_dtype(t)))
    return out


def to_numpy(bufs: Buffers, t: Type) -> Any | None:
    """A value of dense layers only as a numpy array, when it is rectangular and every
    array starts at position 0 (else None)."""
    shape = []
    for level in range(len(layers(t))):
        ptr, idx = bufs[2 * level], bufs[2 * level + 1]
        counts = np.diff(ptr)
        if len(idx) and (idx.any() or (counts != counts[0]).any()):
            return None
        shape.append(int(counts[0]) if len(counts) else 0)
    return bufs[-1].reshape(shape)


def scalar(x: Any, t: Type) -> Buffers:
    return [np.array([x], dtype=leaf_dtype(t))]


def to_coo(bufs: Buffers, t: Type) -> tuple[list[Any], Any]:
    """Every leaf's keys (one int64 array per layer) and the leaf values, vectorized."""
    keys: list[Any] = []
    for level, layer in enumerate(layers(t)):
        ptr, idx = bufs[2 * level], bufs[2 * level + 1]
        owner = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
        offset = np.arange(len(owner), dtype=np.int64) - ptr[:-1][owner]
        keys = [k[owner] for k in keys] + [idx[owner] + offset if layer.dense else idx]
    return keys, bufs[-1]

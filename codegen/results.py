"""Results of compiled kernels: where they are stored, and how they come back to Python.

Result layers have storage formats as inputs do (DESIGN.md, "Results have formats too"):

  dense   a real vector whose size the data fix (``sdqlite.check.sizes``): numpy allocates
          it, zeroed, and the kernel adds into it in place (``sdql::dense_ref``): nothing
          is copied back
  vec     a dictionary result whose outer layer's size is known: the kernel accumulates
          into an array of its rows (``sdql::vec``), short sorted rows or hash maps below
  rows    the same for a matrix of scalars whose rows the kernel writes in key order
          (``in_order``), or can write so when its loop over a compressed layer's rows
          runs by key (``emit.by_key``: βAᵀA): each row is written at the end of the CSR
          arrays themselves, made sorted when the next starts (``sdql::csr``), and those
          arrays come back as they are (32-bit column keys and row pointers where the
          result's size allows, as scipy's: ``narrow``)
  value   anything else, built by the kernel and handed back as its buffers

A destination of known size is used only where it fits in memory (the size of a layer
may come from the shape of a huge sparse input that holds few entries); otherwise the
result is built by its entries.  ``destination="dict"`` keeps hash maps throughout (the
paper's "∇SD (dict)").

With ``output="auto"`` a result comes back as numpy or scipy where its sizes are known:
a numpy array for a real vector or a dense array, a ``scipy.sparse.csr_array`` for a real
matrix; a Python number for a scalar; else as an SDQLite value (``output="value"``
always).  Buffers the kernel made are read by numpy without a copy (``codegen/native.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any, Literal

import numpy as np
import scipy.sparse

from codegen import data as D
from codegen import inputs as I
from codegen.dps import (
    RESULT,
    AddInto,
    Assign,
    Bind,
    Decl,
    Enter,
    Loop,
    Lowered,
    MulAddInto,
    Prune,
    Stmt,
    When,
)
from codegen.emit import Destination as Dest
from codegen.emit import by_key, effects
from codegen.emit import workspaces as emit_workspaces
from sdqlite.check.sizes import NO_KEYS, Size
from sdqlite.syntax.ast import Expr, Range, SubArray, Var, free_vars
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type, scalar_of
from semantics.values import is_zero

Output = Literal["auto", "value"]
Destination = Literal["dense", "dict"]
#: the most bytes a destination of known size may take (more: built by its entries)
DEST_BUDGET = 1 << 30


def choose(t: Type, sizes: list[Size], destination: Destination, low: Lowered | None = None,
           *, whole: bool = True) -> Dest:
    """Where a result of type ``t`` goes, its layers' sizes (names) known or not: every
    layer an array where each layer's size is known and the lowered program fills the
    layers below the first (``filled``; unless not ``whole``: too large for these data),
    else CSR rows written in order, else the first layer an array (``vec``)."""
    if destination != "dense" or not isinstance(t, DictT) or t.dense:
        return "value"
    if not sizes or sizes[0] in (None, NO_KEYS):
        return "value"
    depth = len(D.layers(t))
    if whole and scalar_of(t) == REAL and all(s not in (None, NO_KEYS) for s in sizes[:depth]) \
            and (depth == 1 or (low is not None and filled(low, depth))):
        return "dense"
    if (depth == 2 and isinstance(t.val, DictT) and not t.val.dense
            and scalar_of(t) in (REAL, INT) and low is not None
            and (in_order(low) or by_key(low) is not None)):
        return "rows"
    return "vec"


def shape(dest: Dest, t: Type, sizes: list[Size], bounds: Mapping[str, int]) -> list[int]:
    """The sizes of the layers a destination stores as arrays."""
    depth = {"value": 0, "vec": 1, "rows": 1, "dense": len(D.layers(t))}[dest]
    return [bounds[str(s)] for s in sizes[:depth]]


def affordable(dest: Dest, t: Type, sizes: list[Size], bounds: Mapping[str, int]) -> bool:
    """Does the destination of known size fit in memory for these data?"""
    return 8 * math.prod(shape(dest, t, sizes, bounds)) <= DEST_BUDGET


def workspaces(low: Lowered, bounds: Mapping[str, int], destination: Destination = "dense"
               ) -> dict[str, str]:
    """The accumulators kept in an array of their keys' size (``emit.workspaces``), where
    it fits in memory for these data; none for ``destination="dict"`` (hash maps
    throughout).  The array is zeroed lazily: a workspace costs what is written into it."""
    if destination != "dense":
        return {}
    return {acc: size for acc, size in emit_workspaces(low).items()
            if size in bounds and 8 * bounds[size] <= DEST_BUDGET}


def narrow(dest: Dest, sizes: list[Size], bounds: Mapping[str, int]) -> bool:
    """Are a ``rows`` result's columns few enough for 32-bit keys (written so, as scipy
    writes a matrix whose shape allows: a third less to write)?"""
    if dest != "rows" or len(sizes) < 2 or sizes[1] in (None, NO_KEYS):
        return False
    return bounds.get(str(sizes[1]), INT32_SHAPE + 1) <= INT32_SHAPE


#: the largest size scipy stores with 32-bit indices (``scipy.sparse``'s index dtype rule)
INT32_SHAPE = 2**31 - 1


def allocate(dest: Dest, t: Type, sizes: list[Size], bounds: Mapping[str, int]) -> Any:
    """What the kernel's destination needs from the caller: a zeroed array, a size; for
    ``rows``, its rows and its columns (-1 where no size bounds them; else the kernel
    checks every key against them: ``convert`` hands the arrays to scipy unlooked-at
    only with that same bound)."""
    match dest:
        case "dense":
            return np.zeros(shape(dest, t, sizes, bounds))
        case "vec":
            return bounds[str(sizes[0])]
        case "rows":  # (a matrix: a size a layer)
            cols = bound(sizes[1], bounds)
            return bounds[str(sizes[0])], -1 if cols is None else cols
    return None


def bound(s: Size, bounds: Mapping[str, int]) -> int | None:
    """How many keys a layer of size ``s`` has room for with these data: none for a
    layer that holds no keys, unknown (None) where no size bounds it."""
    return 0 if s == NO_KEYS else bounds.get(s) if s is not None else None


def filled(low: Lowered, depth: int) -> bool:
    """Does every write into the result fill its layers below the first: the key of each
    such layer iterates a dense array or range, in a loop inside the one that fixes the
    key above it (``result[k][j] += …`` for j over ``B(k)``, not ``result[k][k]``)?  Then
    an array per layer costs no more than the writes, and is what they address."""
    writes: list[bool] = []

    def walk(stmts: Sequence[Stmt], loops: dict[str, tuple[int, bool]],
             entered: dict[str, tuple[Expr, ...]], level: int) -> None:
        for st in stmts:
            match st:
                case Loop(key, val, _, dt, body):
                    dense = dt.dense
                    walk(body, {**loops, key: (level + 1, dense), val: (level + 1, dense)},
                         entered, level + 1)
                case When(_, body):
                    walk(body, loops, entered, level)
                case Enter(name, dest, _) if dest.root in (RESULT, *entered):
                    entered = {**entered, name: (*entered.get(dest.root, ()), *dest.keys)}
                case AddInto(dest) | MulAddInto(dest) if dest.root in (RESULT, *entered):
                    keys = (*entered.get(dest.root, ()), *dest.keys)
                    writes.append(_fills(keys, loops, depth))
                case Bind(name, _, _) | Decl(name, _):
                    loops = {**loops, name: (level, False)}

    def _fills(keys: tuple[Expr, ...], loops: dict[str, tuple[int, bool]], depth: int
               ) -> bool:
        if len(keys) < depth:  # a dictionary added whole below: not addressed by key
            return False
        for above, key in pairwise(keys[:depth]):
            if not isinstance(key, Var) or key.name not in loops or not loops[key.name][1]:
                return False
            here = max((loops.get(x, (0, False))[0] for x in free_vars(above)), default=0)
            if loops[key.name][0] <= here:
                return False
        return True

    walk(low.body, {}, {}, 0)
    return bool(writes) and all(writes)


def in_order(low: Lowered) -> bool:
    """Does the lowered program write the result's rows in key order, each whole before
    the next: every write into the result inside one loop at the top, over positions in
    ascending order (a range, a sub-array, an array), at the row of that loop's key
    (``result[k][…] += …`` for the loop's own k; a range's value is its key)?"""
    writing = [st for st in low.body  # (the prune at the end ends the rows: not a write)
               if not isinstance(st, Prune) and RESULT in effects([st], {})[0]]
    if len(writing) != 1 or not isinstance(loop := writing[0], Loop):
        return False
    if not (isinstance(loop.dom, Range | SubArray) or loop.dom_type.dense):
        return False
    rows = {Var(loop.key)} | ({Var(loop.val)} if isinstance(loop.dom, Range) else set())
    ok = True

    def walk(stmts: Sequence[Stmt], entered: set[str]) -> None:
        nonlocal ok
        for st in stmts:
            match st:
                case Loop(_, _, _, _, body) | When(_, body):
                    walk(body, entered)
                case Enter(name, dest, _) if dest.root in entered:
                    entered = entered | {name}  # a row, or inside one: fixed by the loop
                case Enter(name, dest, _) if dest.root == RESULT:
                    ok = ok and bool(dest.keys) and dest.keys[0] in rows
                    entered = entered | {name}
                case AddInto(dest) | MulAddInto(dest) | Assign(dest) if dest.root == RESULT:
                    ok = ok and bool(dest.keys) and dest.keys[0] in rows

    walk(loop.body, set())
    return ok


def _csr_of_dense(array: Any) -> Any:
    """A dense matrix's entries that are not zero as a CSR matrix, its columns sorted
    (``scipy.sparse.csr_array(array)``, in two passes of C: ten times faster than by numpy's
    masks), with 32-bit indices where they fit, as scipy's."""
    n, p = array.shape
    a = np.ascontiguousarray(array, dtype=np.float64)
    lib = I._checker()
    indptr = np.empty(n + 1, dtype=np.int64)
    nnz = lib.sdql_dense_counts(D.address(a), n, p, D.address(indptr))
    wide = max(nnz, p) > INT32_SHAPE
    cols = np.empty(nnz, dtype=np.int64 if wide else np.int32)
    vals = np.empty(nnz, dtype=np.float64)
    lib.sdql_dense_entries(D.address(a), n, p, D.address(cols), int(wide), D.address(vals))
    m = scipy.sparse.csr_array((vals, cols, indptr if wide else indptr.astype(np.int32)),
                               shape=(n, p))
    m.has_sorted_indices = True
    return m


def itself(t: Type, output: Output) -> bool:
    """Is a dense destination's array, written in place, the result itself (not a matrix
    of sparse layers, which comes back as scipy's)?"""
    return output == "auto" and not (len(D.layers(t)) == 2 and
                                     not all(lay.dense for lay in D.layers(t)))


def convert(bufs: D.Buffers, stored: Type, t: Type, sizes: list[Size],
            bounds: Mapping[str, int], output: Output, checked: bool = False) -> Any:
    """The result as ``output`` asks: ``stored`` is how the buffers hold it (a dense
    destination's outer layer is an array), ``t`` the program's type; ``checked``: the
    kernel checked its CSR rows' column keys against the size (``rows``: ``sdql::csr``)."""
    if not isinstance(t, DictT):
        x = bufs[0][0]
        return bool(x) if t == BOOL else int(x) if t == INT else float(x)
    whole = stored != t  # a destination of known size: positions 0 .. n-1
    if whole and len(bufs) == 1:  # written in place: the array itself
        array = bufs[0]
        if output == "auto":  # a matrix of sparse layers is scipy's (law 2), as below
            return array if itself(t, output) else _csr_of_dense(array)
        where = np.nonzero(array)
        value: dict[int, Any] = {}
        for path, x in zip(zip(*(k.tolist() for k in where), strict=True),
                           array[where].tolist(), strict=True):
            layer = value
            for k in path[:-1]:
                layer = layer.setdefault(k, {})
            layer[path[-1]] = x
        return value
    if output == "auto":
        layers = D.layers(t)
        shape = [bound(s, bounds) for s in sizes]
        if all(layer.dense for layer in layers):
            arr = D.to_numpy(bufs, t)
            if arr is not None:
                return arr
        elif scalar_of(t) == REAL and len(layers) <= 2 and None not in shape:
            dims = [int(n) for n in shape if n is not None]
            if whole and not layers[1].dense and len(bufs[0]) == 2 and bufs[0][1] == dims[0]:
                # rows 0 .. n-1 in order, each sorted (sdql::row, sdql::csr): CSR's arrays,
                # their column indices checked against the size as below (by sdql::csr
                # as it wrote them, where ``checked``)
                cols = bufs[3]
                if checked or len(cols) == 0 or (cols.min() >= 0 and cols.max() < dims[1]):
                    m = scipy.sparse.csr_array((bufs[-1], cols, bufs[2]),
                                               shape=(dims[0], dims[1]))
                    m.has_sorted_indices = True
                    return m
            keys, vals = D.to_coo(bufs, stored)
            # the result's sizes bound its keys (test_sizes.py): the check keeps a bug
            # there from making a wrong array
            if all(len(k) == 0 or (k.min() >= 0 and k.max() < n)
                   for k, n in zip(keys, dims, strict=True)):
                if 8 * dims[0] > DEST_BUDGET:  # a huge shape with few entries: by them
                    return scipy.sparse.coo_array((vals, tuple(keys)), shape=tuple(dims))
                if len(layers) == 1:
                    out = np.zeros(dims[0])
                    out[keys[0]] = vals
                    return out
                return scipy.sparse.csr_array((vals, (keys[0], keys[1])),
                                              shape=(dims[0], dims[1]))
    decoded: Any = D.decode(bufs, stored)
    if whole:  # the dense outer layer read as the dictionary it stands for
        return {k: x for k, x in enumerate(decoded.items, decoded.start) if not is_zero(x)}
    return decoded

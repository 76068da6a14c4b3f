"""Storage formats (§5.3, Fig. fig:storage_spec): the table, and data laid out in it.

Each format is a named entry: the logical type it stores, its flat parameters, and its
Physical SDQLite definition — the program that builds the logical value from the flat
arrays, written as the paper writes it.  ``dict`` is the identity: the input keeps its
logical layout (hash maps for ``int`` layers, arrays for ``dense_int`` layers: the
paper's "∇SD (dict)"); an input whose type is made of dense arrays only is stored as
itself, so ``dense`` names that too.

A declaration names its format (``A : {int -> {int -> real}} @ csr``); the parser keeps
the name, and ``declared_formats`` resolves it against this table after parsing.  Storage
composition (``sdqlite.storage.compose``) binds inputs to their formats' definitions.

Each entry also lays data out in its format (``flatten``: the keys and values of every
stored entry, and the size of each layer, to the flat arrays), without per-entry
Python work.  ``properties/test_storage.py`` checks that each definition, evaluated by
the interpreter on the flat arrays of a value, gives back that value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from sdqlite.errors import DataError, SDQLTypeError, Span
from sdqlite.syntax.ast import Expr, Lookup, Single, SubArray, Sum, Unique, Var
from sdqlite.syntax.parser import Program, parse_expr
from sdqlite.syntax.types import INT, REAL, DictT, Type, erase

VECTOR, MATRIX = DictT(REAL), DictT(DictT(REAL))
TENSOR3 = DictT(MATRIX)
INDEX, VALUES = DictT(INT, dense=True), DictT(REAL, dense=True)

#: the keys of every stored entry (one int64 array per layer) and their values
Coo = tuple[list[Any], Any]
Flat = dict[str, Any]  # parameter -> int or numpy array


@dataclass(frozen=True)
class Format:
    name: str
    title: str  # as Fig. fig:storage_spec names it
    stores: Type | None  # the logical type it stores (None: any type, as itself)
    params: tuple[tuple[str, Type], ...]
    definition: str  # Physical SDQLite over the parameters ("" for the identity)
    flatten: Callable[[Coo, tuple[int, ...]], Flat] | None = None
    #: per layer: are its keys positions 0 .. size-1 of an array (else any int)?
    positional: tuple[bool, ...] = ()
    #: index arrays whose entries are unique within each segment of a pointer array (None:
    #: throughout): what ``unique(...)`` in the definition promises, and what the layouts
    #: and the compiled front door (codegen/inputs.py) make true of the data
    unique: tuple[tuple[str, str | None], ...] = ()
    #: each array parameter's length: a scalar parameter ``n``, ``n+1``, ``@p`` (the last
    #: entry of pointer array ``p``, every entry of which lies in 0 .. it) or ``@p+1``; the
    #: layouts and the front door make them true (a loop over positions then reads the
    #: arrays of that length without a check: codegen/emit.py, ``Extents``)
    lengths: tuple[tuple[str, str], ...] = ()

    @cached_property
    def program(self) -> Expr:
        return parse_expr(self.definition)

    @property
    def identity(self) -> bool:
        return self.stores is None

    @cached_property
    def keys(self) -> dict[str, int]:
        """The index parameters whose entries are keys, each with its layer (CSR's ``idx``:
        layer 1), read off the definition's singletons; the front door checks them below
        that layer's size (``codegen/inputs.py``)."""
        return _key_arrays(self.program, 0, {}) if self.definition else {}


# ---- laying data out ----------------------------------------------------------------------


def _order(keys: list[Any], vals: Any, by: list[int]) -> tuple[list[Any], Any]:
    """The entries sorted by the layers ``by`` (first is most significant); data in that
    order already (scipy's canonical CSR, our values) are checked, not sorted."""
    if _sorted([keys[b] for b in by]):
        return keys, vals
    perm = np.lexsort([keys[b] for b in reversed(by)])
    return [k[perm] for k in keys], vals[perm]


def _sorted(keys: list[Any]) -> bool:
    """Are the key tuples in lexicographic order?"""
    if not keys or len(keys[0]) < 2:
        return True
    undecided = np.ones(len(keys[0]) - 1, dtype=bool)  # equal so far
    for k in keys:
        step = np.diff(k)
        if (undecided & (step < 0)).any():
            return False
        undecided &= step == 0
    return True


def _compressed(outer: Any, size: int) -> Any:
    """CSR's pos: entry counts per outer key, accumulated (outer keys sorted)."""
    return np.concatenate([[0], np.cumsum(np.bincount(outer, minlength=size))]).astype(np.int64)


def _vector_dense(coo: Coo, shape: tuple[int, ...]) -> Flat:
    (k,), v = coo
    out = np.zeros(shape[0])
    out[k] = v
    return {"len": shape[0], "V": out}


def _vector_coo(coo: Coo, shape: tuple[int, ...]) -> Flat:
    (k,), v = _order(*coo, by=[0])
    return {"len": len(v), "row": k, "val": v}


def _csr(coo: Coo, shape: tuple[int, ...]) -> Flat:
    (i, j), v = _order(*coo, by=[0, 1])
    return {"len": shape[0], "pos": _compressed(i, shape[0]), "idx": j, "val": v}


def _csc(coo: Coo, shape: tuple[int, ...]) -> Flat:
    (i, j), v = _order(*coo, by=[1, 0])
    return {"len": shape[1], "pos": _compressed(j, shape[1]), "idx": i, "val": v}


def _matrix_coo(coo: Coo, shape: tuple[int, ...]) -> Flat:
    (i, j), v = _order(*coo, by=[0, 1])
    return {"len": len(v), "row": i, "col": j, "val": v}


def _dense_rows(coo: Coo, shape: tuple[int, ...]) -> Flat:
    (i, j), v = coo
    out = np.zeros(shape[0] * shape[1])
    out[i * shape[1] + j] = v
    return {"rows": shape[0], "cols": shape[1], "M": out}


def _dense_cols(coo: Coo, shape: tuple[int, ...]) -> Flat:
    (i, j), v = coo
    out = np.zeros(shape[0] * shape[1])
    out[j * shape[0] + i] = v
    return {"rows": shape[0], "cols": shape[1], "M": out}


def _csf(coo: Coo, shape: tuple[int, ...]) -> Flat:
    (i, j, k), v = _order(*coo, by=[0, 1, 2])
    new_i = np.ones(len(v), dtype=bool)
    new_i[1:] = i[1:] != i[:-1]
    new_ij = new_i.copy()
    new_ij[1:] |= j[1:] != j[:-1]
    first_i, first_ij = np.flatnonzero(new_i), np.flatnonzero(new_ij)
    # pos2: for each stored i, where its j's start among the stored (i, j) pairs
    pos2 = np.searchsorted(first_ij, np.append(first_i, len(v))).astype(np.int64)
    pos3 = np.append(first_ij, len(v)).astype(np.int64)
    return {"len": len(first_i), "idx1": i[first_i], "pos2": pos2, "idx2": j[first_ij],
            "pos3": pos3, "idx3": k, "val": v}


#: Fig. fig:storage_spec, one entry per format
_COMPRESSED = (("pos", "len+1"), ("idx", "@pos"), ("val", "@pos"))

FORMATS: dict[str, Format] = {f.name: f for f in [
    Format("dict", "Nested hash maps (the input as it is: ∇SD (dict))", None, (), ""),
    Format("dense", "Vector Dense", VECTOR, (("len", INT), ("V", VALUES)),
           "sum(<_, i> in (0:len)) { unique(i) -> V(i) }", _vector_dense, (True,),
           lengths=(("V", "len"),)),
    Format("coo", "Vector COO", VECTOR, (("len", INT), ("row", INDEX), ("val", VALUES)),
           "sum(<_, i> in (0:len)) { unique(row(i)) -> val(i) }", _vector_coo, (False,),
           (("row", None),), (("row", "len"), ("val", "len"))),
    Format("csr", "Matrix CSR", MATRIX,
           (("len", INT), ("pos", INDEX), ("idx", INDEX), ("val", VALUES)),
           """sum(<_, i> in (0:len))
                { unique(i) ->
                    sum(<p, j> in idx(pos(i):pos(i+1)))
                      { unique(j) -> val(p) } }""", _csr, (True, False),
           (("idx", "pos"),), _COMPRESSED),
    # a column's rows are not unique across columns: no unique on the outer key
    Format("csc", "Matrix CSC", MATRIX,
           (("len", INT), ("pos", INDEX), ("idx", INDEX), ("val", VALUES)),
           """sum(<_, j> in (0:len))
                sum(<p, i> in idx(pos(j):pos(j+1)))
                  { i -> { j -> val(p) } }""", _csc, (False, True), (("idx", "pos"),),
           _COMPRESSED),
    Format("coo_matrix", "Matrix COO", MATRIX,
           (("len", INT), ("row", INDEX), ("col", INDEX), ("val", VALUES)),
           "sum(<_, p> in (0:len)) { row(p) -> { col(p) -> val(p) } }", _matrix_coo,
           (False, False), (), (("row", "len"), ("col", "len"), ("val", "len"))),
    Format("dense_matrix", "Matrix Dense Row Major", MATRIX,
           (("rows", INT), ("cols", INT), ("M", VALUES)),
           """sum(<_, i> in (0:rows))
                { unique(i) ->
                    sum(<_, j> in (0:cols))
                      { unique(j) -> M(i*cols+j) } }""", _dense_rows, (True, True)),
    Format("dense_col", "Matrix Dense Column Major", MATRIX,
           (("rows", INT), ("cols", INT), ("M", VALUES)),
           """sum(<_, i> in (0:rows))
                { unique(i) ->
                    sum(<_, j> in (0:cols))
                      { unique(j) -> M(j*rows+i) } }""", _dense_cols, (True, True)),
    Format("csf", "3-d tensor CSF (compressed sparse fibers)", TENSOR3,
           (("len", INT), ("idx1", INDEX), ("pos2", INDEX), ("idx2", INDEX), ("pos3", INDEX),
            ("idx3", INDEX), ("val", VALUES)),
           """sum(<p1, i> in idx1(0:len))
                { unique(i) ->
                    sum(<p2, j> in idx2(pos2(p1):pos2(p1+1)))
                      { unique(j) ->
                          sum(<p3, k> in idx3(pos3(p2):pos3(p2+1)))
                            { unique(k) -> val(p3) } } }""", _csf,
           (False, False, False), (("idx1", None), ("idx2", "pos2"), ("idx3", "pos3")),
           (("idx1", "len"), ("pos2", "len+1"), ("idx2", "@pos2"), ("pos3", "@pos2+1"),
            ("idx3", "@pos3"), ("val", "@pos3"))),
]}

def _key_arrays(e: Expr, layer: int, entries: dict[str, str]) -> dict[str, int]:
    """The arrays whose entries are the keys of the singletons in ``e`` (at ``layer``);
    ``entries``: a sum's value binder -> the array it iterates."""
    match e:
        case Sum(k, v, dom, body):
            inner = {x: a for x, a in entries.items() if x not in (k, v)}
            while isinstance(dom, SubArray | Unique):
                dom = dom.arr if isinstance(dom, SubArray) else dom.arg
            if isinstance(dom, Var):
                inner[v] = dom.name
            return _key_arrays(body, layer, inner)
        case Single(key, val):
            out = _key_arrays(val, layer + 1, entries)
            while isinstance(key, Unique):
                key = key.arg
            match key:
                case Var(x) if x in entries:
                    out[entries[x]] = layer
                case Lookup(Var(a), _):
                    out[a] = layer
            return out
    return {}  # (a definition is sums of singletons)


#: what users may write: ``coo`` and ``dense`` name the vector or the matrix format
#: according to the input's type
ALIASES: dict[tuple[str, Type], str] = {("coo", MATRIX): "coo_matrix",
                                      ("dense", MATRIX): "dense_matrix"}


def _all_dense(t: Type) -> bool:
    return isinstance(t, DictT) and t.dense and (not isinstance(t.val, DictT)
                                                 or _all_dense(t.val))


def formats_for(t: Type) -> list[str]:
    """The formats an input of type ``t`` may be stored in, as users name them."""
    logical = erase(t)
    short = {full: name for (name, stores), full in ALIASES.items() if stores == logical}
    names = ["dict"] + [short.get(f.name, f.name) for f in FORMATS.values()
                        if f.stores == logical]
    return names + (["dense"] if _all_dense(logical) else [])


def format_names() -> list[str]:
    """Every format as users name it (``csr``, ``coo``, ``dense``, …)."""
    return sorted({*FORMATS, "coo", "dense"} - set(ALIASES.values()))


def resolve(name: str, t: Type, span: Span | None = None, where: str = "") -> Format:
    """The format ``name`` for an input of type ``t`` (aliases resolved); a located error
    when it does not store that type."""
    logical = erase(t)
    full = ALIASES.get((name, logical), name)
    if full == "dense" and _all_dense(logical):
        return FORMATS["dict"]  # an array is stored as itself
    if full not in FORMATS:
        known = ", ".join(format_names())
        raise SDQLTypeError(f"{where}unknown storage format {name!r} (formats: {known})", span)
    fmt = FORMATS[full]
    if fmt.stores is not None and fmt.stores != logical:
        fits = ", ".join(formats_for(t))
        raise SDQLTypeError(f"{where}format {name} ({fmt.title}) stores {fmt.stores}, not "
                            f"{logical}; formats for {logical}: {fits}", span)
    return fmt


def declared_formats(program: Program) -> dict[str, Format]:
    """The format each declaration names (``A : ... @ csr``), resolved against the table;
    a located error where one does not fit its input's type."""
    return {d.name: resolve(d.format, d.type, d.format_span, f"input {d.name}: ")
            for d in program.decls if d.format is not None}


def layout(fmt: Format, coo: Coo, sizes: tuple[int | None, ...]) -> Flat:
    """Data (every stored entry's keys and value) laid out in ``fmt``'s flat arrays.  A
    positional layer's size is ``sizes``' (declared, or known from the data), else one
    past its largest key; its keys must lie in 0 .. size-1."""
    assert fmt.flatten is not None, "the identity has no flat arrays"
    keys, _ = coo
    shape = []
    for k, size, positional in zip(keys, sizes, fmt.positional, strict=True):
        low, top = (int(k.min()), int(k.max()) + 1) if len(k) else (0, 0)
        if positional and low < 0:
            raise DataError(f"key {low} is negative, but format {fmt.name} stores this layer's "
                            "keys as positions 0 .. size-1 (formats dict and coo store any key)")
        if positional and size is not None and top > size:
            raise DataError(f"key {top - 1} is outside 0 .. {size - 1} (the layer's size)")
        shape.append(size if size is not None else top)
    return fmt.flatten(coo, tuple(shape))

"""The compiled backend's front door: each input's data read, checked once, laid out.

Data come as numpy arrays, ``scipy.sparse`` matrices and arrays, Python (or numpy)
numbers, or SDQLite values (nested ``dict``/``DenseArray``).  Each is read into an
``Arg``: its SDQLite type (the declaration's, or its data's), what it came as, and its
data.  A scipy input's own arrays are checked once, in compiled code, before anything
else reads them (``sdql_check_*`` in ``sdqlite_runtime.h``): pointers monotone and within
the entries, keys within the shape, values finite.  A corrupted ``indptr`` or a row index
beyond the shape is a ``DataError`` naming the input, never a crash inside scipy.  The
same pass tells whether the keys are canonical (sorted, each once per row) and the range
of the keys of the non-zero entries in each layer: the facts the sizes check needs
(``semantics/extents.py``), without expanding the matrix.

Laid out in a format (``layout``), canonical CSR or CSC arrays are used as they are,
32-bit indices too (the kernel is built for the width it gets); anything else is made
canonical once, on a copy, and a layout whose arrays would not fit in memory (the row
pointers of a matrix with 2⁴⁰ rows) is refused before anything is allocated.
"""

from __future__ import annotations

import ctypes
import math
import os
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import numpy as np
import scipy.sparse

from codegen import data as D
from codegen.build import build
from codegen.emit import translation_unit
from sdqlite.check.sizes import declared
from sdqlite.errors import DataError
from sdqlite.storage.formats import Coo, Format, layout
from sdqlite.syntax.types import INT, REAL, DictT, Type, scalar_of
from semantics.datafiles import sparse_declared
from semantics.extents import Layer, facts
from semantics.values import DenseArray, Value, data_mismatch, has_type, type_of

Kind = Literal["numpy", "scipy", "value"]
INT64 = np.iinfo(np.int64)
INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))  # index arrays read as they are
#: the most bytes a layout's arrays may take beyond the data's own entries (row pointers
#: of a matrix with many empty rows, a dense vector of a huge sparse one)
LAYOUT_BUDGET = 1 << 30


@dataclass(frozen=True)
class Sparse:
    """A checked ``scipy.sparse`` input: its shape, its arrays as given (``fmt`` is csr,
    csc or coo; float64 values), whether their keys are canonical, and per layer the
    smallest and largest key of a non-zero entry (None when it has none)."""

    shape: tuple[int, ...]
    fmt: str
    arrays: tuple[Any, ...]  # csr, csc: (indptr, indices, data); coo: (*coords, data)
    canonical: bool
    keys: tuple[tuple[int, int] | None, ...]
    zeros: int = 0  # entries that store a zero

    @property
    def nnz(self) -> int:
        return len(self.arrays[-1])

    def compressed(self, fmt: str) -> tuple[Any, Any, Any]:
        """Canonical CSR (or CSC) arrays: the caller's own when they are so already."""
        if self.fmt == fmt and self.canonical:
            return self.arrays[0], self.arrays[1], self.arrays[2]
        outer = self.shape[0] if fmt == "csr" else self.shape[1]
        _affordable(8 * (outer + 1), f"the {fmt} row pointers of a {_shape(self.shape)} matrix")
        m = self.scipy()
        m = scipy.sparse.csr_array(m) if fmt == "csr" else scipy.sparse.csc_array(m)
        if m is self.scipy() or not m.has_canonical_format:
            m = m.copy()
            m.sum_duplicates()  # (safe: the arrays were checked)
        return m.indptr, m.indices, m.data

    def scipy(self) -> Any:
        """The matrix or vector as scipy holds it (checked arrays: safe to convert)."""
        match self.fmt:
            case "csr":
                return scipy.sparse.csr_array((self.arrays[2], self.arrays[1], self.arrays[0]),
                                              shape=self.shape[:2])  # type: ignore[arg-type]
            case "csc":
                return scipy.sparse.csc_array((self.arrays[2], self.arrays[1], self.arrays[0]),
                                              shape=self.shape[:2])  # type: ignore[arg-type]
        return scipy.sparse.coo_array((self.arrays[-1], tuple(self.arrays[:-1])),
                                      shape=self.shape)

    def entries(self) -> Coo:
        """Every non-zero entry's keys (32- or 64-bit ints, one array per layer) and
        value, in key order, repeated keys added: canonical arrays as they are."""
        if self.fmt == "coo" and self.canonical:
            keys, vals = list(self.arrays[:-1]), self.arrays[-1]
        elif self.fmt == "coo" or (self.fmt == "csc" and 8 * self.shape[0] > LAYOUT_BUDGET):
            # (csc of many rows: its entries, not csr's row pointers for every row)
            m = scipy.sparse.coo_array(self.scipy(), copy=True)
            m.sum_duplicates()  # (safe: the arrays were checked)
            keys, vals = [np.asarray(k) for k in m.coords], m.data
        else:
            pos, idx, vals = self.compressed("csr")
            rows = np.repeat(np.arange(len(pos) - 1, dtype=np.int64), np.diff(pos))
            keys = [rows, idx]
        if self.zeros == 0 and self.canonical:
            return keys, vals
        keep = vals != 0
        return [k[keep] for k in keys], vals[keep]


@dataclass(frozen=True)
class Arg:
    """An input's data, read once: its type (sizes included), what it came as."""

    name: str
    type: Type
    kind: Kind
    data: Any  # a numpy array, a Sparse, or a value


# ---- reading --------------------------------------------------------------------------------


def read(name: str, x: Any, want: Type | None, *, threads: int = 1) -> Arg:
    """Read an input's data and check it against its declaration (a large sparse input's
    arrays on up to two threads, if ``threads`` allows)."""
    if scipy.sparse.issparse(x):
        return _sparse(name, x, want, threads)
    if isinstance(x, np.ndarray) and x.ndim > 0:
        return Arg(name, _numpy_type(name, x, want), "numpy", x)
    value = plain(name, x, want)
    vt = want if want is not None else type_of(value)
    if vt is None:
        raise DataError(f"the type of input {name} cannot be told from its data; "
                        f"declare it: {name} : TYPE")
    if not has_type(value, vt):
        raise DataError(data_mismatch(name, value, vt, type_of(value)))
    return Arg(name, vt, "value", value)


def signature(x: Any) -> object | None:
    """What of an input's data decides how it is read, sized and laid out, but not its
    checks or its buffers: its Python type, and a numpy array's or a CSR, CSC or COO
    matrix's dtype and shape (``api.Door``).  None: data read afresh on every call (a
    value, a scipy matrix in another format, a numpy scalar or subclass)."""
    t = type(x)
    if t is np.ndarray:
        return (t, x.dtype, x.shape) if x.ndim else None
    if t is float or t is int or t is bool:
        return t
    if scipy.sparse.issparse(x):
        m: Any = x
        return (t, m.format, m.shape, m.dtype) if m.format in ("csr", "csc", "coo") else None
    return None


def checked(name: str, x: Any, t: Type, kind: Kind, want: Type | None, *, threads: int = 1
            ) -> Arg:
    """An input read before with data of its signature (``t`` and ``kind`` known): only
    what these data decide is checked (``read`` on a value)."""
    match kind:
        case "numpy":
            _check_numbers(name, x)
            return Arg(name, t, "numpy", x)
        case "scipy":
            return Arg(name, t, "scipy", check_sparse(name, x, threads))
    if type(x) is float and t == REAL:  # (what ``plain`` does with it)
        return Arg(name, t, "value", _finite(x, f"input {name}"))
    return read(name, x, want, threads=threads)


def plain(name: str, x: Any, want: Type | None, path: str = "") -> Value:
    """An SDQLite value of Python (and numpy) numbers, dicts and DenseArrays: numpy
    scalars read as numbers, an int as a real where a real is declared; a key, an int or
    a real that the compiled code cannot hold (beyond 64 bits, not finite) refused."""
    where = f"input {name}{path}"
    leaf = scalar_of(want) if want is not None else None
    if isinstance(x, np.generic | np.ndarray) and np.ndim(x) == 0:
        x = np.asarray(x).item()
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        if want == REAL or (leaf == REAL and not isinstance(want, DictT)):
            try:
                return _finite(float(x), where)
            except OverflowError:  # (2^1024 - 1 rounds up to 2^1024)
                return _finite(math.inf if x > 0 else -math.inf, where)
        return _int64(x, where)
    if isinstance(x, float):
        return _finite(x, where)
    inner = want.val if isinstance(want, DictT) else None
    if isinstance(x, dict):
        return {_int64(_key(k, where), f"a key of {where}"):
                plain(name, v, inner, f"{path}({k})") for k, v in x.items()}
    if isinstance(x, DenseArray):
        return DenseArray(tuple(plain(name, v, inner, f"{path}({x.start + i})")
                                for i, v in enumerate(x.items)), _int64(x.start, where))
    kind = type(x).__name__
    raise DataError(f"{where}: cannot read data of Python type {kind} (give a numpy array, "
                    "a scipy.sparse matrix, a number, or an SDQLite value: nested dicts of "
                    "numbers)")


def _key(k: Any, where: str) -> int:
    if isinstance(k, np.integer):
        return int(k)
    if isinstance(k, int) and not isinstance(k, bool):
        return k
    raise DataError(f"{where}: a key must be an int, found {k!r}")


def _int64(n: int, where: str) -> int:
    if not INT64.min <= n <= INT64.max:
        raise DataError(f"{where}: {str(n)[:24]} does not fit in 64 bits, the C++ backend's "
                        "int (the interpreter's integers are unbounded: --backend interp)")
    return n


def _finite(r: float, where: str) -> float:
    if not math.isfinite(r):
        raise DataError(f"{where} is not a finite number ({r})")
    return float(r)


def _numpy_type(name: str, a: Any, want: Type | None) -> Type:
    if a.dtype.kind not in "iuf":
        raise DataError(f"input {name}: arrays of dtype {a.dtype} have no SDQLite type "
                        "(use float or int)")
    _check_numbers(name, a)
    if want is None:
        t: Type = INT if a.dtype.kind in "iu" else REAL
        for _ in range(a.ndim):
            t = DictT(t, dense=True)
        return t
    layers = D.layers(want)
    leaf = scalar_of(want)
    dense = (len(layers) == a.ndim and all(layer.dense for layer in layers)
             and (leaf == REAL or (leaf == INT and a.dtype.kind in "iu")))
    if not dense and not sparse_declared(want, a.ndim):  # as the interpreter (datafiles.py)
        raise DataError(f"input {name} is declared {want}, but its data is a {a.ndim}-d "
                        f"array of {a.dtype} (a dense array, or a real vector or matrix "
                        "declared sparse)")
    return want


def _check_numbers(name: str, a: Any) -> None:
    """An array's numbers are finite, and its ints fit in 64 bits."""
    if a.dtype == np.float64 and a.flags.c_contiguous:  # one vectorized pass, no mask
        finite = _checker().sdql_not_finite(D.address(a), a.size) == 0 if a.size else True
    else:
        finite = a.dtype.kind != "f" or bool(np.isfinite(a).all())
    if not finite:
        raise DataError(f"input {name}: the array holds a number that is not finite")
    if a.dtype.kind == "u" and a.size and a.max() > INT64.max:
        raise DataError(f"input {name}: the array holds {a.max()}, which does not fit in 64 "
                        "bits, the C++ backend's int")


# ---- scipy.sparse, checked ------------------------------------------------------------------


_VECTOR, _MATRIX = DictT(REAL), DictT(DictT(REAL))  # a sparse array's logical type


def _sparse(name: str, x: Any, want: Type | None, threads: int = 1) -> Arg:
    logical = _VECTOR if x.ndim == 1 else _MATRIX
    t = want if want is not None else logical
    if t != logical:  # (equality ignores declared extents)
        raise DataError(f"input {name}: a {x.ndim}-d sparse array is a {logical}, but {name} "
                        f"is declared {t}")
    if x.dtype.kind not in "iuf":
        raise DataError(f"input {name}: a sparse array of dtype {x.dtype} has no SDQLite "
                        "type (use float or int)")
    return Arg(name, t, "scipy", check_sparse(name, x, threads))


def check_sparse(name: str, x: Any, threads: int = 1) -> Sparse:
    """``x``'s arrays checked in one pass (compiled, on up to two threads where
    ``threads`` allows), before scipy itself reads them."""
    shape = tuple(int(n) for n in x.shape)
    fmt = x.format
    if fmt in ("csr", "csc", "coo"):
        given: list[Any] = list(x.coords) if fmt == "coo" else []  # keys, an array a layer
        data = x.data
    else:  # bsr, dia, lil, dok: read from their own arrays, checked
        given, data = _entries(name, x, shape)
        fmt = "coo"
    vals = np.ascontiguousarray(data, dtype=np.float64)
    facts = (ctypes.c_int64 * 8)()
    if fmt in ("csr", "csc"):
        pos, idx = _index(name, x.indptr, "indptr"), _index(name, x.indices, "indices")
        if x.ndim == 1:  # one row of the vector's length
            outer, inner = 1, shape[0]
        else:
            outer, inner = (shape[0], shape[1]) if fmt == "csr" else (shape[1], shape[0])
        if len(pos) != outer + 1:
            raise DataError(f"input {name}: its indptr has {len(pos)} entries, not "
                            f"{outer + 1} ({_shape(shape)} in {fmt})")
        nnz = int(pos[-1]) if len(pos) else 0
        if not 0 <= nnz <= min(len(idx), len(vals)):
            raise DataError(f"input {name}: its indptr ends at {nnz}, but it has {len(idx)} "
                            f"indices and {len(vals)} values")
        code = _checker().sdql_check_compressed(
            D.address(pos), pos.itemsize, D.address(idx), idx.itemsize, D.address(vals),
            outer, inner, nnz, facts, _check_threads(nnz, threads), 0)
        arrays: tuple[Any, ...] = (pos, idx[:nnz], vals[:nnz])
        if x.ndim == 1:
            keys: tuple[tuple[int, int] | None, ...] = (_range(facts, 1),)
        else:
            keys = ((_range(facts, 3), _range(facts, 1)) if fmt == "csr" else
                    (_range(facts, 1), _range(facts, 3)))
    else:
        coords = [_index(name, c, "coordinates") for c in given]
        if any(len(c) != len(vals) for c in coords):
            raise DataError(f"input {name}: its coordinates and values differ in length")
        inner_c = coords[1] if len(coords) == 2 else None
        code = _checker().sdql_check_coo(
            D.address(coords[0]), coords[0].itemsize,
            None if inner_c is None else D.address(inner_c),
            8 if inner_c is None else inner_c.itemsize, D.address(vals), len(vals),
            shape[0], shape[-1], facts, _check_threads(len(vals), threads), 0)
        arrays = (*coords, vals)
        keys = (_range(facts, 3),) if x.ndim == 1 else (_range(facts, 3), _range(facts, 1))
    if code != 0:
        raise DataError(f"input {name}: {_wrong(code, facts, fmt, shape)}")
    if x.ndim == 1 and fmt != "coo":  # a vector: its keys, as coo
        arrays, fmt = (arrays[1], arrays[2]), "coo"
    return Sparse(shape, fmt, arrays, bool(facts[0]), keys, int(facts[7]))


def trusted(x: Any) -> Sparse | None:
    """A CSR matrix as it is, not checked (``api.Door``: the kernel checks it as it reads
    it), if what the kernel cannot check holds: its index arrays 32- or 64-bit ints and
    its values float64, contiguous; as many row pointers as rows and one, the first 0 and
    the last at most the entries' count.  None: check it (``check_sparse``)."""
    if type(x) not in _CSR or x.ndim != 2:
        return None
    pos, idx, vals = x.indptr, x.indices, x.data
    if not (pos.dtype in INDEX_DTYPES and idx.dtype in INDEX_DTYPES and
            vals.dtype == np.float64 and pos.ndim == idx.ndim == vals.ndim == 1 and
            pos.flags.c_contiguous and idx.flags.c_contiguous and vals.flags.c_contiguous):
        return None
    shape = (int(x.shape[0]), int(x.shape[1]))
    if len(pos) != shape[0] + 1 or pos[0] != 0 or not 0 <= pos[-1] <= min(len(idx), len(vals)):
        return None
    nnz = int(pos[-1])
    # (keys unknown until the kernel has checked: no size is decided by them on this path)
    return Sparse(shape, "csr", (pos, idx[:nnz], vals[:nnz]), True, ())


_CSR = (scipy.sparse.csr_array, scipy.sparse.csr_matrix)

#: entries from which the check runs on two threads where there are two cores (one pass,
#: bound by memory: two cores read it faster; a thread costs ~50 µs to start)
CHECK_THREADS_FROM = 1 << 18


def _check_threads(entries: int, threads: int) -> int:
    if entries < CHECK_THREADS_FROM or threads == 1:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)  # (the cores this process may run on, where it is known)
    return 2 if cores > 1 else 1


def _index(name: str, a: Any, what: str) -> Any:
    """An index array as 32- or 64-bit ints, as it is when it is one already."""
    a = np.asarray(a)
    if a.dtype in INDEX_DTYPES:
        return np.ascontiguousarray(a)
    if a.dtype.kind not in "iu":
        raise DataError(f"input {name}: its {what} are of dtype {a.dtype}, not integers")
    if a.size and (a.max() > INT64.max or a.min() < INT64.min):
        raise DataError(f"input {name}: its {what} do not fit in 64 bits")
    return a.astype(np.int64)


def _range(facts: Any, at: int) -> tuple[int, int] | None:
    return (int(facts[at]), int(facts[at + 1])) if facts[at] <= facts[at + 1] else None


def _wrong(code: int, facts: Any, fmt: str, shape: tuple[int, ...]) -> str:
    where, what = int(facts[5]), int(facts[6])
    return {
        1: f"indptr[0] is {what}, not 0 (corrupted {fmt} arrays)",
        2: f"indptr[{where}] = {what} is smaller than the entry before it or beyond the "
           f"entries (corrupted {fmt} arrays)",
        3: f"indptr ends at {what}, not at the number of entries (corrupted {fmt} arrays)",
        4: f"entry {where} has index {what}, outside its {_shape(shape)} shape",
        5: f"entry {where} holds a number that is not finite",
        6: f"entry {where} has index {what}, outside its {_shape(shape)} shape",
    }.get(code, f"its {fmt} arrays are not valid (check {code})")


def _entries(name: str, x: Any, shape: tuple[int, ...]) -> tuple[list[Any], Any]:
    """A bsr, dia, lil or dok matrix's keys (one array per layer, unchecked against the
    shape: the caller checks them) and values, read without trusting its arrays: scipy's
    own converters do (a dia whose data have more rows than it has offsets, a lil with
    fewer rows than its shape, crashed the process or read memory they do not own; an
    offset beyond 32 bits wrapped; a dok key beyond the shape was a bare ValueError)."""
    try:
        match x.format:
            case "bsr":
                x.check_format(full_check=True)
                m = scipy.sparse.coo_array(x)
                return list(m.coords), m.data
            case "dia":
                return _dia_entries(name, x, shape)
            case "lil":
                rows, data = x.rows, x.data
                if not (isinstance(rows, np.ndarray) and isinstance(data, np.ndarray)
                        and rows.shape == data.shape == shape[:1]):
                    raise DataError(f"input {name}: its lil rows and data are not "
                                    f"{shape[0]} lists each (corrupted lil arrays)")
                counts = [len(r) for r in rows]
                if counts != [len(d) for d in data]:
                    raise DataError(f"input {name}: a row of its lil rows and data differ in "
                                    "length (corrupted lil arrays)")
                keys = [np.repeat(np.arange(shape[0], dtype=np.int64), counts),
                        _ints([j for r in rows for j in r])]
                return keys, _numbers(name, [a for d in data for a in d])
            case "dok":
                pairs = list(x.items())
                if x.ndim == 1:
                    keys = [_ints([k for k, _ in pairs])]
                else:
                    bad = next((k for k, _ in pairs if not (isinstance(k, tuple)
                                                            and len(k) == 2)), None)
                    if bad is not None:
                        raise DataError(f"input {name}: its dok key {bad!r} is not a pair "
                                        "of ints")
                    keys = [_ints([k[d] for k, _ in pairs]) for d in range(2)]
                return keys, _numbers(name, [a for _, a in pairs])
    except (ValueError, TypeError, OverflowError) as err:
        raise DataError(f"input {name}: {err}") from None
    raise DataError(f"input {name}: scipy.sparse format {x.format} is not read (give csr, "
                    "csc, coo, bsr, dia, lil or dok)")


def _dia_entries(name: str, x: Any, shape: tuple[int, ...]) -> tuple[list[Any], Any]:
    offsets, data = np.asarray(x.offsets), np.asarray(x.data)
    if offsets.ndim != 1 or data.ndim != 2 or data.shape[0] != len(offsets):
        raise DataError(f"input {name}: its dia data ({' x '.join(map(str, data.shape))}) "
                        f"do not hold one diagonal per offset ({len(offsets)}) (corrupted dia "
                        "arrays)")
    offsets = _index(name, offsets, "offsets")
    if len(np.unique(offsets)) != len(offsets):
        raise DataError(f"input {name}: its dia offsets repeat one (corrupted dia arrays)")
    rows, cols, vals = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], [
        np.zeros(0, dtype=data.dtype)]
    for o, diagonal in zip(offsets.tolist(), data, strict=True):
        # data[k, j] is the entry (j - o, j): its columns j with 0 <= j - o < rows, in
        # Python ints (no wrapping), and no array of the shape's size (scipy's converter
        # allocated row pointers for the rows: 8 TiB for 2^40 of them)
        start, stop = max(0, o), min(len(diagonal), shape[1], shape[0] + o)
        if start < stop:
            j = np.arange(start, stop, dtype=np.int64)
            rows.append(j - o)
            cols.append(j)
            vals.append(diagonal[start:stop])
    return [np.concatenate(rows), np.concatenate(cols)], np.concatenate(vals)


def _numbers(name: str, values: list[Any]) -> Any:
    """A lil's or dok's values as float64, one number each (an array among them is none)."""
    vals = np.array(values, dtype=np.float64)
    if vals.shape != (len(values),):
        raise DataError(f"input {name}: a value among its entries is not a number")
    return vals


def _ints(keys: list[Any]) -> Any:
    """Keys as an array (ints, or what they are: the caller refuses any other dtype)."""
    a = np.array(keys) if keys else np.zeros(0, dtype=np.int64)
    if a.ndim != 1:
        raise ValueError("a key among its entries is not an int")
    return a


def _shape(shape: tuple[int, ...]) -> str:
    return " x ".join(str(n) for n in shape)


def _affordable(nbytes: int, what: str) -> None:
    if nbytes > LAYOUT_BUDGET:
        raise DataError(f"{what} would take {nbytes / 2**30:.1f} GiB: store it in a format "
                        "laid out by its entries (coo), or give it a smaller shape")


@cache
def _checker() -> Any:
    """The runtime's checks (and its dense-to-CSR conversion), from a shared object of the
    runtime alone (built once)."""
    lib = build(translation_unit([], door=True)).library
    args: list[Any] = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                       ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                       ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
    for fn in (lib.sdql_check_compressed, lib.sdql_check_coo):
        fn.argtypes = [*args, ctypes.c_int64]  # exact: no fast path
        fn.restype = ctypes.c_int64
    lib.sdql_not_finite.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.sdql_not_finite.restype = ctypes.c_int64
    lib.sdql_dense_counts.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                      ctypes.c_void_p]
    lib.sdql_dense_counts.restype = ctypes.c_int64
    lib.sdql_dense_entries.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                       ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.sdql_dense_entries.restype = None
    return lib


# ---- facts, cutting, layouts ------------------------------------------------------------------


def with_shape_sizes(name: str, t: Type) -> Type:
    """``t`` with a size name on each layer that declares none (the data's shape)."""
    return _sized(name, t, tuple(layer.extent for layer in D.layers(t)))


@cache  # (by the extents too: a type's equality ignores them)
def _sized(name: str, t: Type, extents: tuple[str | None, ...], level: int = 0) -> Type:
    if not isinstance(t, DictT):
        return t
    return DictT(_sized(name, t.val, extents[1:], level + 1), t.dense,
                 t.extent or f"{name}#{level}")


def layer_facts(a: Arg) -> list[Layer]:
    """What the data say about each layer (numpy and scipy without per-entry Python
    work; a layer's shape fixes its size, so no key lies past it)."""
    if a.kind == "value":
        return list(facts(a.type, a.data, a.name))
    layers = D.layers(with_shape_sizes(a.name, a.type))
    out = []
    if a.kind == "numpy" and all(layer.dense for layer in layers):
        for d, layer in enumerate(layers):
            n = a.data.shape[d]
            out.append(Layer(layer, a.name + "(*)" * d, count=n, bound=n))
        return out
    if a.kind == "numpy":  # a real vector or matrix declared sparse: its shape fixes the
        # sizes, and bounds its keys (no pass over the entries)
        ranges, shape = [None] * a.data.ndim, a.data.shape
    else:
        ranges, shape = list(a.data.keys), a.data.shape
    for d, layer in enumerate(layers):
        out.append(Layer(layer, a.name + "(*)" * d, keys=ranges[d], bound=shape[d]))
    return out


#: the kinds of data whose positional layers span their declared sizes (the pipeline's
#: ``spans``): a scipy matrix's shape fixes them (``semantics.extents``), so a row is read
#: in place at any key of that size
SPANS: tuple[Kind, ...] = ("scipy",)


def entries(a: Arg) -> Coo:
    """Every stored entry's keys and value."""
    match a.kind:
        case "scipy":
            sparse: Sparse = a.data
            return sparse.entries()
        case "numpy":
            where = np.nonzero(a.data)
            return [w.astype(np.int64) for w in where], np.asarray(a.data[where], np.float64)
    keys, vals = D.to_coo(D.encode(a.data, a.type), a.type)
    return keys, vals


def flat_arrays(fmt: Format, a: Arg) -> dict[str, Any]:
    """An input's flat arrays in ``fmt``: a scipy matrix's own canonical CSR (or CSC)
    arrays, 32-bit indices as they are; else the format's layout of its entries."""
    if a.kind == "scipy" and len(a.data.shape) == 1 and fmt.name == "coo":
        (keys,), vals = a.data.entries()  # sorted, each once: the format's arrays
        return {"len": len(vals), "row": keys, "val": vals}
    if a.kind == "numpy" and a.data.ndim == 1 and fmt.name == "dense":
        # the array is its own layout (a zero is no entry, and stored as one): in place
        return {"len": len(a.data), "V": a.data}
    if a.kind == "scipy" and len(a.data.shape) == 2 and fmt.name in ("csr", "csc"):
        # (an explicit zero stays: the format's definition reads {j -> 0.0} as no entry,
        # and the caller's arrays, shared, stay as they are)
        try:
            pos, idx, val = a.data.compressed(fmt.name)
        except DataError as err:
            raise DataError(f"input {a.name}: {err.message}") from None
        n = a.data.shape[0] if fmt.name == "csr" else a.data.shape[1]
        return {"len": n, "pos": pos, "idx": idx, "val": val}
    sizes = tuple(int(n) for n in a.data.shape) if a.kind in ("scipy", "numpy") else \
        (None,) * len(D.layers(a.type))
    coo = entries(a)
    # a positional layer holds every position of its size (a value's: up to its largest
    # key) once per position of the positional layers above it: a dense 2^20 x 2^20
    # matrix, or a value's row key 2^40 in csr, is refused before it is allocated
    positions = math.prod(n if n is not None else max(int(k.max()) + 1 if len(k) else 0, 0)
                          for n, k, positional in zip(sizes, coo[0], fmt.positional,
                                                      strict=True) if positional)
    if any(fmt.positional):
        _affordable(8 * positions, f"format {fmt.name}'s arrays for input {a.name}")
    try:
        return layout(fmt, coo, sizes)
    except DataError as err:  # a key the format cannot hold: say whose
        raise DataError(f"input {a.name}: {err.message}") from None


def default_format(a: Arg) -> str:
    """scipy: csr for a matrix (coo for one of many more rows than entries), coo for a
    vector; numpy: dense; a value: dict."""
    match a.kind:
        case "scipy":
            rows = a.data.shape[0]
            return "coo" if (a.data.shape and len(a.data.shape) == 1) or \
                8 * rows > LAYOUT_BUDGET else "csr"
        case "numpy":
            return "dense"
    return "dict"


def extents(t: Type) -> tuple[str | None, ...]:
    return tuple(declared(t))

"""Data files, read and validated in one place for both backends.

``read_data`` serves the interpreter (``semantics.convert.load``, which makes a value of
what it returns) and the compiled backend (``sdqlite.ui.session.read_raw_input``, which
passes it on as it is): a numpy array (float64 or int64, finite) or a canonical
``scipy.sparse`` array of float64 (duplicates added up, no zeros stored).

| file | read as |
|---|---|
| `.npy`, n-d | n nested dense arrays `{dense_int -> …}` (0-d: a scalar) of `real`, or
  of `int` for an integer dtype (`real` where a real is declared) |
| `.mtx`, coordinate | a sparse matrix `{int -> {int -> real}}` |
| `.mtx`, array | a dense matrix `{dense_int -> {dense_int -> real}}` |
| `.npz` (`scipy.sparse.save_npz`) | a sparse matrix; a 1-d array a sparse vector `{int -> real}` |

A dense file (`.npy`, `.mtx` array) given for an input declared sparse, `{int -> real}`
or `{int -> {int -> real}}`, is the dictionary of its non-zero entries: what the
compiled backend's `dense` storage format means (Fig. storage_spec), and what a
dictionary is (it stores no zeros, DESIGN.md). Other mixes of dense and sparse layers
are refused as not matching the declaration.

``write_data`` writes a result the other way (``sdqlite eval … --output FILE``), so that
what it writes reads back as the same value: a number or a numpy array as `.npy` (a
sparse result dense), a 1-d or 2-d result as `.npz` (its non-zero entries) or `.mtx`
(coordinate when sparse, array when dense; a vector as an n×1 matrix).

A `.mtx` or `.npz` matrix of shape n×1 or 1×n is a vector (`{int -> real}`; the array
format `{dense_int -> real}`) when its input is declared with one dictionary layer.
Matrix Market values are reals: `integer` ones too, `pattern` entries are 1.0, and
`symmetric`, `skew-symmetric` and (real) `hermitian` files are expanded; such a file
stores no entry above the diagonal (nor on it, skew-symmetric). Refused, naming the
file: complex data (never truncated to its real part), dtypes other than float and int,
numbers that are not finite, integers beyond 64 bits (or beyond 2^53 where they become
reals, which would round them), wrong entry counts, a Matrix Market line with more or
fewer fields than its format has (scipy drops extra ones), indices outside the shape
(Matrix Market's are 1-based), and whatever is not the file its suffix says.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import scipy.io
import scipy.sparse

from sdqlite.errors import DataError
from sdqlite.paths import path_kind, require_file
from sdqlite.syntax.types import REAL, DictT, Type, scalar_of

SUFFIXES = (".npy", ".mtx", ".npz")
NPY_MAGIC, ZIP_MAGIC = b"\x93NUMPY", b"PK\x03\x04"
EXACT = 2**53  # integers up to this are exactly 64-bit reals
INT64 = np.iinfo(np.int64)

T = TypeVar("T")


def names_data(text: str) -> bool:
    """Whether an input's text names a data file (else it is a literal value): it has a
    data file's suffix, or names anything on disk (so a directory is an error, not a
    literal)."""
    return text.endswith(SUFFIXES) or path_kind(text) is not None


def read_data(path: str | Path, declared: Type | None = None) -> Any:
    """The numpy or ``scipy.sparse`` array a data file holds (the table above); the
    declared type of its input, when there is one, tells a vector from an n×1 matrix and
    a real from an integer."""
    name = str(path)
    p = require_file(name, "a data file")
    if p.suffix not in SUFFIXES:
        raise DataError(f"{name}: unknown file type {p.suffix!r} (expected .npy, .mtx or .npz)")
    try:
        with p.open("rb") as f:
            head = f.read(len(NPY_MAGIC))
        match p.suffix:
            case ".npy":
                return _npy(p, head, declared)
            case ".mtx":
                return _mtx(p, declared)
        return _npz(p, head, declared)
    except DataError as err:
        raise DataError(f"{name}: {err.message}") from None
    except OSError as err:
        raise DataError(f"{name}: cannot read: {err.strerror or err}") from None


def _library(read: Callable[[], T], what: str) -> T:
    """A library reader's result; whatever it raises on bad bytes is a ``DataError``."""
    try:
        return read()
    except Exception as err:  # readers of untrusted files raise anything (MemoryError too)
        raise DataError(f"{what}: {err or type(err).__name__}") from None


def sparse_declared(declared: Type | None, ndim: int) -> bool:
    """Whether an n-d dense array given for ``declared`` is read as a dictionary: a
    declared real vector or matrix with sparse (``int``) layers."""
    layers = 0
    while isinstance(declared, DictT) and not declared.dense:
        declared, layers = declared.val, layers + 1
    return declared == REAL and layers == ndim in (1, 2)


def _wants_vector(declared: Type | None) -> bool:
    return isinstance(declared, DictT) and not isinstance(declared.val, DictT)


# ---- .npy -----------------------------------------------------------------------------------


def _npy(p: Path, head: bytes, declared: Type | None) -> Any:
    if head.startswith(ZIP_MAGIC):
        raise DataError("is a .npz archive, not a .npy array (a sparse matrix written by "
                        "scipy.sparse.save_npz is read from a .npz file)")
    if head != NPY_MAGIC:
        raise DataError("not a .npy file (it does not start with numpy's magic string)")
    arr = _library(lambda: np.load(p, allow_pickle=False), "not a valid .npy file")
    real = declared is not None and scalar_of(declared) == REAL
    return _dense(arr, real, lambda idx: f"the number at position {idx}" if idx else "the number")


# ---- .mtx -----------------------------------------------------------------------------------


def _mtx(p: Path, declared: Type | None) -> Any:
    with p.open("rb") as f:
        banner = f.readline(200).split()
    if len(banner) > 1 and banner[1].lower() == b"vector":
        raise DataError("Matrix Market 'vector' files are not read; write the vector as an "
                        "n×1 matrix (scipy.io.mmwrite of a sparse column)")
    rows, cols, entries, layout, field, symmetry = _library(lambda: scipy.io.mminfo(p),
                                                            "not a Matrix Market file")
    if entries > p.stat().st_size:  # each takes a byte at least: refuse before allocating
        raise DataError(f"the size line promises {entries} entries, more than the file holds")
    if field == "complex":
        raise DataError("complex data has no SDQLite type (it is not truncated to its real "
                        "part)")
    if symmetry != "general" and rows != cols:
        raise DataError(f"a {symmetry} matrix must be square, this one is {rows}×{cols}")
    _fields_per_line(p, 1 if layout == "array" else 2 if field == "pattern" else 3)
    lines = _data_lines(p)  # scipy's array reader crashes the process on some bad bodies
    if layout == "array":  # (a 0×0 size, too few entries ending in non-ASCII bytes)
        stored = {"general": rows * cols, "skew-symmetric": rows * (rows - 1) // 2}.get(
            symmetry, rows * (rows + 1) // 2)
        if len(lines) != stored:
            raise DataError(f"a {rows}×{cols} {symmetry} array stores {stored} entries, "
                            f"the file has {len(lines)}")
        if stored == 0:
            return np.zeros((rows, cols))
    for number, line in lines:
        if not line.isascii():
            raise DataError(f"line {number} is not ASCII text, as Matrix Market data is")
    try:
        m = _library(lambda: scipy.io.mmread(p), "not a valid Matrix Market file")
    except DataError as err:
        if "out of bounds" not in err.message:
            raise
        raise DataError(f"{err.message} (indices are 1-based, up to the size line's)") from None
    if layout == "array":
        arr = _dense(np.asarray(m), True,
                     lambda idx: f"the entry at row {idx[0] + 1}, column {idx[1] + 1}")
        if _wants_vector(declared) and 1 in arr.shape:
            return arr.ravel()
        return arr
    if symmetry != "general":
        _stored_triangle(p, symmetry)
    return _sparse(scipy.sparse.coo_array(m), declared,
                   lambda k: f"the entry at row {k[0] + 1}, column {k[1] + 1}")


def _data_lines(p: Path) -> list[tuple[int, bytes]]:
    """The lines after the size line that are neither comments nor blank, numbered."""
    lines = [(i, ln) for i, ln in enumerate(p.read_bytes().splitlines(), 1)
             if i > 1 and ln.strip() and not ln.startswith(b"%")]
    return lines[1:]  # the first is the size line


def _fields_per_line(p: Path, fields: int) -> None:
    """Every data line holds ``fields`` numbers (Matrix Market defines each line's
    fields; scipy ignores any beyond them, which would read ``1 2 3.5 9`` as 3.5 and lose
    the 9).  Counted with numpy, not line by line in Python."""
    b = np.frombuffer(p.read_bytes(), dtype=np.uint8)
    space = b <= ord(" ")  # blanks, line ends (control bytes: not numbers either)
    newlines = np.flatnonzero(b == ord("\n"))
    starts = np.concatenate(([0], newlines + 1))
    first = np.flatnonzero(~space[1:] & space[:-1]) + 1  # where each field begins
    first = np.concatenate(([0], first)) if b.size and not space[0] else first
    counts = np.bincount(np.searchsorted(newlines, first), minlength=starts.size)
    comment = np.zeros(starts.size, dtype=bool)
    inside = starts < b.size
    comment[inside] = b[starts[inside]] == ord("%")
    data = np.flatnonzero(~comment & (counts > 0))[1:]  # after the size line
    bad = counts[data] != fields
    if bad.any():
        n = int(data[int(np.argmax(bad))])
        end = newlines[n] if n < newlines.size else b.size
        text = b[starts[n]:end].tobytes().decode(errors="replace").strip()
        raise DataError(f"line {n + 1} has {counts[n]} fields where a data line has {fields}: "
                        f"{text[:60]!r}{'...' if len(text) > 60 else ''}")


def _stored_triangle(p: Path, symmetry: str) -> None:
    """A symmetric (hermitian) file stores entries on or below the diagonal only; a
    skew-symmetric one strictly below (its diagonal is zero)."""
    ij = _library(lambda: np.loadtxt(p, comments="%", usecols=(0, 1), dtype=np.int64,
                                     ndmin=2), "not a valid Matrix Market file")[1:]
    strict = symmetry == "skew-symmetric"
    above = ij[:, 0] <= ij[:, 1] if strict else ij[:, 0] < ij[:, 1]
    if above.any():
        i, j = ij[int(np.argmax(above))].tolist()
        where = "below the diagonal" if strict else "on or below the diagonal"
        raise DataError(f"entry at row {i}, column {j} of a {symmetry} matrix: such a file "
                        f"stores only entries {where}")


# ---- .npz -----------------------------------------------------------------------------------


def _npz(p: Path, head: bytes, declared: Type | None) -> Any:
    if not head.startswith(ZIP_MAGIC):
        hint = " (a .npy array? name it .npy)" if head == NPY_MAGIC else ""
        raise DataError(f"not a .npz archive{hint}")
    m = _library(lambda: scipy.sparse.load_npz(p),
                 "not a sparse matrix written by scipy.sparse.save_npz")
    if m.ndim not in (1, 2):
        raise DataError(f"a {m.ndim}-d sparse array has no SDQLite type here (1-d or 2-d)")
    if hasattr(m, "check_format"):  # compressed formats: are indices and pointers sound?
        _library(lambda: m.check_format(full_check=True), "not a valid sparse matrix")
    coo = scipy.sparse.coo_array(m)
    for c, n in zip(coo.coords, coo.shape, strict=True):
        if c.size and (c.min() < 0 or c.max() >= n):
            raise DataError(f"an index is outside the shape {coo.shape}")
    return _sparse(coo, declared, lambda k: f"the entry at key {k[0] if len(k) == 1 else k}")


# ---- validation -----------------------------------------------------------------------------


def _numbers(a: Any, real: bool, at: Callable[[tuple[int, ...]], str]) -> Any:
    """``a``'s numbers as float64 (as int64 for integers, unless ``real``): finite, and
    held exactly. ``at`` names the number at an index of ``a`` in messages."""
    kind = a.dtype.kind
    if kind == "c":
        raise DataError("complex data has no SDQLite type (it is not truncated to its real "
                        "part)")
    if kind not in "iuf":
        raise DataError(f"arrays of dtype {a.dtype} have no SDQLite type (use float or int)")

    def first(bad: Any, why: str) -> DataError:
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), a.shape))
        return DataError(f"{at(idx)} is {a[idx]}: {why}")

    if kind == "f":
        if not np.isfinite(a).all():
            raise first(~np.isfinite(a), "data must be finite numbers")
        with np.errstate(over="ignore"):  # said below
            out = a.astype(np.float64, order="C")
        if not np.isfinite(out).all():
            raise first(~np.isfinite(out), "beyond the range of 64-bit reals")
        return out
    if kind == "u" and a.size and a.max() > INT64.max:
        raise first(a > INT64.max, "beyond 64-bit integers")
    if not real:
        return a.astype(np.int64, order="C")
    if a.size and (a.min() < -EXACT or a.max() > EXACT):
        raise first((a < -EXACT) | (a > EXACT), "a real would round it (beyond 2^53)")
    return a.astype(np.float64, order="C")


def _dense(a: Any, real: bool, at: Callable[[tuple[int, ...]], str]) -> Any:
    return _numbers(np.asarray(a), real, at)  # C order, native byte order


def _sparse(coo: Any, declared: Type | None, at: Callable[[tuple[int, ...]], str]) -> Any:
    """A checked coo array as a canonical float64 array: a matrix (``csr_array``), or a
    1-d ``coo_array`` for a vector."""
    data = _numbers(coo.data, True,
                    lambda e: at(tuple(int(c[e[0]]) for c in coo.coords)))
    coords, shape = list(coo.coords), coo.shape
    if len(shape) == 2 and _wants_vector(declared) and 1 in shape:
        axis = 1 if shape[0] == 1 else 0
        coords, shape = [coords[axis]], (shape[axis],)
    out = scipy.sparse.coo_array((data, tuple(coords)), shape=shape)
    out.sum_duplicates()
    out.eliminate_zeros()
    return out.tocsr() if len(shape) == 2 else out


# ---- writing ----------------------------------------------------------------------------------

DENSE_LIMIT = 1 << 28  # entries written dense as .npy (2 GiB of reals)


def write_data(path: str | Path, result: Any) -> str:
    """Write a result (a number, a numpy array or a ``scipy.sparse`` array of reals or
    integers, 1-d or 2-d for the sparse formats) as the file its suffix names, whole or
    not at all; what was written, for a message."""
    name, p = str(path), Path(path)
    if p.suffix not in SUFFIXES:
        raise DataError(f"{name}: unknown file type {p.suffix!r} (expected .npy, .mtx or .npz)")
    arr = _writable(result, name)
    ndim = arr.ndim if hasattr(arr, "ndim") else 0
    if p.suffix != ".npy" and ndim not in (1, 2):
        raise DataError(f"{name}: a {p.suffix} file holds a vector or a matrix; the result is "
                        f"{'a number' if ndim == 0 else f'{ndim}-d'} (write it as .npy)")
    sparse = scipy.sparse.issparse(arr)
    if p.suffix == ".npy" and sparse and np.prod(arr.shape, dtype=float) > DENSE_LIMIT:
        raise DataError(f"{name}: a sparse result of shape {arr.shape} is too large to write "
                        "dense as .npy (write it as .npz or .mtx)")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent if str(p.parent) else ".")
        try:
            with os.fdopen(fd, "wb") as f:
                match p.suffix:
                    case ".npy":
                        np.save(f, arr.toarray() if sparse else np.asarray(arr))
                    case ".npz":
                        scipy.sparse.save_npz(f, scipy.sparse.coo_array(arr) if ndim == 1
                                              else scipy.sparse.csr_array(arr))
                    case _:
                        scipy.io.mmwrite(f, arr.reshape(-1, 1) if ndim == 1 else arr)
            mask = os.umask(0)  # (read back at once: mkstemp's file is private, 0600)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
            os.replace(tmp, p)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as err:
        raise DataError(f"{name}: cannot write: {err.strerror or err}") from None
    what = f"{type(arr).__name__} of shape {arr.shape}" if ndim else "a number"
    return f"{name}: {what}" + (f", {arr.nnz} entries stored" if sparse else "")


def _writable(result: Any, name: str) -> Any:
    """A result as a numpy or scipy array of float64 or int64, or refused."""
    array = isinstance(result, np.ndarray) or scipy.sparse.issparse(result)
    if isinstance(result, bool) or not (array or isinstance(result, int | float)):
        raise DataError(f"{name}: the result is not a number, vector or matrix of sizes "
                        "the inputs fix, which is what .npy, .npz and .mtx hold (leave out "
                        "--output to print it)")
    if isinstance(result, int | float):
        return np.asarray(result)
    if result.dtype.kind not in "iuf":
        raise DataError(f"{name}: a result of dtype {result.dtype} cannot be written "
                        "(numbers only)")
    return result

"""Every data file is read with its documented meaning or refused naming the file.

Each case writes one odd or malformed ``.mtx``/``.npy``/``.npz`` file and runs the CLI in
process on a program that returns the input as it is.  A refused file: exit code 1 or
2, ``sdqlite: error:`` naming the file, no internal error, no traceback.  An accepted
file: the value printed equals the one computed here from what the file means
(semantics/datafiles.py's table), on the interpreter and, for a sample, on the compiled
backend too.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from sdqlite.errors import DataError
from sdqlite.syntax.parser import parse_type
from sdqlite.ui.cli import main
from sdqlite.ui.session import Session
from semantics.display import read_value
from semantics.values import Value, dense

MAT, VEC = "{int -> {int -> real}}", "{int -> real}"
DMAT, DVEC = "{dense_int -> {dense_int -> real}}", "{dense_int -> real}"
MM = "%%MatrixMarket matrix {} real {}\n"


pytestmark = pytest.mark.usefixtures("quick_builds")


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: Path,
         declared: str | None, backend: str = "interp") -> tuple[int, str, str]:
    prog = tmp_path / "prog.sdql"
    prog.write_text(f"x : {declared}\nx\n" if declared else "x\n")
    code = main(["eval", str(prog), "--backend", backend, "-i", f"x={data}"])
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_refused(code: int, err: str, named: object) -> None:
    assert code in (1, 2), err
    assert err.startswith("sdqlite: error: "), err
    assert str(named) in err, err
    assert "internal error" not in err and "Traceback" not in err, err


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: Path,
            declared: str | None, why: str, backend: str = "interp") -> None:
    code, _, err = _run(tmp_path, capsys, data, declared, backend)
    assert_refused(code, err, data)
    assert why in err, err


def accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: Path,
             declared: str | None, expected: Value, t: str,
             backend: str = "interp") -> None:
    code, out, err = _run(tmp_path, capsys, data, declared, backend)
    assert code == 0, err
    value, _ = read_value(out.strip(), parse_type(t))
    assert value == expected, (out, expected)


# ---- Matrix Market ---------------------------------------------------------------------------


def _mtx(tmp_path: Path, text: str, name: str = "m.mtx") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _sparse(entries: list[tuple[int, int, float]], symmetry: str = "general") -> Value:
    """The matrix a coordinate file's 1-based entries mean, expanded by its symmetry."""
    out: dict[int, dict[int, float]] = {}

    def put(i: int, j: int, x: float) -> None:
        row = out.setdefault(i, {})
        row[j] = row.get(j, 0.0) + x

    for i, j, x in entries:
        put(i - 1, j - 1, x)
        if i != j and symmetry in ("symmetric", "hermitian"):
            put(j - 1, i - 1, x)
        if i != j and symmetry == "skew-symmetric":
            put(j - 1, i - 1, -x)
    rows = {i: {j: x for j, x in r.items() if x != 0.0} for i, r in out.items()}
    return {i: r for i, r in rows.items() if r}


def _coord(rows: int, cols: int, entries: list[tuple[int, int, float]],
           field: str = "real", symmetry: str = "general", count: int | None = None) -> str:
    body = "".join(f"{i} {j}" + ("" if field == "pattern" else f" {x}") + "\n"
                   for i, j, x in entries)
    return (f"%%MatrixMarket matrix coordinate {field} {symmetry}\n% a comment\n"
            f"{rows} {cols} {len(entries) if count is None else count}\n{body}")


ENTRIES = [(1, 1, 1.5), (3, 2, 2.0), (2, 1, -4.0)]

MTX_ACCEPTED: dict[str, tuple[str, str | None, Value, str]] = {
    "general": (_coord(3, 3, ENTRIES), MAT, _sparse(ENTRIES), MAT),
    "undeclared": (_coord(3, 3, ENTRIES), None, _sparse(ENTRIES), MAT),
    "duplicates add up": (_coord(2, 2, [(1, 2, 1.0), (1, 2, 2.5)]), MAT, {0: {1: 3.5}}, MAT),
    "explicit zeros dropped": (_coord(2, 2, [(1, 1, 0.0), (2, 2, 1.0)]), MAT, {1: {1: 1.0}},
                               MAT),
    "no entries": (_coord(4, 4, []), MAT, {}, MAT),
    "integer as real": (_coord(3, 3, [(1, 1, 7), (3, 2, -2)], "integer"), MAT,
                        {0: {0: 7.0}, 2: {1: -2.0}}, MAT),
    "pattern as 1.0": (_coord(3, 3, [(1, 1, 0), (3, 2, 0)], "pattern"), MAT,
                       {0: {0: 1.0}, 2: {1: 1.0}}, MAT),
    "symmetric": (_coord(3, 3, ENTRIES, symmetry="symmetric"), MAT,
                  _sparse(ENTRIES, "symmetric"), MAT),
    "pattern symmetric": (_coord(2, 2, [(2, 1, 0)], "pattern", "symmetric"), MAT,
                          {0: {1: 1.0}, 1: {0: 1.0}}, MAT),
    "skew-symmetric": (_coord(3, 3, [(3, 2, 2.0), (2, 1, 1.0)], symmetry="skew-symmetric"),
                       MAT, _sparse([(3, 2, 2.0), (2, 1, 1.0)], "skew-symmetric"), MAT),
    "hermitian with real data": (_coord(3, 3, ENTRIES, symmetry="hermitian"), MAT,
                                 _sparse(ENTRIES, "hermitian"), MAT),
    # the array format lists a column after the other
    "array": (MM.format("array", "general") + "2 3\n1\n2\n0\n4\n5\n6\n", None,
              dense([dense([1.0, 0.0, 5.0]), dense([2.0, 4.0, 6.0])]), DMAT),
    "array symmetric": (MM.format("array", "symmetric") + "2 2\n1\n2\n4\n", DMAT,
                        dense([dense([1.0, 2.0]), dense([2.0, 4.0])]), DMAT),
    "array n×1 declared a vector": (MM.format("array", "general") + "3 1\n1\n0\n2\n", DVEC,
                                    dense([1.0, 0.0, 2.0]), DVEC),
    "n×1 declared a vector": (_coord(4, 1, [(1, 1, 1.5), (4, 1, 2.0)]), VEC,
                              {0: 1.5, 3: 2.0}, VEC),
    "1×n declared a vector": (_coord(1, 4, [(1, 2, 1.5), (1, 4, 2.0)]), VEC,
                              {1: 1.5, 3: 2.0}, VEC),
    "n×1 undeclared is a matrix": (_coord(4, 1, [(4, 1, 2.0)]), None, {3: {0: 2.0}}, MAT),
    "blank lines, blanks around fields, CRLF": (
        (MM.format("coordinate", "general") + "2 2 2\n\n 1 1\t1.5 \n\n2 2 2.0").replace(
            "\n", "\r\n"), MAT, {0: {0: 1.5}, 1: {1: 2.0}}, MAT),
    "array declared sparse": (MM.format("array", "general") + "2 2\n1\n0\n0\n4\n", MAT,
                              {0: {0: 1.0}, 1: {1: 4.0}}, MAT),
    "array n×1 declared a sparse vector": (MM.format("array", "general") + "3 1\n1\n0\n2\n",
                                           VEC, {0: 1.0, 2: 2.0}, VEC),
}


@pytest.mark.parametrize("case", MTX_ACCEPTED)
def test_mtx_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    text, declared, expected, t = MTX_ACCEPTED[case]
    accepted(tmp_path, capsys, _mtx(tmp_path, text), declared, expected, t)


COMPLEX = "%%MatrixMarket matrix coordinate complex {}\n3 3 1\n3 2 1.5 2.0\n"
MTX_REFUSED: dict[str, tuple[str, str]] = {
    "fewer entries than counted": (_coord(3, 3, ENTRIES, count=4), "Truncated"),
    "more entries than counted": (_coord(3, 3, ENTRIES, count=2), "Too many lines"),
    "0-based": (_coord(3, 3, [(0, 1, 1.0)]), "1-based"),
    "negative index": (_coord(3, 3, [(-1, 1, 1.0)]), "1-based"),
    "row beyond the size": (_coord(3, 3, [(4, 1, 1.0)]), "out of bounds"),
    "column beyond the size": (_coord(3, 3, [(1, 4, 1.0)]), "out of bounds"),
    "nan": (_coord(3, 3, [(2, 3, float("nan"))]), "row 2, column 3 is nan"),
    "inf": (_coord(3, 3, [(1, 1, float("-inf"))]), "is -inf"),
    "complex": (COMPLEX.format("general"), "complex"),
    "hermitian complex": (COMPLEX.format("hermitian"), "complex"),
    "complex array": ("%%MatrixMarket matrix array complex general\n1 1\n1.0 2.0\n", "complex"),
    "symmetric not square": (_coord(3, 4, [(1, 1, 1.0)], symmetry="symmetric"), "square"),
    "symmetric above the diagonal": (_coord(3, 3, [(1, 2, 1.0)], symmetry="symmetric"),
                                     "on or below the diagonal"),
    "skew-symmetric on the diagonal": (_coord(3, 3, [(2, 2, 1.0)], symmetry="skew-symmetric"),
                                       "below the diagonal"),
    "vector object": ("%%MatrixMarket vector coordinate real general\n3 2\n1 1.5\n3 2.0\n",
                      "'vector' files"),
    "empty": ("", "not a Matrix Market file"),
    "banner only": (MM.format("coordinate", "general"), "not a Matrix Market file"),
    "not Matrix Market": ("1 2 3\n", "not a Matrix Market file"),
    "integer beyond 64 bits": (_coord(3, 3, [(1, 1, 10**20)], "integer"),
                               "Integer out of range"),
    "integer beyond 2^53": (_coord(3, 3, [(1, 1, 2**53 + 1)], "integer"), "2^53"),
    "index not an integer": (_coord(3, 3, [(1, 1, 1.0)]).replace("1 1 1", "1.5 1 1"),
                             "Invalid integer"),
    "value missing": (_coord(3, 3, [(1, 1, 1.0)], "pattern").replace("pattern", "real"),
                      "line 4 has 2 fields where a data line has 3: '1 1'"),
    # scipy reads the first fields of a line and drops the rest; Matrix Market has none
    "a field too many": (_coord(3, 3, ENTRIES).replace("3 2 2.0\n", "3 2 2.0 9\n"),
                         "line 5 has 4 fields where a data line has 3: '3 2 2.0 9'"),
    "a value on a pattern line": (_coord(3, 3, [(1, 1, 0), (2, 1, 0)], "pattern")
                                  .replace("2 1\n", "2 1 7.5\n"),
                                  "line 5 has 3 fields where a data line has 2: '2 1 7.5'"),
    "two values on an array line": (MM.format("array", "general") + "2 1\n1\n2 3\n",
                                    "line 4 has 2 fields where a data line has 1: '2 3'"),
    "array too short": (MM.format("array", "general") + "2 2\n1\n2\n3\n",
                        "stores 4 entries, the file has 3"),
    "array pattern": ("%%MatrixMarket matrix array pattern general\n2 2\n", "pattern"),
    "three sizes and an index": (MM.format("coordinate", "general") + "3 3 3 1\n1 1 1 1.5\n",
                                 "not a Matrix Market file"),
}


@pytest.mark.parametrize("case", MTX_REFUSED)
def test_mtx_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    text, why = MTX_REFUSED[case]
    refused(tmp_path, capsys, _mtx(tmp_path, text), MAT, why)


# ---- .npy ------------------------------------------------------------------------------------


def _npy(tmp_path: Path, arr: Any, name: str = "a.npy") -> Path:
    p = tmp_path / name
    np.save(p, arr, allow_pickle=True)
    return p


NPY_ACCEPTED: dict[str, tuple[Any, str | None, Value, str]] = {
    "float64 vector": (np.array([1.5, 0.0, -2.0]), None, dense([1.5, 0.0, -2.0]), DVEC),
    "float32": (np.array([0.5, -0.25], dtype=np.float32), DVEC, dense([0.5, -0.25]), DVEC),
    "float16": (np.array([0.5, 2.0], dtype=np.float16), DVEC, dense([0.5, 2.0]), DVEC),
    "big-endian": (np.array([1.5, 3.0], dtype=">f8"), DVEC, dense([1.5, 3.0]), DVEC),
    "fortran order": (np.asfortranarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), DMAT,
                      dense([dense([1.0, 2.0, 3.0]), dense([4.0, 5.0, 6.0])]), DMAT),
    "3-d": (np.arange(8.0).reshape(2, 2, 2), None,
            dense([dense([dense([0.0, 1.0]), dense([2.0, 3.0])]),
                   dense([dense([4.0, 5.0]), dense([6.0, 7.0])])]),
            "{dense_int -> {dense_int -> {dense_int -> real}}}"),
    "0-d real": (np.array(2.5), None, 2.5, "real"),
    "0-d int": (np.array(3), None, 3, "int"),
    "0-d int declared real": (np.array(3), "real", 3.0, "real"),
    "int vector": (np.array([3, -1], dtype=np.int8), None, dense([3, -1]),
                   "{dense_int -> int}"),
    "uint64 within int64": (np.array([2**63 - 1], dtype=np.uint64), None, dense([2**63 - 1]),
                            "{dense_int -> int}"),
    "int declared real": (np.array([3, -1]), DVEC, dense([3.0, -1.0]), DVEC),
    "empty vector": (np.zeros(0), DVEC, dense([]), DVEC),
    "empty rows": (np.zeros((2, 0)), DMAT, dense([dense([]), dense([])]), DMAT),
    # declared sparse: the dictionary of its non-zero entries
    "declared a sparse vector": (np.array([1.5, 0.0, -2.0]), VEC, {0: 1.5, 2: -2.0}, VEC),
    "int declared a sparse vector": (np.array([0, 3]), VEC, {1: 3.0}, VEC),
    "declared a sparse matrix": (np.array([[0.0, 2.0], [0.0, 0.0], [-1.0, 0.0]]), MAT,
                                 {0: {1: 2.0}, 2: {0: -1.0}}, MAT),
    "zeros declared sparse": (np.zeros((2, 2)), MAT, {}, MAT),
}


@pytest.mark.parametrize("case", NPY_ACCEPTED)
def test_npy_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    arr, declared, expected, t = NPY_ACCEPTED[case]
    accepted(tmp_path, capsys, _npy(tmp_path, arr), declared, expected, t)


def _raw(data: bytes) -> Callable[[Path], None]:
    def write(p: Path) -> None:
        p.write_bytes(data)
    return write


def _truncated(keep: int) -> Callable[[Path], None]:
    def write(p: Path) -> None:
        np.save(p, np.arange(100.0))
        p.write_bytes(p.read_bytes()[:keep])
    return write


def _npz_named_npy(p: Path) -> None:
    sp.save_npz(p.with_suffix(".npz"), sp.csr_array(np.eye(2)))
    p.with_suffix(".npz").rename(p)


def _saved(arr: Any) -> Callable[[Path], None]:
    return lambda p: np.save(p, arr, allow_pickle=True)


NPY_REFUSED: dict[str, tuple[Callable[[Path], None], str | None, str]] = {
    "object dtype": (_saved(np.array([{"a": 1}], dtype=object)), None, "Object arrays"),
    "complex": (_saved(np.array([1 + 2j])), None, "complex"),
    "complex with zero imaginary parts": (_saved(np.array([1 + 0j])), None, "complex"),
    "bool": (_saved(np.array([True, False])), None, "dtype bool"),
    "structured": (_saved(np.zeros(2, dtype=[("a", "f8"), ("b", "i4")])), None, "dtype"),
    "strings": (_saved(np.array(["ab"])), None, "dtype <U2"),
    "datetimes": (_saved(np.array(["2020-01-01"], dtype="datetime64[D]")), None, "dtype"),
    "nan": (_saved(np.array([1.0, np.nan])), None, "position (1,) is nan"),
    "inf in a matrix": (_saved(np.array([[1.0, 0.0], [np.inf, 0.0]])), None,
                        "position (1, 0) is inf"),
    "nan scalar": (_saved(np.array(np.nan)), None, "is nan"),
    "uint64 beyond int64": (_saved(np.array([2**64 - 1], dtype=np.uint64)), None,
                            "beyond 64-bit integers"),
    "int beyond 2^53 declared real": (_saved(np.array([2**53 + 1])), DVEC, "2^53"),
    "truncated data": (_truncated(200), None, "not a valid .npy file"),
    "truncated header": (_truncated(30), None, "not a valid .npy file"),
    "empty file": (_raw(b""), None, "not a .npy file"),
    "text": (_raw(b"1.0 2.0\n"), None, "not a .npy file"),
    "pickle": (_raw(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94."), None,
               "not a .npy file"),
    ".npz named .npy": (_npz_named_npy, None, "is a .npz archive"),
}
if np.finfo(np.longdouble).max > np.finfo(np.float64).max:  # x86-64: 80-bit long double
    NPY_REFUSED["long double beyond float64"] = (
        _saved(np.array([np.longdouble(10) ** 400])), None, "beyond the range of 64-bit reals")


@pytest.mark.parametrize("case", NPY_REFUSED)
def test_npy_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    write, declared, why = NPY_REFUSED[case]
    p = tmp_path / "a.npy"
    write(p)
    refused(tmp_path, capsys, p, declared, why)


# ---- .npz (scipy.sparse.save_npz) ------------------------------------------------------------


M = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
M_VALUE: Value = {0: {1: 1.5}, 1: {0: 2.0, 2: -1.0}}


def _npz(tmp_path: Path, m: Any, name: str = "m.npz") -> Path:
    p = tmp_path / name
    sp.save_npz(p, m)
    return p


NPZ_ACCEPTED: dict[str, tuple[Any, str | None, Value, str]] = {
    "csr": (sp.csr_array(M), MAT, M_VALUE, MAT),
    "csc matrix": (sp.csc_matrix(M), None, M_VALUE, MAT),
    "coo with duplicates": (sp.coo_array(([1.0, 2.0, 5.0], ([0, 0, 1], [1, 1, 0])),
                                         shape=(2, 2)), MAT, {0: {1: 3.0}, 1: {0: 5.0}}, MAT),
    "explicit zero": (sp.csr_array(([0.0, 1.0], [0, 1], [0, 1, 2]), shape=(2, 2)), MAT,
                      {1: {1: 1.0}}, MAT),
    "dia": (sp.dia_array(np.diag([1.0, 0.0, 3.0])), MAT, {0: {0: 1.0}, 2: {2: 3.0}}, MAT),
    "bsr": (sp.bsr_array(np.kron(np.eye(2), [[1.0, 2.0], [0.0, 3.0]]), blocksize=(2, 2)), MAT,
            {0: {0: 1.0, 1: 2.0}, 1: {1: 3.0}, 2: {2: 1.0, 3: 2.0}, 3: {3: 3.0}}, MAT),
    "int as real": (sp.csr_array(np.array([[0, 7], [-2, 0]])), MAT, {0: {1: 7.0}, 1: {0: -2.0}},
                    MAT),
    "1-d": (sp.coo_array(np.array([0.0, 1.5, 0.0, -2.0])), None, {1: 1.5, 3: -2.0}, VEC),
    "1×n declared a vector": (sp.csr_array(np.array([[0.0, 1.5, 0.0, -2.0]])), VEC,
                              {1: 1.5, 3: -2.0}, VEC),
    "n×1 declared a vector": (sp.csc_array(np.array([[0.0], [1.5]])), VEC, {1: 1.5}, VEC),
    "n×1 undeclared is a matrix": (sp.csc_array(np.array([[0.0], [1.5]])), None,
                                   {1: {0: 1.5}}, MAT),
}


@pytest.mark.parametrize("case", NPZ_ACCEPTED)
def test_npz_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    m, declared, expected, t = NPZ_ACCEPTED[case]
    accepted(tmp_path, capsys, _npz(tmp_path, m), declared, expected, t)


def _crafted_csr(p: Path) -> None:  # column 7 in a 2×2 matrix
    np.savez(p, indices=np.array([0, 7]), indptr=np.array([0, 1, 2]), format=np.array(b"csr"),
             shape=np.array([2, 2]), data=np.array([1.0, 2.0]))


def _npy_named_npz(p: Path) -> None:
    np.save(p.with_suffix(".npy"), np.eye(2))
    p.with_suffix(".npy").rename(p)


def _sparse_saved(m: Any) -> Callable[[Path], None]:
    return lambda p: sp.save_npz(p, m)


NPZ_REFUSED: dict[str, tuple[Callable[[Path], None], str]] = {
    "dense archive (np.savez)": (lambda p: np.savez(p, a=np.arange(3.0)),
                                 "not a sparse matrix written by scipy.sparse.save_npz"),
    ".npy named .npz": (_npy_named_npz, "not a .npz archive (a .npy array? name it .npy)"),
    "complex": (_sparse_saved(sp.csr_array(np.eye(2) * 1j)), "complex"),
    "bool": (_sparse_saved(sp.csr_array(np.eye(2, dtype=bool))), "dtype bool"),
    "nan": (_sparse_saved(sp.csr_array(np.array([[0.0, np.nan]]))), "(0, 1) is nan"),
    "3-d": (_sparse_saved(sp.coo_array(np.ones((2, 2, 2)))), "3-d"),
    "index outside the shape": (_crafted_csr, "indices must be < 2"),
    "int beyond 2^53": (_sparse_saved(sp.csr_array(np.array([[2**60]]))), "2^53"),
    "empty file": (_raw(b""), "not a .npz archive"),
    "text": (_raw(b"hello"), "not a .npz archive"),
}


@pytest.mark.parametrize("case", NPZ_REFUSED)
def test_npz_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    write, why = NPZ_REFUSED[case]
    p = tmp_path / "m.npz"
    write(p)
    refused(tmp_path, capsys, p, MAT, why)


# ---- the compiled backend reads the same ----------------------------------------------------


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler")
@pytest.mark.parametrize("case", [
    ("mtx", "symmetric"), ("mtx", "n×1 declared a vector"), ("mtx", "1×n declared a vector"),
    ("npz", "1-d"), ("npz", "coo with duplicates"), ("npz", "n×1 declared a vector"),
    ("npy", "int declared real")])
def test_compiled_backend_reads_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         case: tuple[str, str]) -> None:
    kind, name = case
    if kind == "mtx":
        text, declared, expected, t = MTX_ACCEPTED[name]
        data = _mtx(tmp_path, text)
    elif kind == "npz":
        m, declared, expected, t = NPZ_ACCEPTED[name]
        data = _npz(tmp_path, m)
    else:
        arr, declared, expected, t = NPY_ACCEPTED[name]
        data = _npy(tmp_path, arr)
    accepted(tmp_path, capsys, data, declared, expected, t, backend="cpp")


DECLARED_SPARSE = ["declared a sparse vector", "int declared a sparse vector",
                   "declared a sparse matrix", "zeros declared sparse"]


@pytest.mark.parametrize("backend", ["interp", "cpp"])
def test_dense_data_declared_sparse_is_its_non_zero_entries_on_both_backends(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    if backend == "cpp" and shutil.which(os.environ.get("CXX", "g++")) is None:
        pytest.skip("no C++ compiler")
    for name in DECLARED_SPARSE:
        arr, declared, expected, t = NPY_ACCEPTED[name]
        accepted(tmp_path, capsys, _npy(tmp_path, arr), declared, expected, t, backend)
    for name in ["array declared sparse", "array n×1 declared a sparse vector"]:
        text, declared, expected, t = MTX_ACCEPTED[name]
        accepted(tmp_path, capsys, _mtx(tmp_path, text), declared, expected, t, backend)
    # the gradient w.r.t. a sparse input covers its stored entries: not position 1, a zero
    prog = tmp_path / "g.sdql"
    prog.write_text("V : {int -> real}\nW : {int -> real}\nsum(<i, a> in V) a * W(i)\n")
    v, w = _npy(tmp_path, np.array([1.0, 0.0, 3.0])), _npy(tmp_path, np.array([2.0, 5.0, 7.0]),
                                                            "w.npy")
    assert main(["grad", str(prog), "--wrt", "V", "-i", f"V={v}", "-i", f"W={w}",
                 "--backend", backend]) == 0
    assert read_value(capsys.readouterr().out.strip(), parse_type(VEC))[0] == {0: 2.0, 2: 7.0}
    # other mixes of dense and sparse layers match no declaration, on either backend
    for declared in ["{int -> {dense_int -> real}}", "{dense_int -> {int -> real}}",
                     "{int -> int}", VEC]:
        arr = np.array([1, 0]) if declared == "{int -> int}" else np.eye(2)
        code, _, err = _run(tmp_path, capsys, _npy(tmp_path, arr), declared, backend)
        assert code == 1 and f"input x is declared {declared}" in err, err
        assert "internal error" not in err


@pytest.mark.parametrize("text", [MTX_REFUSED["nan"][0], MTX_REFUSED["complex"][0],
                                  MTX_REFUSED["symmetric above the diagonal"][0]])
def test_compiled_backend_refuses_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           text: str) -> None:
    refused(tmp_path, capsys, _mtx(tmp_path, text), MAT, "m.mtx", backend="cpp")


# ---- paths -----------------------------------------------------------------------------------


def test_a_directory_is_not_a_data_file(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    for d in [tmp_path / "somedir", tmp_path / "dir.npy"]:
        d.mkdir()
        refused(tmp_path, capsys, d, MAT, "is a directory, not a data file")
        refused(tmp_path, capsys, d, MAT, "is a directory, not a data file", backend="cpp")


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_a_device_is_not_a_data_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(tmp_path, capsys, Path("/dev/null"), MAT, "is a device, not a data file")


def test_a_missing_or_unknown_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(tmp_path, capsys, tmp_path / "missing.npz", MAT, "no such file")
    (tmp_path / "m.csv").write_text("1,2\n")
    refused(tmp_path, capsys, tmp_path / "m.csv", MAT, "unknown file type '.csv'")


def test_long_literals_and_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entries = {i: float(i + 1) for i in range(60)}  # a literal of 600+ characters
    literal = "{" + ", ".join(f"{k} -> {x}" for k, x in entries.items()) + "}"
    prog = tmp_path / "prog.sdql"
    prog.write_text(f"V : {VEC}\nsum(<i, a> in V) a\n")
    assert main(["eval", str(prog), "-i", f"V={literal}"]) == 0
    assert float(capsys.readouterr().out) == sum(entries.values())
    long_name = "x" * 300
    for args in (["eval", long_name], ["eval", str(prog), "-i", f"V={long_name}.npy"]):
        code = main(args)
        assert_refused(code, capsys.readouterr().err, long_name)
    assert main(["eval", str(prog), "-i", f"V={long_name}"]) == 1  # a literal: a name
    err = capsys.readouterr().err
    assert err.startswith("sdqlite: error: --input V:") and "internal" not in err


def test_a_directory_is_not_a_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (f"sdqlite: error: {tmp_path}: is a directory, not a "
                                       "source file\n")


def test_errors_in_a_program_from_stdin_show_its_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("x : real\n\nsum(<i,a> in x) a\n"))
    assert main(["check", "-"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "<stdin>:3:14: error: expected a dictionary or dense array for the domain of sum, "
        "found real",
        "  sum(<i,a> in x) a",
        "               ^"]


def test_the_repl_handles_any_path(tmp_path: Path) -> None:
    s = Session()
    s.handle(f"V : {VEC}")
    literal = "{" + ", ".join(f"{k} -> 1.0" for k in range(60)) + "}"
    assert s.handle(f":input V = {literal}") == f"V : {VEC}"
    for cmd, why in [(f":load {'y' * 300}", "too long"),
                     (f":load {tmp_path}", "is a directory, not a source file"),
                     (f":input V = {tmp_path}", "is a directory, not a data file")]:
        with pytest.raises(DataError, match=why):
            s.handle(cmd)


def test_a_huge_sparse_result_is_not_written_dense(tmp_path: Path) -> None:
    """``write_data`` refuses a .npy of 2^40 entries for one stored entry (it would take 8
    TiB) and names the formats that hold it; the same result goes to .npz as it is."""
    from semantics.datafiles import write_data

    big = sp.coo_array(([1.5], ([3], [4])), shape=(2**20, 2**20))
    with pytest.raises(DataError, match=r"too large to write dense as \.npy \(write it as "):
        write_data(tmp_path / "big.npy", big)
    assert not list(tmp_path.iterdir())
    write_data(tmp_path / "big.npz", big)
    back = sp.load_npz(tmp_path / "big.npz")
    assert back.shape == big.shape and back.nnz == 1 and sp.csr_array(back)[3, 4] == 1.5

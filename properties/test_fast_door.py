"""The fast path answers only what the Python door answers (``codegen/fast.py``).

Law: for a compiled program called once with data of a signature (which makes the
door's plan), any later call — with data of that signature or not, right or wrong in
any way the plan's checks look at — gives what the same call gives with no plan made
(``fast.enabled`` off: every call through the Python door ``api.Door``): the same value,
of the same type, or the same error.  And the plan is taken, not declined, for data that
are plainly right: a call then never reaches the Python door.

The programs cover each kind of input a plan takes (a float64 numpy array, read whole or
as a format's flat arrays, one of two dimensions read whole; a CSR matrix the kernel
checks, one the extension checks whole (βAᵀA's, read by key) and a COO vector, each with
indices of 32 bits and of 64; a Python float) and each
result (a dense array written in place, a CSR matrix handed back, a number).  The data
are damaged in each way a check of ``sdqlite_call.cpp`` looks for: a number not finite, a
zero stored, keys out of order, repeated or outside the shape, indices of the other width,
an array not contiguous, of another dtype or shape, a subclass, an input missing or one
too many.
"""

from __future__ import annotations

import ctypes
import itertools
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import example, given
from hypothesis import strategies as st

import sdqlite
from codegen import api
from codegen import fast as F
from codegen import results as R
from sdqlite.errors import SDQLiteError

pytestmark = pytest.mark.usefixtures("quick_builds")

DVEC, SVEC = "{dense_int[n] -> real}", "{int[n] -> real}"
MAT = "{int[m] -> {int[n] -> real}}"
N = 6

#: name: (source, wrt, formats, inputs made from a random generator)
PROGRAMS: dict[str, tuple[str, str | None, dict[str, str], Callable[[Any], dict[str, Any]]]] = {
    "dot": (f"V1 : {DVEC}\nV2 : {SVEC}\nsum(<i, a> in V2) V1(i) * a", "V1", {"V2": "coo"},
            lambda r: {"V1": r.uniform(-1, 1, N), "V2": _vector(r)}),
    "scale": (f"s : real\nV : {SVEC}\nsum(<i, a> in V) {{ i -> a * s * s }}", "s", {"V": "coo"},
              lambda r: {"s": 1.5, "V": _vector(r)}),
    "colsums": (f"A : {MAT}\nX : {DVEC}\nsum(<i, r> in A) sum(<j, a> in r) a * X(j)", "X",
                {"A": "csr"}, lambda r: {"A": _matrix(r), "X": r.uniform(-1, 1, N)}),
    "smmm": (f"A : {MAT}\nB : {{dense_int[n] -> {{dense_int[p] -> real}}}}\n"
             "sum(<i, r> in A) sum(<k, a> in r) sum(<j, b> in B(k)) a * b", "B", {"A": "csr"},
             lambda r: {"A": _matrix(r), "B": r.uniform(-1, 1, (N, 3))}),
    "identity": (f"V1 : {DVEC}\nV2 : {SVEC}\n(sum(<i, a> in V1) {{ i -> a }}) + V2", "V1",
                 {"V2": "coo"}, lambda r: {"V1": r.uniform(-1, 1, N), "V2": _vector(r)}),
    "lsq": (f"A : {MAT}\nb : {{int[m] -> real}}\nx : {DVEC}\n"
            "sum(<i, bi> in b) let r = (sum(<j, a> in A(i)) a * x(j)) - bi in r * r", "x",
            {"A": "csr"},  # (indices of 64 bits)
            lambda r: {"A": _matrix(r, np.int64), "b": r.uniform(0.5, 1.5, N),
                       "x": r.uniform(-1, 1, N)}),
    "count": (f"V : {SVEC}\nsum(<i, a> in V) 1.0", None, {"V": "coo"},
              lambda r: {"V": _vector(r)}),
    "outer": (f"V1 : {DVEC}\nV2 : {DVEC}\n"
              "sum(<i, a> in V1) sum(<j, b> in V2) { i -> { j -> a * b } }", None, {},
              lambda r: {"V1": r.uniform(-1, 1, N), "V2": r.uniform(-1, 1, N)}),
    "matmul": (f"A : {MAT}\nB : {{dense_int[n] -> {{dense_int[p] -> real}}}}\n"
               "sum(<i, r> in A) sum(<k, a> in r) sum(<j, b> in B(k)) { i -> { j -> a * b } }",
               None, {"A": "csr"}, lambda r: {"A": _matrix(r), "B": r.uniform(-1, 1, (N, 3))}),
    "ata": (f"A : {MAT}\nX : {DVEC}\nsum(<i, r> in A) sum(<j, v> in r) sum(<k, w> in r) "
            "{ j -> v * w * X(k) }", "X", {"A": "csr"},  # (read by key: checked whole)
            lambda r: {"A": _matrix(r), "X": r.uniform(-1, 1, N)}),
    "value": (f"V1 : {DVEC}\nV2 : {SVEC}\ns : real\ns * sum(<i, a> in V2) V1(i) * a", None,
              {"V2": "coo"},  # (keys of 32 bits)
              lambda r: {"V1": r.uniform(-1, 1, N), "V2": _vector(r, np.int32), "s": 2.0}),
}


def _vector(r: Any, width: Any = np.int64) -> Any:
    keys = np.sort(r.choice(N, size=3, replace=False)).astype(width)
    return sp.coo_array((r.uniform(0.5, 2, 3), (keys,)), shape=(N,))


def _matrix(r: Any, width: Any = np.int32) -> Any:
    a: Any = sp.random(N, N, density=0.4, format="csr", random_state=r,
                  data_rvs=lambda k: r.uniform(0.5, 2, k))
    a.sum_duplicates()
    a.indptr, a.indices = a.indptr.astype(width), a.indices.astype(width)
    return a


@contextmanager
def _python_door() -> Iterator[None]:
    """Calls made meanwhile go through the Python door (no plan made or used)."""
    F.enabled = False
    try:
        yield
    finally:
        F.enabled = True


def _pair(name: str) -> tuple[Any, Any]:
    """The program compiled twice: with plans, and without (its calls all through the
    Python door); each called once with right data."""
    source, wrt, formats, make = PROGRAMS[name]
    first = make(np.random.default_rng(0))
    fast = sdqlite.compile(source, wrt=wrt, formats=formats, name=f"fast_{name}")
    fast(**first)
    slow = sdqlite.compile(source, wrt=wrt, formats=formats, name=f"fast_{name}")
    with _python_door():
        slow(**first)
    assert fast.fast and not slow.fast, "a plan made for the one, none for the other"
    return fast, slow


class Pairs(dict[str, tuple[Any, Any]]):
    def __repr__(self) -> str:  # (a counterexample's report: not every kernel's source)
        return "compiled"


@pytest.fixture(scope="module")
def compiled() -> Iterator[Pairs]:
    yield Pairs({name: _pair(name) for name in PROGRAMS})


# ---- damage ---------------------------------------------------------------------------


def _damaged(x: Any, how: str, where: int) -> Any:
    """Input ``x`` damaged as ``how`` says (at entry ``where``, where it has entries); ``x``
    itself where the damage does not apply to its kind."""
    if isinstance(x, float):
        return {"nan": float("nan"), "inf": float("inf"), "int": 2, "numpy scalar":
                np.float64(x), "zero": 0.0, "negative": -x}.get(how, x)
    if isinstance(x, np.ndarray):
        y = x.copy()
        match how:
            case "nan" | "inf":
                y.flat[where % y.size] = float(how)
            case "zero":
                y.flat[where % y.size] = 0.0
            case "strided":
                return np.repeat(y, 2, axis=0)[::2]
            case "fortran" if y.ndim == 2:
                return np.asfortranarray(y)
            case "float32":
                return y.astype(np.float32)
            case "shape":
                return np.concatenate([y, y[:1]])
            case "subclass":
                return y.view(_Sub)
            case "read-only":
                y.flags.writeable = False
        return y
    if isinstance(x, sp.coo_array):
        m: Any
        keys, vals = x.coords[0].copy(), x.data.copy()
        e = where % len(vals)
        _valued(vals, how, e)
        match how:
            case "unsorted":
                keys, vals = keys[::-1].copy(), vals[::-1].copy()
            case "repeated":
                keys[e] = keys[e - 1] if e else keys[1]
            case "outside":
                keys[e] = N + where
            case "negative":
                keys[e] = -1 - where
            case "indices":  # (of the other width)
                keys = keys.astype(np.int64 if keys.dtype == np.int32 else np.int32)
            case "strided":
                vals = np.repeat(vals, 2)[::2]
            case "short":
                vals = vals[:-1].copy()
        m = sp.coo_array((np.zeros(0), (np.zeros(0, dtype=np.int64),)), shape=x.shape)
        m.coords, m.data = (keys,), vals  # (as damaged: scipy's constructor checks)
        return m
    if isinstance(x, sp.csr_array | sp.csr_matrix):
        pos, idx, vals = x.indptr.copy(), x.indices.copy(), x.data.copy()
        e = where % len(vals)
        _valued(vals, how, e)
        match how:
            case "unsorted":
                row = next(i for i in range(N) if pos[i + 1] - pos[i] >= 2)
                idx[pos[row]:pos[row + 1]] = idx[pos[row]:pos[row + 1]][::-1].copy()
            case "repeated":
                row = next(i for i in range(N) if pos[i + 1] - pos[i] >= 2)
                idx[pos[row] + 1] = idx[pos[row]]
            case "outside":
                idx[e] = N + where
            case "int32" | "int64":
                pos, idx = pos.astype(how), idx.astype(how)
            case "indices":  # (of the other width, the row pointers not)
                idx = idx.astype(np.int64 if idx.dtype == np.int32 else np.int32)
            case "wider":
                m = type(x)((N, N + 1))
                m.indptr, m.indices, m.data = pos, idx, vals
                return m
            case "pointer":
                pos[-1] = len(vals) + 1 + where
            case "first":
                pos[0] = 1
            case "matrix":  # (the other class; x may be damaged already: not converted)
                m = (sp.csr_array if isinstance(x, sp.csr_matrix) else sp.csr_matrix)(x.shape)
                m.indptr, m.indices, m.data = pos, idx, vals
                return m
        m = type(x)(x.shape)
        m.indptr, m.indices, m.data = pos, idx, vals
        return m
    return x


def _valued(vals: Any, how: str, e: int) -> None:
    """A stored value damaged in place: not finite, or zero."""
    if how in ("nan", "inf", "zero"):
        vals[e] = 0.0 if how == "zero" else float(how)


class _Sub(np.ndarray):
    pass


DAMAGE = ("none", "nan", "inf", "zero", "int", "numpy scalar", "strided", "fortran",
          "float32", "shape", "subclass", "read-only", "unsorted", "repeated", "outside",
          "negative", "int32", "int64", "indices", "pointer", "first", "wider", "matrix",
          "short", "missing", "extra")


def _outcome(f: Any, data: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "value", f(**data)
    except SDQLiteError as err:
        return type(err).__name__, str(err)


def _same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    (ka, va), (kb, vb) = a, b
    if ka != kb or type(va) is not type(vb):
        return False
    if sp.issparse(va):
        ma, mb = cast(Any, va), cast(Any, vb)
        return bool(ma.shape == mb.shape and (ma != mb).nnz == 0
                    and ma.has_sorted_indices == mb.has_sorted_indices)
    if isinstance(va, np.ndarray):
        return bool(va.shape == vb.shape and va.dtype == vb.dtype and np.array_equal(va, vb))
    return bool(va == vb)


@dataclass(frozen=True)
class Case:
    program: str
    seed: int
    damage: tuple[tuple[str, str, int], ...]  # (input, how, where)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    program = draw(st.sampled_from(sorted(PROGRAMS)))
    names = sorted(PROGRAMS[program][3](np.random.default_rng(0)))
    damage = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(DAMAGE),
                                     st.integers(0, 7)), max_size=2))
    return Case(program, draw(st.integers(0, 2**16)), tuple(damage))


def _data(case: Case) -> dict[str, Any]:
    data = PROGRAMS[case.program][3](np.random.default_rng(case.seed))
    for x, how, where in case.damage:
        if how == "missing":
            data.pop(x, None)
        elif how == "extra":
            data["zz"] = 1.0
        elif x in data:
            data[x] = _damaged(data[x], how, where)
    return data


@given(cases())
@example(Case("dot", 1, ())).via("plainly right")
@example(Case("dot", 1, (("V1", "nan", 3),))).via("an input the kernel does not read, checked")
@example(Case("count", 1, (("V", "zero", 0),))).via("a zero stored: no entry")
@example(Case("dot", 1, (("V2", "unsorted", 0),))).via("a vector's keys out of order")
@example(Case("dot", 1, (("V2", "repeated", 1),))).via("a vector's key repeated")
@example(Case("dot", 1, (("V2", "outside", 0),))).via("a vector's key beyond its shape")
@example(Case("dot", 1, (("V2", "negative", 0),))).via("a vector's negative key")
@example(Case("dot", 1, (("V2", "indices", 0),))).via("a vector's keys of the other width")
@example(Case("dot", 1, (("V1", "strided", 0),))).via("an array not contiguous")
@example(Case("dot", 1, (("V1", "subclass", 0),))).via("a subclass of ndarray")
@example(Case("scale", 1, (("s", "nan", 0),))).via("a number not finite")
@example(Case("scale", 1, (("s", "numpy scalar", 0),))).via("a float's subclass")
@example(Case("colsums", 1, (("A", "nan", 0),))).via("a matrix's value not finite")
@example(Case("colsums", 1, (("A", "unsorted", 0),))).via("a row's keys out of order")
@example(Case("colsums", 1, (("A", "repeated", 0),))).via("a row's key repeated")
@example(Case("colsums", 1, (("A", "pointer", 0),))).via("a row pointer past the entries")
@example(Case("colsums", 1, (("A", "first", 0),))).via("a first row pointer not 0")
@example(Case("colsums", 1, (("A", "int64", 0),))).via("a matrix's indices of the other width")
@example(Case("colsums", 1, (("A", "matrix", 0),))).via("csr_array, not csr_matrix")
@example(Case("colsums", 1, (("A", "wider", 0),))).via("a matrix of another shape")
@example(Case("smmm", 1, (("B", "fortran", 0),))).via("a matrix in Fortran order")
@example(Case("identity", 1, (("V1", "inf", 0),))).via("a CSR result handed back")
@example(Case("lsq", 1, (("b", "shape", 0),))).via("an array of another shape")
@example(Case("value", 1, (("s", "missing", 0),))).via("an input missing")
@example(Case("value", 1, (("s", "extra", 0),))).via("an input too many")
def test_the_fast_path_answers_what_the_python_door_answers(
        compiled: dict[str, tuple[Any, Any]], case: Case) -> None:
    fast, slow = compiled[case.program]
    data = _data(case)
    with _python_door():  # (no plan made for a new signature: the comparison stays one)
        want = _outcome(slow, data)
    got = _outcome(fast, data)
    assert _same(got, want), (got, want)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_plainly_right_data_never_reach_the_python_door(
        compiled: dict[str, tuple[Any, Any]], program: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = compiled[program]
    calls = []
    monkeypatch.setattr(api.Door, "call", lambda *a, **k: calls.append(a))
    for seed in range(5):
        data = PROGRAMS[program][3](np.random.default_rng(seed))
        got = fast(**data)
        monkeypatch.undo()
        want = slow(**data)
        monkeypatch.setattr(api.Door, "call", lambda *a, **k: calls.append(a))
        assert _same(("value", got), ("value", want))
    assert calls == []


def test_where_a_plan_cannot_be_had_every_call_takes_the_python_door(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No Python headers, or a status laid out otherwise than the runtime's: no plan, and
    the calls give their values."""
    source, wrt, formats, make = PROGRAMS["dot"]
    data = make(np.random.default_rng(3))
    want = data["V2"].toarray()
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    assert F._load() is None
    monkeypatch.undo()
    monkeypatch.setattr(F, "FIELDS", F.FIELDS + 1)
    assert F._load() is None
    monkeypatch.setattr(F, "_loaded", [None])
    f = sdqlite.compile(source, wrt=wrt, formats=formats)
    for _ in range(2):
        assert np.array_equal(f(**data), want)
    assert f.fast == ()


def test_a_program_keeps_a_plan_for_each_signature_up_to_a_bound() -> None:
    source, wrt, formats, _ = PROGRAMS["dot"]
    f = sdqlite.compile(source, wrt=wrt, formats=formats)
    for n in itertools.islice(itertools.count(4), F.PLANS + 2):
        v2 = sp.coo_array((np.ones(2), (np.array([0, 3]),)), shape=(n,))
        data = {"V1": np.ones(n), "V2": v2}
        for _ in range(2):
            assert np.array_equal(f(**data), v2.toarray())
    assert len(f.fast) == 8  # (F.PLANS)
    assert len(f.doors) == F.PLANS + 2


# ---- the checks of sdqlite_call.cpp, each shown needed ------------------------------------

#: damage the fast path must decline before any kernel runs, by the kind of input it
#: damages (a CSR matrix's keys are the kernel's to check: ``Kernel.checks``)
DECLINED = {
    "float": ("nan", "inf", "int", "numpy scalar"),
    "numpy": ("nan", "inf", "strided", "fortran", "float32", "shape", "subclass"),
    "coo": ("nan", "inf", "zero", "unsorted", "repeated", "outside", "negative", "indices",
            "strided", "short"),
    "csr": ("first", "pointer", "int64", "indices", "wider", "matrix"),
}
SPIED = {"dot": ("V1", "V2"), "scale": ("s", "V"), "colsums": ("A", "X"), "smmm": ("B",),
         "identity": ("V1", "V2"), "value": ("V2",)}
ENTRY = 6  # (a plan's field: fast.plan)


def _kind(x: Any) -> str:
    return ("float" if isinstance(x, float) else "numpy" if isinstance(x, np.ndarray) else
            "coo" if isinstance(x, sp.coo_array) else "csr")  # (csr_matrix, from sp.random)


def _record(calls: list[int], code: int) -> int:
    calls.append(1)
    return code


def _spied(f: Any, code: int = 0) -> tuple[Any, list[int]]:
    """f's plan with its kernel replaced by one that records each call and returns
    ``code``."""
    calls: list[int] = []
    entry = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p)(lambda *a: _record(calls, code))
    plan = f.fast[0]
    spied = (*plan[:ENTRY], ctypes.cast(entry, ctypes.c_void_p).value, *plan[ENTRY + 1:])
    return (spied, entry), calls


@pytest.mark.parametrize(("program", "x"), [(p, x) for p, xs in SPIED.items() for x in xs])
def test_data_not_plainly_right_are_declined_before_the_kernel_runs(
        compiled: Pairs, program: str, x: str) -> None:
    """Each check of ``read`` in sdqlite_call.cpp on its own, the kernel's checks out of
    the way: the kernel is a stand-in that records its calls.  Data plainly right reach
    it; each damage of ``DECLINED`` is declined (NotImplemented) and never reaches it."""
    f = compiled[program][0]
    (plan, _keep), calls = _spied(f)
    data = PROGRAMS[program][3](np.random.default_rng(5))
    f.fast_call((plan,), data)  # (a result handed back, by a kernel that made none: declined)
    assert calls == [1]
    for how in DECLINED[_kind(data[x])]:
        if how == "fortran" and data[x].ndim == 1:  # (the same array)
            continue
        for where in range(3):
            damaged = {**data, x: _damaged(data[x], how, where)}
            assert f.fast_call((plan,), damaged) is NotImplemented, (x, how, where)
    for missing in ({k: v for k, v in data.items() if k != x}, {**data, "zz": 1.0}):
        assert f.fast_call((plan,), missing) is NotImplemented
    assert calls == [1]


@pytest.mark.parametrize("code", [1, 3, 7, 9])
def test_a_kernel_that_fails_is_declined_and_an_interrupt_raised(
        compiled: Pairs, code: int) -> None:
    """A failing kernel's call is made again by the Python door, which says why (a
    domain error, an overflow, a key outside, a block to check); Ctrl-C (8) is raised."""
    f = compiled["dot"][0]
    data = PROGRAMS["dot"][3](np.random.default_rng(5))
    (plan, _keep), calls = _spied(f, code)
    assert f.fast_call((plan,), data) is NotImplemented and calls == [1]
    (plan, _keep), calls = _spied(f, 8)
    with pytest.raises(KeyboardInterrupt):
        f.fast_call((plan,), data)
    assert calls == [1]


def _one(keys: Any, vals: Any) -> Any:
    return sp.coo_array((vals, (keys,)), shape=(N,))


def _narrowed(v: Any) -> Any:
    """v with 16-bit keys (scipy's constructor widens them: set after)."""
    m = v.copy()
    m.coords = (m.coords[0].astype(np.int16),)
    return m


_A: Any = _matrix(np.random.default_rng(7))
_V = _one(np.array([1, 4]), np.array([1.0, 2.0]))
_COLSUMS = PROGRAMS["colsums"][0]
_DOT = PROGRAMS["dot"][0]

#: first calls whose data the fast path does not take (``fast._item``, ``fast.plan``): no
#: plan is made, and every call takes the Python door
NO_PLAN: dict[str, tuple[str, str | None, dict[str, str], dict[str, Any]]] = {
    "an int for a real": ("x : real\ny : real\nx * x * y", "x", {}, {"x": 2, "y": 3.0}),
    "an array of ints": ("V : {dense_int[n] -> int}\nsum(<i, a> in V) a", None, {},
                         {"V": np.arange(N)}),
    "a CSC matrix": (_COLSUMS, "X", {}, {"A": sp.csc_array(_A), "X": np.ones(N)}),
    "a CSR matrix of ints": (_COLSUMS, "X", {}, {"A": sp.csr_array(_A.astype(np.int64)),
                                                 "X": np.ones(N)}),
    "a CSR matrix laid out in coo": (_COLSUMS, "X", {"A": "coo"}, {"A": _A, "X": np.ones(N)}),
    "a COO matrix": (_COLSUMS, "X", {"A": "coo"}, {"A": sp.coo_array(_A), "X": np.ones(N)}),
    "a vector of ints": (_DOT, "V1", {}, {"V1": np.ones(N), "V2": _one(np.array([1, 4]),
                                                                      np.array([1, 2]))}),
    "a vector laid out as a dict": (_DOT, "V1", {"V2": "dict"}, {"V1": np.ones(N), "V2": _V}),
    "a vector's keys of 16 bits, not read": (
        PROGRAMS["identity"][0], "V1", {"V2": "coo"},
        {"V1": np.ones(N), "V2": _narrowed(_V)}),
    "a vector in csr, laid out in coo": (_DOT, "V1", {"V2": "coo"},
                                        {"V1": np.ones(N), "V2": sp.csr_array(_V)}),
    "an array laid out in coo": (_DOT, "V1", {"V2": "coo"}, {"V1": np.ones(N),
                                                              "V2": _V.toarray()}),
    "an array of sparse layers read whole": (
        "b : {int[m] -> real}\nsum(<i, a> in b) a * a", "b", {"b": "dict"},
        {"b": np.arange(1.0, N + 1.0)}),
}


def test_a_matrix_the_kernel_does_not_check_is_checked_whole() -> None:
    """A CSR matrix that the kernel reads by key (βAᵀA's way) takes it as it is: a key
    repeated in a row, or a zero stored, would reach it.  The extension checks such a
    matrix whole before the kernel runs (``whole``), and declines; the door's value is
    the answer.  (The program is not linear in a row's values, so either damage changes
    what the kernel would compute.)"""
    source = (f"A : {MAT}\nX : {DVEC}\nsum(<i, r> in A) sum(<j, v> in r) sum(<k, w> in r) "
              "{ j -> exp(v) * w * X(k) }")
    r = np.random.default_rng(3)
    right = {"A": _matrix(r), "X": r.uniform(-1, 1, N)}
    fast = sdqlite.compile(source, wrt="X", formats={"A": "csr"})
    with _python_door():
        slow = sdqlite.compile(source, wrt="X", formats={"A": "csr"})
        want = _outcome(slow, right)
    assert _same(_outcome(fast, right), want)
    assert fast.fast and not slow.fast
    assert not next(iter(fast.doors.values())).spec.kernel.checks
    for how in ("repeated", "zero", "unsorted"):
        data = {"A": _damaged(right["A"], how, 0), "X": right["X"]}
        with _python_door():
            want = _outcome(slow, data)
        assert _same(_outcome(fast, data), want), how


@pytest.mark.parametrize("case", sorted(NO_PLAN))
def test_data_the_fast_path_does_not_take_make_no_plan(case: str) -> None:
    source, wrt, formats, data = NO_PLAN[case]
    f = sdqlite.compile(source, wrt=wrt, formats=formats)
    with _python_door():
        want = _outcome(sdqlite.compile(source, wrt=wrt, formats=formats), data)
    for _ in range(2):
        assert _same(_outcome(f, data), want)
    assert f.doors and f.fast == ()


def test_the_extension_is_loaded_once_and_not_built_without_python_s_headers(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    assert F.caller() is not None
    monkeypatch.setattr(F, "_load", lambda: pytest.fail("loaded again"))
    assert F.caller() is F.caller()
    monkeypatch.undo()
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    monkeypatch.setattr(F, "build", lambda *a, **k: pytest.fail("built without Python.h"))
    assert F._load() is None


def test_a_dense_result_comes_back_as_the_array_the_kernel_wrote(
        compiled: Pairs, monkeypatch: pytest.MonkeyPatch) -> None:
    """No conversion in Python: the array numpy zeroed, written in place, is the result."""
    fast, slow = compiled["dot"]
    data = PROGRAMS["dot"][3](np.random.default_rng(9))
    want = slow(**data)
    monkeypatch.setattr(R, "convert", lambda *a, **k: pytest.fail("converted in Python"))
    assert np.array_equal(fast(**data), want)


def test_a_plan_made_otherwise_is_an_error_not_a_crash(compiled: Pairs) -> None:
    """The extension checks each buffer's part against its input's kind, and an input's
    index against the inputs: a plan that does not hold (a bug in fast.py) is a TypeError."""
    f = compiled["scale"][0]
    data = PROGRAMS["scale"][3](np.random.default_rng(5))
    plan = f.fast[0]
    slots = plan[2]
    s_at = next(j for j, (i, part, _) in enumerate(slots) if part == F.DATA)
    for wrong in [(s_at, (slots[s_at][0], F.PARTS["pos"], None)),
                  (s_at, (7, F.DATA, None)), (s_at, (0, F.CONST, None))]:
        bad = (*plan[:2], tuple(wrong[1] if j == wrong[0] else x for j, x in enumerate(slots)),
               *plan[3:])
        with pytest.raises(TypeError, match="a plan made otherwise"):
            f.fast_call((bad,), data)

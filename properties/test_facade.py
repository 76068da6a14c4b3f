"""The Python façade (``sdqlite.evaluate``, ``sdqlite.grad``, ``sdqlite.compile``'s calls):
its laws.

1. Backend independence: for the paper's six kernels of §7 (``benchmarks.kernels``), on
   data handed over as a user would (numpy, scipy in every format, numbers, SDQLite
   values; ``properties/test_compiled_api.kernel_data``), ``backend="interp"`` and
   ``backend="cpp"`` give results of the same Python class, shape and scipy format with
   the same entries (to 1e-9), for the value and for the gradient by each real input.
2. A gradient is like its input: ``grad(src, x, …)`` of a real program is of ``x``'s
   class — numpy of ``x``'s shape, scipy of ``x``'s class and format (``csr_matrix`` in,
   ``csr_matrix`` out), a number for a number, a value for a value — and several names
   give the tuple of the gradients by each, in order.  (The six kernels are tensors:
   their gradients are Jacobians, compared across backends by law 1; ``SUM_OF`` makes
   each a real program, whose gradients law 2 checks.)
3. It is the gradient (an independent oracle): least squares' is scipy's hand-derived
   ``2 Aᵀ (A x − b)``, on both backends, by name or by position.
4. Misuse is an ``SDQLiteError`` that says what to do, never another exception: each row
   of ``MISUSE`` (seen by a new user, issue "the front door") raises its class with its
   words; an error in the program has ``file:line:col`` in ``str(e)``.
"""

from __future__ import annotations

import doctest
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st

import sdqlite
from benchmarks.kernels import KERNELS, SECTION_7
from properties.test_compiled_api import kernel_data
from sdqlite.errors import DataError, DiffError, SDQLiteError, SDQLTypeError
from sdqlite.syntax.types import REAL, DictT, scalar_of
from semantics.run import Input

pytestmark = pytest.mark.usefixtures("quick_builds")  # properties/conftest.py

LSQ = ("A : {int[m] -> {int[n] -> real}}\nb : {int[m] -> real}\nx : {dense_int[n] -> real}\n"
       "sum(<i, bi> in b) let r = (sum(<j, a> in A(i)) a * x(j)) - bi in r * r")


def _entries(r: Any) -> Any:
    if sp.issparse(r):
        m: Any = r
        return m.toarray()
    return r


def _issparse(x: Any) -> bool:
    """(``sp.issparse`` narrows to a class without the attributes read here.)"""
    return bool(sp.issparse(x))


def _same(a: Any, b: Any) -> None:
    """Law 1's comparison: class, shape, format, entries."""
    assert type(a) is type(b), (type(a), type(b))
    if _issparse(a):
        assert a.format == b.format and a.shape == b.shape
    if isinstance(a, np.ndarray) or sp.issparse(a):
        assert np.asarray(_entries(a)).shape == np.asarray(_entries(b)).shape
        assert np.allclose(_entries(a), _entries(b), rtol=1e-9, atol=1e-12)
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12)
    else:
        assert sdqlite_values_equal(a, b)


def sdqlite_values_equal(a: Any, b: Any) -> bool:
    from semantics.values import values_equal

    return values_equal(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _like(g: Any, x: Any) -> None:
    """Law 2: the gradient by ``x`` is of ``x``'s kind."""
    if _issparse(x):
        assert type(g) is type(x) and g.format == x.format and g.shape == x.shape
    elif isinstance(x, np.ndarray) and x.ndim > 0:
        assert isinstance(g, np.ndarray) and g.shape == x.shape
    elif isinstance(x, float | int | np.number) or (isinstance(x, np.ndarray) and x.ndim == 0):
        assert isinstance(g, float)
    else:
        assert not isinstance(g, np.ndarray) and not sp.issparse(g)


def _reals(kernel: str, inputs: dict[str, Input], data: dict[str, Any]) -> list[str]:
    src = KERNELS[kernel].source
    decls = {d.name: d.type for d in sdqlite.parse_program(src).decls}
    return [x for x in sorted(data) if scalar_of(decls[x]) == REAL]


@settings(max_examples=max(6, settings().max_examples // 24), deadline=None)  # (each optimizes)
@given(kernel_data(SECTION_7), st.booleans())
@example(("VSM", {"s": 0.0, "V": sp.coo_array(np.zeros(0))},
          {"s": Input(0.0), "V": Input({}, DictT(REAL))}, False), True).via(
    "a format's array the kernel does not read (sum(V)'s keys, by s): a KeyError once")
def test_the_backends_agree_and_a_gradient_is_like_its_input(
        case: tuple[str, dict[str, Any], dict[str, Input], bool], several: bool) -> None:
    kernel, data, inputs, _ = case
    src = KERNELS[kernel].source
    try:
        want = sdqlite.evaluate(src, **data)
    except SDQLiteError as err:  # data the door refuses: both backends refuse them alike
        with pytest.raises(type(err)):
            sdqlite.evaluate(src, backend="cpp", **data)
        return
    _same(sdqlite.evaluate(src, backend="cpp", **data), want)
    reals = _reals(kernel, inputs, data)
    wrt: tuple[str, ...] = tuple(reals) if several else (KERNELS[kernel].wrt,)
    for program, like in ((src, False), (_sum_of(src), True)):
        interp = sdqlite.grad(program, wrt, **data)
        cpp = sdqlite.grad(program, wrt, backend="cpp", **data)
        assert isinstance(interp, tuple) and len(interp) == len(wrt) == len(cpp)
        for x, g, h in zip(wrt, interp, cpp, strict=True):
            if like:
                _like(g, data[x])
            _same(h, g)


def _sum_of(src: str) -> str:
    """A kernel made a real program: the sum of its result's entries."""
    prog = sdqlite.parse_program(src)
    assert prog.expr is not None
    t = sdqlite.typecheck(prog.expr, {d.name: d.type for d in prog.decls})[1]
    return "\n".join([*map(str, prog.decls),
                      f"let e = {sdqlite.show(prog.expr)} in {_total(t, 'e', 0)}"])


def _total(t: Any, e: str, depth: int) -> str:
    if not hasattr(t, "val"):
        return e
    return f"sum(<k{depth}, v{depth}> in {e}) " + _total(t.val, f"v{depth}", depth + 1)


@pytest.mark.parametrize("backend", ["interp", "cpp"])
@pytest.mark.parametrize("kind", ["csr_matrix", "csr_array", "csc_matrix", "coo_array"])
def test_least_squares_gradient_is_scipys_formula(backend: str, kind: str) -> None:
    rng = np.random.default_rng(7)
    a = sp.random(40, 25, density=0.2, format="coo", random_state=3)
    A = getattr(sp, kind)(a)
    b, x = rng.standard_normal(40), rng.standard_normal(25)
    want = np.asarray(2 * a.T @ (a @ x - b))
    by_name = sdqlite.grad(LSQ, "x", A=A, b=b, x=x, backend=backend)  # type: ignore[arg-type]
    by_position = sdqlite.grad(LSQ, "x", A, b, x, backend=backend)  # type: ignore[arg-type]
    assert np.allclose(by_name, want, rtol=1e-10) and np.allclose(by_position, want, rtol=1e-10)
    value = sdqlite.evaluate(LSQ, A, b, x, backend=backend)  # type: ignore[arg-type]
    assert value == pytest.approx(float(np.sum((a @ x - b) ** 2)), rel=1e-12)
    # by A: 2 r_i x_j at A's stored entries only (a sparse input's gradient is sparse)
    gA = sdqlite.grad(LSQ, "A", A, b, x, backend=backend)  # type: ignore[arg-type]
    r = a @ x - b
    dense = 2 * np.outer(r, x) * (a.toarray() != 0)
    assert type(gA) is type(A) and gA.format == A.format
    assert np.allclose(gA.toarray(), dense, rtol=1e-10)


def test_a_compiled_function_has_its_signature_and_takes_positions() -> None:
    f = sdqlite.compile(LSQ, wrt="x")
    assert str(inspect.signature(f)) == "(A, b, x)"
    assert "kernel(A, b, x)" in str(f.__doc__) and "gradient w.r.t. x" in repr(f)
    both = sdqlite.compile(LSQ, wrt=("x", "b"))
    a = sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]]))
    b, x = np.array([1.0, -1.0]), np.array([0.5, 0.25])
    gx, gb = both(a, b, x)
    r = a @ x - b
    assert np.allclose(gx, 2 * a.T @ r) and np.allclose(gb, -2 * r)


def _path(tmp: Path) -> Path:
    p = tmp / "typo.sdql"
    p.write_text("x : real\nsin(x) + y\n")
    return p


A2 = sp.csr_array(np.eye(2))
#: misuse seen by new users -> the error it must be, and words its message must hold
MISUSE: dict[str, tuple[Callable[[Path], Any], type[SDQLiteError], str]] = {
    "a typo found when compiling": (
        lambda _: sdqlite.compile("x : real\nsin(x) + y"), SDQLTypeError,
        "<program>:2:10: y is not declared"),
    "a typo in a file": (
        lambda t: sdqlite.evaluate(_path(t), x=1.0), SDQLTypeError, "typo.sdql:2:10: y is"),
    "wrt not a name": (lambda _: sdqlite.grad(LSQ, 3, A2), DataError, "give the name"),  # type: ignore[arg-type]
    "wrt names no input": (
        lambda _: sdqlite.grad(LSQ, "q", A2, np.ones(2), np.ones(2)), DiffError,
        "with respect to q: it is not an input (inputs: A, b, x)"),
    "too many positions": (
        lambda _: sdqlite.evaluate(LSQ, A2, np.ones(2), np.ones(2), 1.0), DataError,
        "declares 3 (A, b, x)"),
    "by position and by name": (
        lambda _: sdqlite.evaluate(LSQ, A2, A=A2), DataError, "given twice"),
    "an unknown backend": (
        lambda _: sdqlite.evaluate(LSQ, backend="gpu"), DataError, "choose \"interp\""),  # type: ignore[arg-type]
    "an input the program has not": (
        lambda _: sdqlite.compile(LSQ)(A2, np.ones(2), np.ones(2), Q=1.0), DataError,
        "Q: not an input"),
    "a program that is no text": (lambda _: sdqlite.compile(42), DataError, "source text"),  # type: ignore[call-overload]
    "formats not a dict": (lambda _: sdqlite.compile(LSQ, None, "csr"), DataError,  # type: ignore[call-overload]
                           "formats={\"A\": \"csr\"}"),
    "an unknown output": (lambda _: sdqlite.compile(LSQ, output="numpy"), DataError,  # type: ignore[call-overload]
                          "output='numpy'"),
    "run with raw data": (
        lambda _: _run(LSQ, {"A": A2}), DataError, "semantics.run.Input"),
    "run with scipy in an Input": (
        lambda _: _run(LSQ, {"A": Input(A2)}), DataError, "not an SDQLite value"),
    "the interpreter on scipy": (
        lambda _: _interp("A : {int -> {int -> real}}\nsum(<i, r> in A) 1.0", {"A": A2}),
        DataError, "scipy.csr_array, not an SDQLite value"),
    "gradient before checking": (lambda _: _raw_gradient(), DiffError, "checked program"),
}


def _run(src: str, inputs: dict[str, Any]) -> Any:
    from semantics.run import run

    return run(sdqlite.parse_program(src), inputs)


def _interp(src: str, env: dict[str, Any]) -> Any:
    from semantics.interp import evaluate

    prog = sdqlite.parse_program(src)
    ctx = {d.name: d.type for d in prog.decls}
    assert prog.expr is not None
    return evaluate(sdqlite.typecheck(prog.expr, ctx)[0], env)


def _raw_gradient() -> Any:
    from sdqlite.ad.gradient import gradient

    prog = sdqlite.parse_program(LSQ)
    assert prog.expr is not None
    return gradient(prog.expr, "x", {d.name: d.type for d in prog.decls})


@pytest.mark.parametrize("case", sorted(MISUSE))
def test_misuse_is_an_sdqlite_error_that_says_what_to_do(case: str, tmp_path: Path) -> None:
    call, kind, words = MISUSE[case]
    with pytest.raises(kind) as caught:
        call(tmp_path)
    assert words in str(caught.value), str(caught.value)


def test_version_and_python_dash_m() -> None:
    import subprocess
    import sys

    assert sdqlite.__version__ and sdqlite.__version__ != "unknown"
    done = subprocess.run([sys.executable, "-m", "sdqlite", "--version"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and sdqlite.__version__ in done.stdout


@settings(max_examples=min(30, settings().max_examples), deadline=None)
@given(st.integers(0, 5), st.integers(0, 4), st.integers(-2, 2), st.integers(0, 2**31 - 1))
def test_least_squares_reads_the_rows_of_a_in_place(m: int, n: int, extra: int,
                                                     seed: int) -> None:
    """Rows read in place (storage composition of ``A(i)`` at a key of A's declared size,
    ``properties``' law 2's compiled side): least squares iterating b reads row i of a
    scipy A where it is stored, without building A as nested hash maps, and its
    gradient is scipy's formula over the rows where b is stored; an A with fewer or more
    rows than b's m is refused, as scipy's A @ x - b is (it was grown or cut: issue 27)."""
    rng = np.random.default_rng(seed)
    rows = max(0, m + extra)
    dense = np.round(rng.standard_normal((rows, n)) * (rng.random((rows, n)) < 0.5), 1)
    A = sp.csr_array(dense) if rows and n else sp.csr_array((rows, n))
    b, x = np.round(rng.standard_normal(m), 1), np.round(rng.standard_normal(n), 1)
    f = sdqlite.compile(LSQ, wrt="x")
    if rows != m:
        with pytest.raises(DataError, match=rf"input b: its shape gives m = {m}, but m = "
                                            rf"{rows} \(from the shape of A\)|input b has {m} "
                                            rf"positions but m = {rows}"):
            f(A, b, x)
        return
    stored = dense[b != 0]  # the sum iterates b's entries: a zero of b is none
    want = 2 * stored.T @ (stored @ x - b[b != 0])
    assert np.allclose(f(A, b, x), want, rtol=1e-9, atol=1e-12)
    assert "sdql::dict<sdql::dict<double>>" not in f.cpp({"A": A, "b": b, "x": x})


def test_rows_are_read_in_place_only_at_keys_of_the_rows_size() -> None:
    """The guard of rows read in place: iterating b of size p, not A's m, a key may lie
    past A's rows, so A(i) stays a lookup in A built whole (a key past the last row
    reads no row) and the gradient is still scipy's."""
    other = LSQ.replace("b : {int[m] -> real}", "b : {int[p] -> real}")
    A = sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]]))
    b, x = np.array([1.0, -1.0, 4.0]), np.array([0.5, 0.25])
    f = sdqlite.compile(other, wrt="x")
    r = np.append(A @ x, 0.0) - b  # row 2 of A is past its 2 rows: empty
    assert np.allclose(f(A, b, x), 2 * A.T @ r[:2])
    assert "sdql::dict<sdql::dict<double>>" in f.cpp({"A": A, "b": b, "x": x})


PUBLIC_FUNCTIONS = [x for x in sdqlite.__all__ if x[0].islower() and x != "__version__"]


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_every_public_function_has_an_example_that_runs(name: str) -> None:
    """Issue 27: ``help()`` on every public function shows an example (check, synth,
    typecheck, the parsers and show had none); each runs as a doctest and says what it
    shows."""
    f = getattr(sdqlite, name)
    tests = doctest.DocTestFinder(recurse=False).find(
        f, name, globs={"sdqlite": sdqlite, "np": np})
    assert tests and tests[0].examples, f"sdqlite.{name} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    assert runner.failures == 0, f"sdqlite.{name}'s example fails"

"""``sdqlite.compile`` agrees with the interpreter, through the front door users call (the
fourth property, §6 code generation, end to end).

For the paper's six kernels of §7 (``benchmarks.kernels``: BATAX, SMMM, SMVM, VVA, VVD,
VSM), their value and their gradient, optimized or not, declared or typed by their data,
the sparse input stored in the default format or one its type admits, a dense or a
dictionary destination, and data generated and handed over as a user would — scipy
sparse arrays in csr, csc or coo (float or integer, with explicit zeros, entries out of
order, CSR arrays with an entry given twice), numpy arrays (0-d for a scalar too), or
SDQLite values —
``compile(source, wrt, formats)(**data)``:

1. with ``output="value"`` is the interpreter's value of the program (``semantics.run``)
   on the same data, to 1e-9, and canonical as it is (no dictionary stores a zero);
2. with the default output (numpy, scipy or a number) holds the same entries, and is
   numpy or scipy, storing no zero, for a real vector or matrix whose sizes the
   declarations fix, or the shape of the one numpy or scipy input its layers come from
   (``x * 2.0``), of that shape (a layer that holds no keys, ``zero[T]``, has size 0); a
   Python number for a scalar; else the value (int entries, three layers, a key of
   unknown size);
3. where the interpreter refuses the program or its data, raises a clean error too;
4. where a unary operation fails at run time (outside its domain, or not finite), raises
   the interpreter's error at the same place in the source (the optimizer keeps each
   operation's location), optimized or not; a real overflow is a real overflow.
5. data that cannot be read as their input (a missing or extra input, a dtype with no
   SDQLite type, a number that is not finite, another shape than declared, a stored
   zero, a bool where a real is declared, a Python type it does not read, a format for
   no input) are a DataError that names the input, raised before anything is built;
   while a Python int where a real is declared is that real, an int declared int stays
   one, and zeros past the declared size of a numpy array or a scipy vector given for
   sparse sized keys are no entries (a non-zero there is a DataError naming the key), as
   are the empty rows and columns, and stored zeros, of a scipy matrix larger than the
   size another input fixes (the result is the interpreter's, in every format).
6. a program whose inputs are all declared is checked by ``compile`` itself, before any
   data (a type error, a gradient w.r.t. an input that is not real, or w.r.t. one the
   program does not read, which still needs its data); a program with inputs not
   declared compiles, and is typed by its data at the call; a program of declarations
   only is refused; and the optimizer's limits given to ``compile`` are the ones every
   saturation of the pipeline keeps to;
7. a result whose every layer is dense is, with the default output, a numpy array of
   its entries exactly where numpy can hold it (every layer starts at position 0 and is
   rectangular), else the interpreter's value;
8. an integer constant compiles to its value where it fits in C++'s 64-bit int, and is
   a CodegenError at its location where it does not (optimized too);
9. CSR arrays with an entry given twice (in halves) are the matrix of the sums, also
   for a program that is not linear in them.
10. names C++ reserves, C's macros (``errno``, ``stdin``, ``EOF``), the generated code's
   own names (``data``, ``result``), or names that clash once a prime is spelled out
   (``double``, ``class``, ``new``, ``_t``, ``__LINE__``, ``x'`` beside ``x_d``), for
   inputs, binders and the kernel itself, compile to distinct identifiers: the value is
   the interpreter's.
11. each input is stored in the format asked for: the one given to ``compile``, else the
   one declared (``A : ... @ csr``), else its data's (``csr`` for a scipy matrix, ``coo``
   for a scipy vector, ``dense`` for numpy, ``dict`` for a value); a specialization is
   built once, at its first call, and reports the time its build took (none before).
12. it goes through the stages asked for: ``optimize=False`` is the input composed with
   its formats and normalized exactly when ``normalize``; the pipeline has its
   saturation, AD stages exactly when differentiating, and normalization exactly when
   ``normalize``; each stage within the time specializing took; the program compiled
   is the last stage's (the kernel reads its free variables). The kernel reads each
   input stored in a format that is not the identity as that format's arrays, and each
   other as itself; and it accumulates into an array exactly when the destination is
   ``dense`` and the result is a sparse dictionary whose outer layer's size is known.
13. ``compile``'s defaults are the documented ones (``docs/reference/cpp.md``); a parsed
   program compiles as its text; and ``name`` names the generated function (a C++
   identifier made of it).
14. an entry of a range, ``(lo:hi)(k)``, is k where lo <= k < hi and 0 elsewhere, for
   any 64-bit bounds: the compiled code reads it without building the range (the
   interpreter builds it, up to 10^7 positions).
15. a call with data of a signature met before (``inputs.signature``: numpy arrays and
   scipy matrices of the same dtype, shape and format, numbers of the same type) goes
   through that signature's call plan (``api.Door``) without reading the data afresh, and
   is the call of a program that has met no data: the same value, or the same error, for
   data scaled, not finite, out of order or with a key past their shape.

Where ``test_cpp_agreement.py`` checks the generated C++ on generated programs, this
checks what ``codegen/api.py`` adds: reading and checking the inputs, choosing their
formats, laying out their buffers, specializing and caching, and reading results back.
"""

from __future__ import annotations

import inspect
import math
import re
import subprocess
import time
from collections.abc import Sequence
from functools import reduce
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st

import sdqlite
from benchmarks.kernels import KERNELS, P
from codegen import api, emit, results
from codegen import data as D
from codegen import inputs as reading
from codegen.api import Compiled
from codegen.results import Destination, Output
from properties.generators import Draw
from sdqlite.check.sizes import NO_KEYS
from sdqlite.errors import (
    CodegenError,
    DataError,
    DiffError,
    EvalError,
    SDQLiteError,
    SDQLTypeError,
)
from sdqlite.opt.pipeline import Limits
from sdqlite.storage.formats import formats_for, resolve
from sdqlite.syntax.ast import free_vars
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.parser import parse_program
from sdqlite.syntax.types import REAL, DictT, scalar_of
from semantics.convert import from_numpy, from_scipy, to_numpy
from semantics.oracle import nested
from semantics.run import Input, run
from semantics.values import (
    DenseArray,
    Value,
    add,
    dense,
    stored_zero,
    type_of,
    values_equal,
)

#: a build for each kernel, wrt, format and option met: few examples, each cheap once built
EXAMPLES = max(10, settings().max_examples // 4)


pytestmark = pytest.mark.usefixtures("quick_builds")  # properties/conftest.py


_COMPILED: dict[tuple[Any, ...], Compiled] = {}


def _compiled(source: str, wrt: str | None, optimize: bool, output: Output,
              options: dict[str, Any]) -> Compiled:
    key = (source, wrt, optimize, output, repr(sorted(options.items())))
    if key not in _COMPILED:
        _COMPILED[key] = sdqlite.compile(source, wrt=wrt, optimize=optimize, output=output,
                                         **options)
    return _COMPILED[key]


@st.composite
def kernel_data(draw: Draw, kernels: Sequence[str] = tuple(KERNELS)
                ) -> tuple[str, dict[str, Any], dict[str, Input], bool]:
    """One of ``kernels``, its inputs as a user hands them over, and each as an SDQLite
    value under the kernel's declarations and as the data alone says (a numpy array given
    for a sparse vector is its nonzeros when the vector is declared, an array otherwise)."""
    kernel = draw(st.sampled_from(sorted(kernels)))
    m, n = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    # exact in binary (sums agree), zero about half the time: sparse data with gaps
    halves = st.one_of(st.just(0.0), st.integers(-4, 4).map(lambda k: k / 2))

    def dense_matrix(rows: int, cols: int) -> Any:
        return np.array([[draw(halves) for _ in range(cols)] for _ in range(rows)],
                        dtype=np.float64).reshape(rows, cols)

    def sparse(a: Any) -> tuple[Any, Input, Input]:
        """A sparse input from a dense array: scipy, numpy or a value (its nonzeros)."""
        value: Any = ({int(i): float(x) for i, x in enumerate(a) if x} if a.ndim == 1 else
                        {int(i): {int(j): float(x) for j, x in enumerate(row) if x}
                         for i, row in enumerate(a) if row.any()})
        how = draw(st.sampled_from(["scipy", "numpy", "value"]))
        if how == "value":
            return value, Input(value), Input(value)
        if how == "numpy":
            return a.copy(), Input(value), Input(*from_numpy(a))
        integral = bool(np.all(a == np.round(a))) and draw(st.booleans()) and declared
        stored = a.astype(np.int64) if integral else a
        logical = Input(value, DictT(REAL) if a.ndim == 1 else DictT(DictT(REAL)))
        if a.ndim == 1:
            return sp.coo_array(stored), Input(value), logical
        m = sp.coo_array(stored)
        if draw(st.booleans()) and m.nnz:  # an explicit zero, entries out of order
            rows, cols = np.append(m.row, m.row[0]), np.append(m.col, m.col[0])
            data = np.append(m.data, 0)
            order = np.arange(len(data))[::-1]
            m = sp.coo_array((data[order], (rows[order], cols[order])), shape=m.shape)
        fmt = draw(st.sampled_from(["csr", "csc", "coo", "csr as given"]))
        if fmt == "csr as given":  # CSR arrays as a user may build them: unsummed, unsorted
            if m.nnz:  # the first entry given twice, in halves (exact: multiples of 1/4)
                half = m.data[0] / 2
                m = sp.coo_array((np.append(np.append(half, m.data[1:]), half),
                                  (np.append(m.row, m.row[0]), np.append(m.col, m.col[0]))),
                                 shape=m.shape)
            order = np.argsort(m.row, kind="stable")
            indptr = np.searchsorted(m.row[order], np.arange(m.shape[0] + 1))
            return sp.csr_array((m.data[order], m.col[order], indptr), shape=m.shape), \
                Input(value), logical
        return m.asformat(fmt), Input(value), logical

    def dense_vector(k: int) -> tuple[Any, Input, Input]:
        a = dense_matrix(1, k).reshape(k)
        v = Input(*from_numpy(a))
        return (a, v, v) if draw(st.booleans()) else (v.value, Input(v.value), Input(v.value))

    def scalar() -> tuple[Any, Input, Input]:
        x = draw(halves)
        return draw(st.sampled_from([x, np.float64(x), np.array(x)])), Input(x), Input(x)

    declared = draw(st.booleans())
    data: dict[str, tuple[Any, Input, Input]] = {}
    match kernel:
        case "BATAX":
            data = {"A": sparse(dense_matrix(m, n)), "beta": scalar(), "X": dense_vector(n)}
        case "SMMM":
            b = dense_matrix(n, P)
            rows = Input(*from_numpy(b))
            data = {"A": sparse(dense_matrix(m, n)), "B": (b, rows, rows)}
        case "SMVM":
            data = {"A": sparse(dense_matrix(m, n)), "X": dense_vector(n)}
        case "VVA" | "VVD":
            data = {"V1": dense_vector(n), "V2": sparse(dense_matrix(1, n).reshape(n))}
        case "LSQ" | "LOGREG":
            data = {"A": sparse(dense_matrix(m, n)), "b": sparse(dense_matrix(1, m).reshape(m)),
                    "x": dense_vector(n)}
        case "VSM":
            data = {"s": scalar(), "V": sparse(dense_matrix(1, n).reshape(n))}
        case _:
            raise AssertionError(f"no data drawn for the kernel {kernel}: add its inputs here")
    return kernel, {x: d for x, (d, *_) in data.items()}, {
        x: v if declared else w for x, (_, v, w) in data.items()}, declared


def same_entries(got: Any, want: Value) -> bool:
    """A result of the default output — numpy, scipy, a number, or a value where the
    result has no array shape — holds the entries of ``want``."""
    if sp.issparse(got):
        matrix: Any = got  # (issparse narrows to a class without toarray for mypy)
        got = matrix.toarray()
    if isinstance(got, np.ndarray):
        entries = np.asarray(to_numpy(want, got.shape), dtype=np.float64)  # Fractions too
        return bool(np.allclose(got, entries, rtol=1e-9, atol=1e-12))
    return values_equal(got, want, rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=EXAMPLES)
@given(kernel_data(), st.booleans(), st.booleans(), st.data())
def test_compile_agrees_with_the_interpreter(
        case: tuple[str, dict[str, Any], dict[str, Input], bool], differentiate: bool,
        optimize: bool, data: st.DataObject) -> None:
    kernel, given_data, values, declared = case
    k = KERNELS[kernel]
    wrt = k.wrt if differentiate else None
    *decl_lines, body = k.source.splitlines()
    source = k.source if declared else body  # undeclared: typed by the data
    text = "\n".join([*(decl_lines if declared else []),
                      f"gradient ({body}) {wrt}" if wrt else body])
    options: dict[str, Any] = {
        "formats": None, "destination": data.draw(st.sampled_from(["dense", "dict"]))}
    try:
        result = run(parse_program(text), values)
    except SDQLiteError:  # the interpreter refuses: so does the compiled path, cleanly
        with pytest.raises(SDQLiteError):
            _compiled(source, wrt, optimize, "value", options)(**given_data)
        return
    want = result.value
    stored = parse_program(k.source).decls if declared else ()
    sparse_type = next((d.type for d in stored if d.name == k.sparse), None) or \
        values[k.sparse].type or type_of(values[k.sparse].value)
    if sparse_type is not None and data.draw(st.integers(0, 3)) > 0:  # mostly explicit
        options["formats"] = {k.sparse: data.draw(st.sampled_from(formats_for(sparse_type)))}
    got = _compiled(source, wrt, optimize, "value", options)(**given_data)
    assert values_equal(got, want, rel_tol=1e-9, abs_tol=1e-12), (got, want)
    assert stored_zero(got) is None, got  # canonical, as the interpreter's
    auto = _compiled(source, wrt, optimize, "auto", options)(**given_data)
    assert same_entries(auto, want)
    if declared and isinstance(want, dict | DenseArray):  # its sizes are declared
        assert isinstance(auto, np.ndarray) or sp.issparse(auto), type(auto)


#: an argument each operation fails on (outside its domain, or a result not finite)
FAILS_ON = {"log": -1.0, "sqrt": -0.5, "inv": 0.0, "exp": 800.0, "square": 1e200}


@st.composite
def failing_programs(draw: Draw) -> tuple[str, dict[str, Any]]:
    """A sum or product of unary operations and squares, each of its own input (a scalar, or the
    entries of a vector), with data on which at most one of them fails."""
    ops = draw(st.lists(st.sampled_from([*sorted(UNARY_OPS), "square"]), min_size=1,
                        max_size=4))
    failing = [i for i, op in enumerate(ops) if op in FAILS_ON]
    fails = draw(st.sampled_from([None, *failing]))
    decls, terms, data = [], [], dict[str, Any]()
    for i, op in enumerate(ops):
        x = FAILS_ON[op] if i == fails else 0.5
        if draw(st.booleans()):
            decls.append(f"x{i} : real")
            terms.append(f"x{i} * x{i}" if op == "square" else f"{op}(x{i})")
            data[f"x{i}"] = x
        elif op == "square":
            decls.append(f"x{i} : real")
            terms.append(f"(x{i} * x{i})")
            data[f"x{i}"] = x
        elif x != 0.0 and draw(st.booleans()):  # a sparse vector stores no zero
            decls.append(f"v{i} : {{int -> real}}")
            terms.append(f"(sum(<k, e> in v{i}) {op}(e))")
            data[f"v{i}"] = {0: 0.25, draw(st.integers(1, 3)): x}
        else:
            decls.append(f"v{i} : {{dense_int -> real}}")
            terms.append(f"(sum(<k, e> in v{i}) {op}(e))")
            data[f"v{i}"] = np.array([0.25] * draw(st.integers(0, 2)) + [x])
    body = terms[0]
    for t in terms[1:]:
        body += draw(st.sampled_from([" + ", " * "])) + t
    return "\n".join([*decls, body]), data


@settings(max_examples=min(30, settings().max_examples))
@given(failing_programs(), st.booleans())
@example(("v0 : {dense_int -> real}\n(sum(<k, e> in v0) inv(e))", {"v0": np.array([0.0])}),
         True).via("saturation dropped the operation's location")
@example(("v0 : {dense_int -> real}\nv1 : {dense_int -> real}\n"
          "(sum(<k, e> in v0) log(e)) + (sum(<k, e> in v1) log(e))",
          {"v0": np.array([0.5]), "v1": np.array([-1.0])}),
         True).via("one term, log(e), under two binders: the location of the first")
@example(("x : real\ngradient (log(x)) x", {"x": 0.0}), True).via(
    "log'(x) is inv(x): its failure is located at log(x) (it had no location)")
@example(("x : {dense_int -> real}\nc : real\nsum(<i, a> in x) if i = -1 then exp(c) * a",
          {"x": np.array([1.0, 2.0]), "c": 1000.0}), True).via(
    "sum-to-get read x(-1) and evaluated exp(c), which no position reaches: the kernel "
    "raised where the program is 0 (properties/test_failures.py)")
def test_a_failing_operation_fails_where_the_interpreter_says(
        case: tuple[str, dict[str, Any]], optimize: bool) -> None:
    source, data = case
    program = parse_program(source)
    try:
        want = run(program, {x: Input(*from_numpy(v)) if isinstance(v, np.ndarray)
                             else Input(v) for x, v in data.items()}).value
    except EvalError as err:
        with pytest.raises(EvalError) as got:
            _compiled(source, None, optimize, "value", {})(**data)
        if err.message.startswith("real overflow"):  # C++ checks the result, not each step
            assert got.value.message.startswith("real overflow")
            return
        assert (got.value.message, got.value.span) == (err.message, err.span)
        assert err.span is not None
        return
    got_value = _compiled(source, None, optimize, "value", {})(**data)
    assert values_equal(got_value, want, rel_tol=1e-9, abs_tol=1e-12)


def _arrays(depth: int) -> st.SearchStrategy[Any]:
    """Dense arrays ``depth`` deep, ragged or not, mostly starting at position 0 (an empty
    one always: it is no value of its type otherwise)."""
    inner: st.SearchStrategy[Any] = st.sampled_from([0.0, 0.5, -1.5, 2.0])
    for _ in range(depth):
        inner = st.lists(inner, max_size=3).flatmap(lambda xs: st.builds(
            DenseArray, st.just(tuple(xs)), st.sampled_from([0, 0, 0, 1] if xs else [0])))
    return inner


def _numpy_shape(v: Any) -> tuple[int, ...] | None:
    """The shape of a numpy array holding ``v``: None unless every layer starts at 0 and
    the arrays of a layer have one length (an empty layer: its own length only)."""
    if not isinstance(v, DenseArray):
        return ()
    if v.start != 0:
        return None
    inner = {_numpy_shape(x) for x in v.items}
    if len(inner) != 1:
        return (0,) if not inner else None
    below = inner.pop()
    return None if below is None else (len(v.items), *below)


@settings(max_examples=min(60, settings().max_examples))
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(st.just(d), _arrays(d))))
@example((2, DenseArray((DenseArray((1.0, 2.0), 0), DenseArray((3.0,), 0)), 0)))
@example((1, DenseArray((0.5,), 1)))
def test_an_array_result_is_a_numpy_array_exactly_where_numpy_can_hold_it(
        case: tuple[int, DenseArray]) -> None:
    depth, x = case
    t = "real"
    for _ in range(depth):
        t = f"{{dense_int -> {t}}}"
    got = _compiled(f"X : {t}\nX", None, False, "auto", {})(X=x)
    shape = _numpy_shape(x)
    if shape is None:
        assert values_equal(got, x), (got, x)
        return
    assert isinstance(got, np.ndarray) and got.size == int(np.prod(shape))
    if got.size:
        assert got.shape == shape and np.array_equal(got, to_numpy(x)), (got, x)


SQUARES = "A : {int -> {int -> real}}\nsum(<i, r> in A) sum(<j, a> in r) a * a"


@settings(max_examples=min(30, settings().max_examples))
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2),
                          st.integers(-4, 4).filter(bool).map(lambda k: k / 2)),
                min_size=1, max_size=5, unique_by=lambda e: e[:2]),
       st.integers(0, 4), st.sampled_from(["csr", "coo", None]))
def test_csr_arrays_with_an_entry_given_twice_are_read_as_their_sum(
        entries: list[tuple[int, int, float]], twice: int, fmt: str | None) -> None:
    """The sum of squares: halves squared add up to half the square."""
    i, j, x = entries[twice % len(entries)]
    rows, cols, vals = zip(*entries, strict=True)
    coo = sp.coo_array((np.array([*vals, x / 2]), (np.array([*rows, i]), np.array([*cols, j]))),
                       shape=(3, 3))
    coo.data[twice % len(entries)] = x / 2
    order = np.argsort(coo.row, kind="stable")
    indptr = np.searchsorted(coo.row[order], np.arange(4))
    a = sp.csr_array((coo.data[order], coo.col[order], indptr), shape=(3, 3))
    assert not a.has_canonical_format
    got = _compiled(SQUARES, None, False, "auto", {"formats": {"A": fmt} if fmt else None})(A=a)
    assert got == sum(v * v for _, _, v in entries)


@settings(max_examples=EXAMPLES)
@given(kernel_data(), st.data())
def test_each_input_is_stored_in_the_format_asked_for(
        case: tuple[str, dict[str, Any], dict[str, Input], bool], data: st.DataObject) -> None:
    """Law 11 (formats: docs/reference/cpp.md)."""
    kernel, given_data, _, _ = case
    k, x = KERNELS[kernel], KERNELS[kernel].sparse
    *decls, body = k.source.splitlines()
    admitted = formats_for(next(d.type for d in parse_program(k.source).decls if d.name == x))
    given, declared = (data.draw(st.sampled_from([None, *admitted])) for _ in range(2))
    lines = [f"{d} @ {declared}" if declared and d.startswith(f"{x} :") else d for d in decls]
    compiled = sdqlite.compile("\n".join([*lines, body]),
                               formats={x: given} if given else None, optimize=False)
    a: Any = given_data[x]
    default = ("csr" if len(given_data[x].shape) == 2 else "coo") if sp.issparse(a) else (
        "dense" if isinstance(a, np.ndarray) else "dict")
    args = compiled.read(given_data)
    try:
        spec = compiled.specialized(args)
    except SDQLTypeError:  # the data's own format cannot store this input's type
        assert not (given or declared) and default not in admitted, default
        return
    assert spec.formats[x] == resolve(given or declared or default, args[x].type)
    assert spec.native is None and spec.build_seconds == 0.0  # not built yet
    planned = compiled.plan(args, compiled.check_sizes(args))[1]
    assert compiled.cpp(given_data) == planned.source  # the C++ shown is the C++ these data get
    assert planned.native is None  # shown, not built
    # a flat array is read in place at its own width: scipy's 32-bit indices stay so
    inputs = compiled.buffers(planned, args)
    assert {x: b[0].dtype.name for (x, _), b in zip(planned.kernel.inputs, inputs, strict=True)
            if x in planned.kernel.flat} == {
        x: {"double": "float64", "sdql::i64": "int64", "std::int32_t": "int32"}[e]
        for x, e in planned.kernel.flat.items()}


@settings(max_examples=min(30, settings().max_examples))
@given(kernel_data(), st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.data())
def test_a_compiled_program_goes_through_what_it_is_asked_for(
        case: tuple[str, dict[str, Any], dict[str, Input], bool], differentiate: bool,
        optimize: bool, normalize: bool, dense_destination: bool, data: st.DataObject) -> None:
    """Law 12."""
    kernel, given_data, _, declared = case
    k = KERNELS[kernel]
    admitted = formats_for(next(d.type for d in parse_program(k.source).decls
                                if d.name == k.sparse))
    fmt = data.draw(st.sampled_from(admitted))
    source = k.source if declared else k.source.splitlines()[-1]  # else typed by the data
    compiled = sdqlite.compile(source, wrt=k.wrt if differentiate else None,
                               formats={k.sparse: fmt}, optimize=optimize, normalize=normalize,
                               destination="dense" if dense_destination else "dict")
    start = time.perf_counter()
    try:
        spec = compiled.specialized(compiled.read(given_data))
    except (DataError, SDQLTypeError):  # undeclared: the data tell no type (an empty
        assert not declared  # dictionary), or one the format does not store (numpy data)
        return
    took = time.perf_counter() - start
    names = [s.name for s in spec.stages]
    normalized = ["multiplication normalization"] if normalize else []
    if not optimize:
        assert names == ["input", "storage composition", *normalized], names
    else:
        assert names[:2] == ["input", "saturation (pre-differentiation)"], names
        assert any(n.startswith("AD ") for n in names) == differentiate, names
        assert ("multiplication normalization" in names) == normalize, names
    assert all(0.0 <= s.seconds <= took for s in spec.stages), spec.stages
    # the inputs read where their formats are composed in (or by the end, if nowhere)
    at = names.index("storage composition") - 1 if "storage composition" in names else -1
    read = free_vars(spec.stages[at].program)
    for x, f in spec.formats.items():
        if f.identity or x not in read:
            assert x not in spec.flat, x
        else:
            assert set(spec.flat[x]) == {p for p, _ in f.params}, (x, spec.flat.get(x))
    # the program compiled is the last stage's: the kernel reads what it reads
    assert set(dict(spec.kernel.inputs)) == free_vars(spec.program), (
        spec.kernel.inputs, spec.program)
    t = spec.result
    assert (spec.kernel.dest != "value") == (
        dense_destination and isinstance(t, DictT) and not t.dense
        and spec.sizes[0] not in (None, NO_KEYS)), (t, spec.sizes)
    # written in place into numpy's memory: reals in arrays of known sizes, a real vector
    # always (a matrix too where every write fills its rows: test below)
    if spec.kernel.dest == "dense":
        assert scalar_of(t) == REAL and all(
            s not in (None, NO_KEYS) for s in spec.sizes[:len(D.layers(t))]), (t, spec.sizes)
    if spec.kernel.dest != "value" and isinstance(t, DictT) and t.val == REAL:
        assert spec.kernel.dest == "dense", t


def test_a_real_matrix_every_write_fills_is_written_in_place() -> None:
    """The case law 12 once got wrong (it said only a real vector goes in place): SMMM's
    gradient, an n x 16 real matrix whose every write fills a row of B's width, from a
    matrix A given as empty numpy data in ``dict``."""
    k = KERNELS["SMMM"]
    given = {"A": np.zeros((0, 0)), "B": np.zeros((0, P))}
    compiled = sdqlite.compile(k.source, wrt=k.wrt, formats={"A": "dict"})
    spec = compiled.specialized(compiled.read(given))
    assert spec.kernel.dest == "dense" and not D.layers(spec.result)[1].dense
    assert compiled(**given).shape == (0, P)


@pytest.mark.parametrize("data", [np.array([1.0, 0.0, 2.0]), sp.coo_array(np.array([1.0, 0.0])),
                                  sp.csr_array(np.array([[0.0, 1.0], [2.0, 0.0]]))])
def test_the_shape_of_numpy_or_scipy_data_fixes_the_size_of_a_result(data: Any) -> None:
    """Law 2: an undeclared program whose result's layers are its input's comes back as
    numpy or scipy data of the input's shape (the shape fixes the sizes); an SDQLite
    value fixes none (docs/reference/cpp.md: declared sizes, or numpy and scipy shapes)."""
    assert _compiled("x * 2.0", None, False, "auto", {})(x={0: 1.0, 3: 2.0}) == {0: 2.0, 3: 4.0}
    ints: Any = _compiled("x + x", None, False, "auto", {})(x=np.array([1, 2]))  # typed int
    assert ints.dtype.kind == "i" and ints.tolist() == [2, 4]
    wide = sp.csr_array(np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]]))  # rows and columns
    flipped: Any = _compiled("sum(<i, r> in x) sum(<j, v> in r) {j -> {i -> v}}", None, False,
                             "auto", {})(x=wide)
    assert flipped.shape == (3, 2) and abs(flipped - wide.T).max() == 0
    got: Any = _compiled("x * 2.0", None, False, "auto", {})(x=data)
    # docs/reference/cpp.md: a numpy array for a real vector, a scipy.sparse.csr_array
    # for a real matrix
    assert isinstance(got, np.ndarray) if len(data.shape) == 1 else sp.issparse(got)
    assert got.shape == data.shape and abs(got - 2 * data).max() == 0


SHAPED = "A : {int[m] -> {int[n] -> real}}\nX : {dense_int[n] -> real}\n"
#: results and the output each gets by default (law 2): numpy or scipy of the shape the
#: sizes fix ("m", "n", 0 for a layer that holds no keys) for a real vector or matrix, a
#: Python number for a scalar, else the value (int entries, three layers, a size unknown)
OUTPUTS: dict[str, tuple[type, tuple[str | int, ...]]] = {
    "A * 2.0": (sp.csr_array, ("m", "n")),
    "sum(<i, r> in A) sum(<j, v> in r) {j -> {i -> v}}": (sp.csr_array, ("n", "m")),
    "A + A * -1.0": (sp.csr_array, ("m", "n")),  # every entry cancels: none stored
    "sum(<i, r> in A) {i -> zero[{int -> real}]}": (sp.csr_array, ("m", 0)),
    "zero[{int -> {int -> real}}]": (sp.csr_array, (0, 0)),
    "sum(<i, r> in A) {i -> sum(<j, v> in r) v * X(j)}": (np.ndarray, ("m",)),
    "sum(<i, r> in A) r": (np.ndarray, ("n",)),
    "X * 2.0": (np.ndarray, ("n",)),
    "sum(<j, v> in X) {j -> v + 1.0}": (np.ndarray, ("n",)),  # at X's zeros too
    "sum(<i, r> in A) sum(<j, v> in r) 1": (int, ()),
    "(sum(<i, r> in A) sum(<j, v> in r) 1) = 2": (bool, ()),
    "zero[{int -> real}]": (np.ndarray, (0,)),
    "sum(<i, r> in A) sum(<j, v> in r) v * X(j)": (float, ()),
    "sum(<i, r> in A) {i -> 1}": (dict, ()),
    "sum(<i, r> in A) sum(<j, v> in r) {i -> {j -> {i -> v}}}": (dict, ()),
    "sum(<i, r> in A) {i + 1 -> sum(<j, v> in r) v}": (dict, ()),
}


@pytest.mark.parametrize("body", sorted(OUTPUTS))  # each, not a sample that may miss one
@settings(max_examples=min(8, settings().max_examples))
@given(m=st.integers(0, 3), n=st.integers(0, 3), destination=st.sampled_from(["dense", "dict"]),
       optimize=st.booleans(), data=st.data())
def test_the_default_output_has_the_shape_the_sizes_fix(
        body: str, m: int, n: int, destination: str, optimize: bool, data: st.DataObject
        ) -> None:
    """Law 2: the default output of each result of ``OUTPUTS``, in either destination,
    optimized or not: numpy or scipy of the shape the sizes fix (m x n, n x m for the
    transpose, 0 for a layer that holds no keys) storing no zero, a Python number, or the
    value; its entries are the interpreter's."""
    a = sp.csr_array(np.array([[data.draw(st.sampled_from([0.0, 1.5, -2.0]))
                                for _ in range(n)] for _ in range(m)]).reshape(m, n))
    x = np.array([data.draw(st.sampled_from([0.0, 1.5])) for _ in range(n)])
    want = run(parse_program(SHAPED + body), {"A": Input(from_scipy(a)[0]),
                                              "X": Input(*from_numpy(x))}).value
    got: Any = _compiled(SHAPED + body, None, optimize, "auto",
                         {"destination": destination})(A=a, X=x)
    kind, dims = OUTPUTS[body]
    assert type(got) is kind, (type(got), kind)
    if kind in (np.ndarray, sp.csr_array):
        array: Any = got  # (mypy narrowed got to the object it compared with)
        sizes = {"m": m, "n": n, 0: 0}
        assert array.shape == tuple(sizes[d] for d in dims), (array.shape, dims)
        stored = array.data if kind is sp.csr_array else array[array != 0]
        assert 0 not in stored and len(stored) == np.count_nonzero(
            np.asarray(to_numpy(want, array.shape)))
    assert same_entries(got, want), (got, want)


@given(st.integers(1, 2).flatmap(lambda d: st.tuples(
    st.just(d), st.dictionaries(st.tuples(*[st.integers(-1, 3)] * d), st.sampled_from(
        [1.5, -2.0]), max_size=5), st.tuples(*[st.integers(0, 4)] * d))))
def test_sizes_that_do_not_bound_the_keys_give_the_value_not_a_wrong_array(
        case: tuple[int, dict[tuple[int, ...], float], tuple[int, ...]]) -> None:
    """Law 2, read back (``results.convert``): a real vector or matrix whose sizes hold every
    key (0 <= key < size) is the array of that shape; where a size claimed does not (a
    sizes analysis gone wrong, a negative key), it is the value, not an array that
    drops, wraps or misplaces an entry."""
    depth, entries, dims = case
    t: Any = REAL
    for _ in range(depth):
        t = DictT(t)
    value: Any = reduce(add, (nested(keys, x) for keys, x in entries.items()), {})
    names = [f"n{d}" for d in range(depth)]
    got = results.convert(D.encode(value, t), t, t, list(names),
                          dict(zip(names, dims, strict=True)), "auto")
    if all(0 <= k < n for keys in entries for k, n in zip(keys, dims, strict=True)):
        array: Any = got
        assert array.shape == dims and same_entries(array, value), (got, value)
    else:
        assert got == value, (got, value)


@pytest.mark.parametrize("destination", ["dense", "dict"])
def test_an_array_result_is_its_own_destination(destination: Destination) -> None:
    """Law 12: a result that is a dense array (its size known) gets no dense destination
    on top: it is an array already."""
    compiled = sdqlite.compile("x : {dense_int[n] -> real}\nx * 2.0", destination=destination)
    spec = compiled.specialized(compiled.read({"x": np.array([1.0, 2.0])}))
    assert isinstance(spec.result, DictT) and spec.result.dense and spec.sizes[0] == "n"
    assert spec.kernel.dest == "value"


def _of_its_signature(x: Any, draw: Draw) -> Any:
    """Data of ``x``'s signature whose entries differ: scaled, one of them not finite,
    a scipy matrix's entries in another order or one of its keys past its shape."""
    how = draw(st.sampled_from(["scaled", "not finite", "reordered", "past the shape"]))
    if isinstance(x, float):
        return x * 3 if how != "not finite" else math.nan
    if isinstance(x, np.ndarray) and x.ndim:
        y = x * 3
        if how == "not finite" and y.size and y.dtype.kind == "f":
            y.flat[0] = math.inf
        return y
    if not sp.issparse(x):
        return x
    m: Any = x
    if m.format not in ("csr", "csc", "coo"):
        return x
    m = m.copy()
    if how == "scaled" or m.nnz == 0:
        m.data *= 3
    elif how == "not finite" and m.dtype.kind == "f":
        m.data[0] = math.nan
    elif how == "reordered" and m.format == "coo":  # (the same entries)
        m = sp.coo_array((m.data[::-1], tuple(c[::-1] for c in m.coords)), shape=m.shape)
    elif how == "reordered":  # (the same keys, another order: in a row, or across rows)
        m.indices[:] = m.indices[::-1]
    elif m.format == "coo":
        m.coords[0][0] = m.shape[0]
    else:
        m.indices[0] = m.shape[1] if m.format == "csr" else m.shape[0]
    return m


def _outcome(f: Any, data: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "value", f(**data)
    except SDQLiteError as err:
        return type(err).__name__, str(err)


@settings(max_examples=min(25, settings().max_examples))
@given(kernel_data(), st.booleans(), st.data())
def test_a_call_through_a_door_is_a_call_without_one(
        case: tuple[str, dict[str, Any], dict[str, Input], bool], differentiate: bool,
        data: st.DataObject) -> None:
    kernel, given_data, _, declared = case
    k = KERNELS[kernel]
    source = k.source if declared else k.source.splitlines()[-1]
    wrt = k.wrt if differentiate else None
    seen = sdqlite.compile(source, wrt=wrt, output="value", optimize=False)  # (no saturation:
    # the door is the same whatever the kernel)
    if _outcome(seen, given_data)[0] != "value":
        return
    other = {x: _of_its_signature(v, data.draw) for x, v in given_data.items()}
    known = all(reading.signature(v) is not None for v in given_data.values())
    assert len(seen.doors) == known
    with patch.object(seen, "read", side_effect=AssertionError("read afresh")) \
            if known else patch.object(seen, "name", seen.name):
        got = _outcome(seen, other)
    want = _outcome(sdqlite.compile(source, wrt=wrt, output="value", optimize=False), other)
    assert got[0] == want[0], (got, want)
    if got[0] == "value":
        assert values_equal(got[1], want[1], rel_tol=0, abs_tol=0), (got, want)
    else:
        assert got[1] == want[1]


def test_data_laid_out_for_another_kernel_do_not_go_through_the_door() -> None:
    """CSR arrays of 64-bit row pointers and 32-bit columns are read as they are when
    canonical; out of order, scipy makes them canonical with 64-bit columns: the door's
    kernel (built for 32-bit ones) must not read them (law 15)."""
    f = sdqlite.compile(BATAX, wrt="X")

    def matrix(cols: list[int]) -> Any:
        m = sp.csr_array((np.array([1.0, 2.0, 3.0]), np.array(cols),
                          np.array([0, 2, 3], dtype=np.int64)), shape=(2, 3))
        m.indices = m.indices.astype(np.int32)  # (scipy's constructor makes them alike)
        return m

    x = np.array([1.0, -1.0, 0.5])
    for cols in ([0, 2, 1], [2, 0, 1]):
        a = matrix(cols)
        want = 0.9 * (a.T @ a).toarray()
        assert np.allclose(f(A=a, beta=0.9, X=x).toarray(), want, rtol=1e-15, atol=0)
    assert len(f.doors) == 1


def test_a_specialization_is_built_once_and_times_its_build() -> None:
    """Law 11: the first call builds (and says how long it took), the next reuses it."""
    compiled = sdqlite.compile("x : real\nx * x", name="built_once")
    start = time.perf_counter()
    assert compiled(x=3.0) == 9.0
    took = time.perf_counter() - start
    (spec,) = compiled.cache.values()
    native = spec.native
    assert native is not None and 0.0 < spec.build_seconds <= took
    assert compiled(x=2.0) == 4.0 and spec.native is native
    assert [id(s) for s in compiled.cache.values()] == [id(spec)]  # the same, not a new one


INT64 = 2**63


@settings(max_examples=min(20, settings().max_examples))
@given(st.one_of(st.sampled_from([INT64 - 1, INT64, -INT64, -INT64 - 1, 126, 2**40]),
                 st.integers(-(2**65), 2**65)))
def test_an_integer_constant_compiles_exactly_when_it_fits_in_64_bits(n: int) -> None:
    source = str(n)
    if -INT64 <= n < INT64:
        assert _compiled(source, None, False, "auto", {})() == n
        return
    with pytest.raises(CodegenError) as caught:
        sdqlite.compile(source)()  # built at the first call, for the data's formats
    assert "does not fit in 64 bits" in caught.value.message and caught.value.span


BATAX = KERNELS["BATAX"].source  # A : sparse matrix, beta : real, X : dense vector


#: what is wrong with the data (each is tried in every run: sampled, the rare ones went
#: untried at the mutation profile's size); "control" is nothing
BAD = ["missing", "extra", "complex", "inf", "ndim", "list", "bool", "bool-scalar", "zero",
       "scalar", "sparse-int", "control"]


@st.composite
def bad_data(draw: Draw, kind: str) -> tuple[str, dict[str, Any], str, str]:
    """BATAX's data with one thing wrong: (source, data, the input named, the message's
    start after the name where the message starts with it, else a fragment)."""
    n = draw(st.integers(1, 3))
    a: Any = sp.random(n, n, density=0.6, format="csr", random_state=draw(st.integers(0, 99)))
    data: dict[str, Any] = {"A": a, "beta": 0.5, "X": np.ones(n)}
    match kind:
        case "missing":
            name = draw(st.sampled_from(sorted(data)))
            del data[name]
            return BATAX, data, name, "no data for input"
        case "extra":
            data["zz"] = 1.0
            return BATAX, data, "zz", "zz: not an input of the program"
        case "complex":
            name = draw(st.sampled_from(["A", "X"]))
            data[name] = data[name].astype(np.complex128)
            return BATAX, data, name, "complex128"
        case "inf":
            name = draw(st.sampled_from(["A", "X", "beta"]))
            bad = draw(st.sampled_from([np.inf, -np.inf, np.nan]))
            if name == "A":
                a = a.copy()
                a.data = np.full_like(a.data, 1.0)
                if a.nnz:
                    a.data[0] = bad
                else:
                    a = sp.csr_array(np.full((n, n), bad))
                data["A"] = a
            elif name == "X":
                data["X"] = np.full(n, bad)
            else:
                data["beta"] = bad
            return BATAX, data, name, "finite"
        case "ndim":
            name = draw(st.sampled_from(["A", "X"]))
            data[name] = sp.coo_array(np.ones(n)) if name == "A" else np.ones((n, n))
            return BATAX, data, name, "declared"
        case "list":
            data["X"] = [1.0] * n
            return BATAX, data, "X", "cannot read data of Python type list"
        case "bool":
            data["X"] = np.ones(n, dtype=bool)
            return BATAX, data, "X", "bool"
        case "bool-scalar":  # an int is a real where a real is declared; a bool is not
            data["beta"] = draw(st.sampled_from([True, False, np.bool_(True)]))
            return BATAX, data, "beta", "declared real but its data is bool"
        case "zero":
            data["A"] = {0: {0: 1.0, 1: 0.0}}
            return BATAX, data, "A", "stores a zero at A(0)(1)"
        case "scalar":
            data["beta"] = np.ones(2)
            return BATAX, data, "beta", "declared real"
        case "sparse-int":  # numpy data are read as a sparse vector or matrix of reals only
            ints = "{int -> int}" if n < 3 else "{dense_int -> {int -> real}}"
            return f"V : {ints}\nV", {"V": np.ones((2,) * (1 + (n == 3)), dtype=np.int64)}, \
                "V", "declared"
    # the control: a matrix of any shape is data for a matrix input
    return "A : {int -> {int -> real}}\nA", {"A": sp.random(n, n + 1, density=0.5,
                                                             format="csr")}, "A", ""


@pytest.mark.parametrize("kind", BAD)
@settings(max_examples=min(10, settings().max_examples))
@given(st.data(), st.sampled_from(["csr", "coo", None]))
def test_bad_data_is_a_data_error_naming_the_input(kind: str, data_: st.DataObject,
                                                   fmt: str | None) -> None:
    source, data, name, fragment = data_.draw(bad_data(kind))
    compiled = sdqlite.compile(source, formats={"A": fmt} if fmt and "A" in source else None)
    if not fragment:  # the control: data of the right kind is read (and not built here)
        assert set(compiled.read(data)) == set(data)
        return
    with pytest.raises(DataError) as caught:
        compiled.read(data)
    message = caught.value.message
    assert name in message and fragment in message, (message, name, fragment)
    assert "internal" not in message


@given(st.sampled_from(["csr", "csc", "coo", "csr unsummed"]),
       st.sampled_from([np.float64, np.int64, np.float32]))
def test_a_scipy_matrix_is_laid_out_as_canonical_float_csr_arrays(fmt: str, dtype: Any) -> None:
    """Law 5: a scipy matrix is laid out in CSR as canonical float64 arrays holding its
    entries; they are the caller's arrays exactly when it is one already (no copy), and
    the caller's matrix is left as it was."""
    entries = np.array([[0, 2, 0], [2, 0, 3]], dtype=dtype)
    coo: Any = sp.coo_array(entries)
    given: Any = sp.csr_array(entries) if fmt.startswith("csr") else coo.asformat(fmt)
    if fmt == "csr unsummed":  # the entry (0, 1) given twice, in halves of it
        given = sp.csr_array((np.array([1, 1, 2, 3], dtype=dtype), np.array([1, 1, 0, 2]),
                              np.array([0, 2, 4])), shape=(2, 3))
    before = given.copy()
    compiled = _compiled(BATAX, None, False, "auto", {})
    read = compiled.read({"A": given, "beta": 1.0, "X": np.ones(3)})["A"]
    pos, idx, val = read.data.compressed("csr")
    csr = sp.csr_array((val, idx, pos), shape=(2, 3))
    assert val.dtype == np.float64 and csr.has_canonical_format
    assert np.array_equal(csr.toarray(), entries)
    as_is = fmt == "csr" and dtype == np.float64
    assert np.shares_memory(val, given.data) == as_is, (fmt, dtype)
    assert given.format == before.format and np.array_equal(given.data, before.data)


@pytest.mark.parametrize("fmt", ["csr", "csc", None])
def test_a_call_leaves_the_caller_s_matrix_as_it_was(fmt: str | None) -> None:
    """Law 5: a float CSR matrix is used without a copy, and a call leaves it as it was,
    explicit zeros and all (dropping them in place rewrote the caller's arrays), while
    the program sees no entry where it stores a zero."""
    a = sp.csr_array((np.array([1.0, 0.0, 3.0]), np.array([0, 1, 0]), np.array([0, 2, 3])),
                     shape=(2, 2))
    before = (a.indptr.copy(), a.indices.copy(), a.data.copy())
    options = {"formats": {"A": fmt} if fmt else None}
    assert _compiled(SQUARES, None, False, "auto", options)(A=a) == 1.0 + 9.0
    count = "A : {int -> {int -> real}}\nsum(<i, r> in A) sum(<j, a> in r) 1.0"
    assert _compiled(count, None, True, "auto", options)(A=a) == 2.0  # a zero is no entry
    assert all(np.array_equal(x, y) for x, y in zip((a.indptr, a.indices, a.data), before,
                                                    strict=True))


#: name= -> the generated function's name: letters, digits and _ kept, anything else _,
#: k_ before a name that does not start with a letter, kernel for none
KERNEL_NAMES = {"ok": "ok", "my kernel!": "my_kernel_", "": "kernel", "9lives": "k_9lives",
                "_x": "k__x"}


def test_compile_s_defaults_and_names() -> None:
    """The defaults docs/reference/cpp.md states (optimize, normalize, DPS on; the default output;
    a dense destination; the kernel named ``kernel``); a parsed program compiles as its
    text does; and ``name`` names the generated C++ function (a C++ identifier made of
    it), which is loaded and run under that name."""
    defaults = inspect.signature(api.compile).parameters  # (sdqlite.compile passes them on)
    assert {k: defaults[k].default for k in (
        "optimize", "normalize", "dps", "output", "name", "destination")} == {
        "optimize": True, "normalize": True, "dps": True, "output": "auto", "name": "kernel",
        "destination": "dense"}
    source = "x : real\nx * x"
    assert api.compile(parse_program(source)).cpp() == sdqlite.compile(source).cpp()
    for name, identifier in KERNEL_NAMES.items():
        assert f"static void sdql_kernel_{identifier}(" in sdqlite.compile(
            source, name=name).cpp(), name
    assert sdqlite.compile(source, name="my kernel!")(x=3.0) == 9.0


@given(st.integers(1, 4), st.integers(1, 4), st.sampled_from(["csr", "dict"]))
def test_data_that_break_a_declared_size_fail_at_the_declaration(
        m: int, n: int, fmt: str) -> None:
    """Law 5: BATAX's X of n positions and A's n + 1 columns both fix n: scipy's shape
    is read as scipy reads it (a dimension mismatch), a DataError at X's declaration
    (line 3) naming both; A as a dictionary (no shape) with a key n has a key outside
    int[n], at A's declaration (line 1)."""
    compiled = _compiled(BATAX, None, False, "auto", {"formats": {"A": fmt}})
    with pytest.raises(DataError) as caught:
        compiled(A=sp.csr_array(np.ones((m, n + 1))), beta=1.0, X=np.ones(n))
    assert caught.value.message == (f"input X has {n} positions but n = {n + 1} (from the "
                                    "shape of A(*))")
    assert caught.value.span is not None and caught.value.span.line == 3, caught.value.span
    with pytest.raises(DataError) as caught:
        compiled(A={i: {n: 1.0} for i in range(m)}, beta=1.0, X=np.ones(n))
    assert "outside int[n]" in caught.value.message and caught.value.span is not None
    assert caught.value.span.line == 1, caught.value.span


def test_numpy_and_scipy_data_are_size_checked_once_per_shape() -> None:
    """Their shapes fix every size of theirs and their keys lie below them, so a compiled
    kernel checks sizes once per inputs' types, kinds and shapes (counted: the layers'
    facts are read on the first call of each; a number has none): a call with a shape
    that breaks a size
    after a good one is still refused, and the good shape is not checked again."""
    compiled = _compiled(BATAX, None, False, "auto", {})
    read: list[str] = []
    facts = reading.layer_facts

    def counted(a: Any) -> Any:
        read.append(a.name)
        return facts(a)

    a: Any = sp.random(5, 4, density=0.5, format="csr", random_state=1)
    x = np.arange(4.0)
    with patch.object(reading, "layer_facts", counted):
        first = compiled(A=a, beta=2.0, X=x)
        assert sorted(read) == ["A", "X", "beta"]
        assert compiled(A=a * 3, beta=1.0, X=x + 1) == pytest.approx(
            (a * 3).T @ ((a * 3) @ (x + 1)))
        assert compiled(A=a, beta=2.0, X=x) == pytest.approx(first)
        assert len(read) == 3
        with pytest.raises(DataError, match=r"input X has 3 positions but n = 4"):
            compiled(A=a, beta=2.0, X=x[:3])
        assert len(read) == 6
        compiled(A=a, beta=2.0, X=x)
        assert len(read) == 6
    good, bad = {0: {3: 1.0}}, {0: {4: 1.0}}  # a dictionary's keys are checked every call
    compiled(A=good, beta=2.0, X=x)
    with pytest.raises(DataError, match=r"input A\(0\) has key 4 outside int\[n\]"):
        compiled(A=bad, beta=2.0, X=x)


ROWS_SIZED = ("A : {int[m] -> {int -> real}}\ny : {dense_int[m] -> real}\n"
              "sum(<i, r> in A) sum(<j, a> in r) a * y(i)")


@given(st.integers(1, 4), st.integers(0, 2), st.sampled_from(["csr", "csc", "coo"]))
@example(1, 0, "coo").via("the rows' key range read from the coo check's facts")
def test_a_row_key_that_breaks_a_declared_size_fails_at_the_declaration(
        m: int, past: int, fmt: str) -> None:
    """Law 5 for the rows (the test above breaks the columns' size): y's m positions
    fix m, and so does the shape of a scipy matrix in any of its own formats: one of
    m + past + 1 rows is a DataError at y's declaration naming both; the same entries as
    a dictionary, in row m + past, have a key outside int[m] (the rows' keys come from
    the format's check: the outer keys of csr and coo, the inner ones of csc); without
    it, y A 1 (numpy)."""
    rows = m + past + 1
    dense = np.zeros((rows, 2))
    dense[0, 1], dense[m + past, 0] = 1.5, 2.0
    y = np.arange(1.0, m + 1.0)
    f = _compiled(ROWS_SIZED, None, False, "auto", {})
    taller: Any = sp.coo_array(dense)
    with pytest.raises(DataError) as caught:
        f(A=taller.asformat(fmt), y=y)
    assert caught.value.message == (
        f"input y has {m} positions but m = {rows} (from the shape of A)")
    assert caught.value.span is not None and caught.value.span.line == 2
    with pytest.raises(DataError) as caught:
        f(A={i: {j: v for j, v in enumerate(row) if v} for i, row in enumerate(dense)
             if row.any()}, y=y)
    assert caught.value.message == (
        f"input A has key {m + past} outside int[m] (m = {m}, from y)")
    assert caught.value.span is not None and caught.value.span.line == 1
    dense[m + past, 0] = 0.0
    within: Any = sp.coo_array(dense[:m])
    assert f(A=within.asformat(fmt), y=y) == pytest.approx(float(y @ dense[:m] @ np.ones(2)))


@settings(max_examples=min(30, settings().max_examples))
@given(st.integers(1, 3), st.integers(0, 2), st.integers(0, 2),
       st.sampled_from(["csr", "csc", "coo_matrix", "dense_matrix", "dict"]),
       st.sampled_from(["dense", "dict"]), st.booleans(), st.data())
def test_a_shape_other_than_a_size_is_refused_and_one_equal_to_it_agrees(
        n: int, taller: int, wider: int, fmt: str, destination: str, optimize: bool,
        data: st.DataObject) -> None:
    """Law 5: a scipy matrix whose shape differs from the size another input fixes (X's
    n positions) is a DataError naming both, even with no entry beyond it, as scipy's
    A @ X is (it was read as the entries within the size: issue 27); of the size's
    shape, with a stored zero too, the result is the interpreter's in every format and
    destination, as it is for rows beyond X's size where A alone fixes their size (m)."""
    entries = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1),
                                           st.sampled_from([1.0, -2.5])), max_size=4))
    zero = data.draw(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)))
    rows, cols, vals = [[*e] for e in zip(*entries, strict=True)] or [[], [], []]
    if zero not in [(i, j) for i, j, _ in entries]:
        rows, cols, vals = [*rows, zero[0]], [*cols, zero[1]], [*vals, 0.0]
    a = sp.csr_array((vals, (rows, cols)), shape=(n, n))
    assert 0.0 in a.data or zero in [(i, j) for i, j, _ in entries]  # stored, not dropped
    larger = sp.csr_array((vals, (rows, cols)), shape=(n + taller, n + wider))
    x_data = np.arange(1.0, n + 1)
    for source in (KERNELS["SMVM"].source,
                   "A : {int[n] -> {int[n] -> real}}\nX : {dense_int[n] -> real}\n"
                   "sum(<i, r> in A) {i -> sum(<j, v> in r) v * X(j)}"):
        f = _compiled(source, None, optimize, "value",
                      {"formats": {"A": fmt}, "destination": destination})
        want = run(parse_program(source), {"A": Input(from_scipy(a)[0]), "X": Input(
            *from_numpy(x_data))}).value
        assert values_equal(f(A=a, X=x_data), want)
        square = source.startswith("A : {int[n] -> {int[n]")  # (SMVM's rows are int[m])
        if wider or (taller and square):
            with pytest.raises(DataError, match=r"the shape of A"):
                f(A=larger, X=x_data)
        else:  # rows of m, fixed by A alone
            want = run(parse_program(source), {"A": Input(from_scipy(larger)[0]), "X": Input(
                *from_numpy(x_data))}).value
            assert values_equal(f(A=larger, X=x_data), want)


SCALARS = "n : int\nx : real\nif n = 2 then x"


@given(st.integers(-3, 3), st.one_of(st.integers(-3, 3), st.floats(-3, 3)),
       st.sampled_from(["n", "x"]), st.sampled_from([True, np.bool_(False), {0: 1.0}, 1.5]))
def test_python_scalars_are_read_as_their_declared_type(n: int, x: float, name: str,
                                                        bad: Any) -> None:
    """An int where a real is declared is that real; an int where an int is declared
    stays one; a bool, a dictionary, or a real where an int is declared, is a DataError
    naming the input (law 5)."""
    compiled = _compiled(SCALARS, None, False, "auto", {})
    args = compiled.read({"n": n, "x": x})
    assert (type(args["n"].data), args["n"].data) == (int, n)
    assert (type(args["x"].data), args["x"].data) == (float, x)
    assert compiled(n=n, x=x) == (x if n == 2 else 0.0)
    if name == "x" and bad == 1.5:
        return  # a real is a real
    with pytest.raises(DataError, match=f"input {name} is declared"):
        compiled.read({"n": n, "x": x, name: bad})


DENSE_INPUTS = "r : {dense_int -> real}\nn : {dense_int -> int}\nb : {dense_int -> bool}\n" \
    "sum(<i, v> in n) if b(i) then r(i)"
#: which numpy dtypes are data for a dense layer of which scalar (law 5; bool arrays are
#: no data at all): an int array is ints or reals, a float array reals only
NUMPY_DATA = {"r": "iuf", "n": "iu", "b": ""}


@given(st.sampled_from(["int64", "int32", "uint8", "float64", "float32"]),
       st.sampled_from(sorted(NUMPY_DATA)))
def test_a_numpy_array_is_data_for_the_dense_scalars_its_dtype_holds(dtype: str,
                                                                    name: str) -> None:
    compiled = _compiled(DENSE_INPUTS, None, False, "auto", {})
    good = {"r": np.ones(2), "n": np.ones(2, dtype=np.int64), "b": dense([True, False])}
    data = {**good, name: np.array([1, 0], dtype=dtype)}
    if np.dtype(dtype).kind in NUMPY_DATA[name]:
        assert compiled.read(data)[name].type == compiled.read(good)[name].type
        return
    with pytest.raises(DataError, match=f"input {name}"):
        compiled.read(data)


SIZED = "x : {dense_int[n] -> real}\nV : {int[n] -> real}\nsum(<i, v> in V) x(i) * v"


@given(st.lists(st.sampled_from([0.0, 1.0, -2.5]), min_size=1, max_size=6),
       st.integers(1, 4), st.sampled_from(["numpy", "scipy", "dict"]))
def test_an_array_given_for_sparse_keys_of_a_size_has_its_length(
        v: list[float], n: int, kind: str) -> None:
    """A numpy array or a scipy vector given for an input declared sparse with keys of
    the size x fixes must have that length (as numpy's x * V must), a DataError naming
    both otherwise; a dictionary (no length) is its entries, and a key past the size is
    a DataError naming the input and the key (law 5)."""
    compiled = _compiled(SIZED, None, False, "auto", {})
    x = np.arange(1.0, n + 1)
    data: Any = np.array(v) if kind == "numpy" else sp.coo_array(np.array(v)) \
        if kind == "scipy" else {k: a for k, a in enumerate(v) if a}
    past = [k for k, a in enumerate(v) if a and k >= n]
    if kind != "dict" and len(v) != n:
        with pytest.raises(DataError) as e:
            compiled(x=x, V=data)
        assert e.value.message in (f"input x has {n} positions but n = {len(v)} (from the "
                                   "shape of V)"), e.value.message
    elif past:
        with pytest.raises(DataError) as e:
            compiled(x=x, V=data)
        named = re.fullmatch(r"input V has key (\d+) outside int\[n\] .*", e.value.message)
        assert named is not None and int(named.group(1)) in past, e.value.message
    else:
        assert compiled(x=x, V=data) == sum(x[k] * a for k, a in enumerate(v) if a)


@given(st.sampled_from(["A", "X", "nope", "beta2"]),
       st.sampled_from(["csr", "csc", "dense", "coo", "dict", "no-such-format"]))
def test_a_format_is_for_an_input_that_can_be_stored_in_it(name: str, fmt: str) -> None:
    """``compile`` takes exactly the formats the storage table admits for an input's
    declared type (``formats_for``), and none for a name that is no input."""
    try:
        sdqlite.compile(BATAX, formats={name: fmt})
    except SDQLiteError as err:
        assert name in err.message
        refused = True
    else:
        refused = False
    decls = {d.name: d.type for d in parse_program(BATAX).decls}
    storable = set(formats_for(decls[name])) if name in decls else set()
    assert refused == (fmt not in storable), (name, fmt)


@given(st.sampled_from(["ok", "ill-typed", "int-gradient", "unused-gradient", "undeclared",
                        "no-expression"]),
       st.booleans())
def test_a_declared_program_is_checked_when_it_is_compiled(kind: str, formats: bool) -> None:
    fmt = {"A": "coo"} if formats else None
    match kind:
        case "ok":
            compiled = sdqlite.compile(BATAX, "X", fmt)
            assert set(compiled.declared()) == {"A", "beta", "X"}
        case "ill-typed":
            with pytest.raises(SDQLTypeError):
                sdqlite.compile(BATAX.replace("beta * v1", "beta + r"), None, fmt)
        case "int-gradient":
            with pytest.raises(DiffError, match="respect to n : int: it is discrete"):
                sdqlite.compile("n : int\nA : {int -> {int -> real}}\n"
                                "sum(<i, r> in A) r(n)", "n", fmt)
        case "unused-gradient":  # the gradient w.r.t. an input not read is zero, yet
            compiled = sdqlite.compile(BATAX.replace("* X(k)", ""), "X", fmt)  # needs X
            assert set(compiled.declared()) == {"A", "beta", "X"}
            with pytest.raises(DataError, match="no data for input X"):
                compiled.read({"A": sp.csr_array(np.eye(2)), "beta": 1.0})
        case "undeclared":  # typed by the data at the call: nothing to check yet
            compiled = sdqlite.compile("sum(<i, r> in A) sum(<j, a> in r) a * s", None, fmt)
            with pytest.raises(SDQLTypeError, match="declare the input"):
                compiled.declared()
            assert set(compiled.read({"A": sp.csr_array(np.eye(2)), "s": 2.0})) == {"A", "s"}
        case _:
            with pytest.raises(SDQLTypeError, match="no expression"):
                sdqlite.compile("x : real\n", None, None)


@settings(max_examples=min(10, settings().max_examples))
@given(st.sampled_from(sorted(KERNELS)), st.integers(0, 3), st.integers(1, 400))
@example("BATAX", 0, 400).via("no iteration at all")
def test_compile_keeps_to_the_limits_it_is_given(kernel: str, iters: int, nodes: int) -> None:
    k = KERNELS[kernel]
    compiled = sdqlite.compile(k.source, k.wrt, limits=Limits(iter_limit=iters,
                                                              node_limit=nodes))
    spec = compiled.specialized(compiled.declared())
    reports = [st_.report for st_ in spec.stages if st_.name.startswith("saturation")]
    assert reports
    assert all(r["iterations"] <= iters for r in reports)  # type: ignore[operator]


CLASHING = """double : real
class : {int -> real}
result : real
_t : real
__LINE__ : real
x' : real
x_d : real
sum(<new, auto> in class) auto * double + result * x' + _t * x_d + __LINE__"""


@given(st.sampled_from([0.5, -2.0]), st.sampled_from([1.5, 3.0]))
def test_names_cpp_reserves_or_that_clash_are_renamed(x: float, y: float) -> None:
    data = {"double": x, "class": {0: 1.0, 2: y}, "result": y, "_t": 0.25, "__LINE__": y,
            "x'": x, "x_d": y}
    want = run(parse_program(CLASHING), {n: Input(v) for n, v in data.items()}).value
    assert _compiled(CLASHING, None, False, "value", {})(**data) == pytest.approx(want)


@given(st.integers(-2**62, 2**62), st.integers(-2**62, 2**62), st.integers(-2**62, 2**62),
       st.booleans())
@example(0, 10**12, 2, False).via("a range of 10^12 positions, not built")
def test_an_entry_of_a_range_is_read_without_building_it(lo: int, hi: int, k: int,
                                                          optimize: bool) -> None:
    program = _compiled("lo : int\nhi : int\nk : int\n(lo:hi)(k)", None, optimize, "auto",
                        {})
    assert program(lo=lo, hi=hi, k=k) == (k if lo <= k < hi else 0)


#: names that C, C++ or the generated code itself hold: macros of the C library (lowercase
#: and in capitals), keywords, the entry point's and the runtime's names
HAZARDS = ["errno", "stdin", "stdout", "stderr", "assert", "offsetof", "sa_handler", "EOF",
           "NULL", "INFINITY", "NAN", "SIGINT", "DOMAIN", "M_PI", "int", "double", "class",
           "new", "main", "std", "sdql", "sdql_ops", "result", "data", "lens", "next", "st",
           "out", "size", "k", "v", "_t", "x'", "x_d"]


@settings(max_examples=min(20, settings().max_examples))
@given(st.lists(st.sampled_from(HAZARDS), min_size=3, max_size=3, unique=True),
       st.sampled_from(HAZARDS), st.sampled_from([1.5, -2.0, 0.25]),
       st.sampled_from([3.0, -0.5]))
@example(["errno", "stdin", "main"], "stdin", 1.5, 2.0).via("the issue's names")
def test_generated_identifiers_never_collide_with_c_or_cpp(
        names: list[str], kernel: str, x: float, y: float) -> None:
    """Law 10: inputs, binders and the kernel named like C's macros, C++'s keywords or
    the generated code's own names compile, and give the interpreter's value."""
    a, b, c = names
    source = (f"{a} : real\n{b} : {{int -> real}}\n"
              f"sum(<{c}, w> in {b}) w * {a} + let {c} = {a} * {a} in {c}")
    try:
        program = parse_program(source)
    except SDQLiteError:  # a keyword of SDQLite (int): not a name the language has
        return
    data = {a: x, b: {0: y, 3: x}}
    want = run(program, {n: Input(v) for n, v in data.items()}).value
    got = sdqlite.compile(source, name=kernel, output="value")(**data)
    assert got == pytest.approx(want)


def test_the_reserved_names_cover_the_compilers_macros() -> None:
    """Every macro the runtime's headers define (``g++ -dM -E``) is a reserved name: a
    variable spelt so is renamed (``reserved``), so the preprocessor never rewrites one."""
    done = subprocess.run(["g++", "-std=c++17", "-x", "c++", "-dM", "-E", "-I",
                           str(Path(emit.__file__).parent), "-"],
                          input=f'#include "{emit.RUNTIME}"\n', capture_output=True, text=True)
    macros = {line.split()[1].split("(")[0] for line in done.stdout.splitlines()
              if line.startswith("#define ")}
    assert len(macros) > 100, done.stderr
    user_like = {m for m in macros if not m.startswith("_")}
    assert all(emit.reserved(m) for m in user_like), sorted(
        m for m in user_like if not emit.reserved(m))

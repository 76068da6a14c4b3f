"""``sdqlite.compile`` agrees with the interpreter, through the front door users call (the
fourth property, §6 code generation, end to end).

For the paper's six kernels of §7 (``benchmarks.kernels``: BATAX, SMMM, SMVM, VVA, VVD,
VSM), their value and their gradient, optimized or not, each sparse input stored in a
format its type admits, and data generated and handed over as a user would — scipy
sparse arrays in csr, csc or coo (float or integer, with explicit zeros, entries out of
order), numpy arrays, or SDQLite values — ``compile(source, wrt, formats)(**data)``:

1. with ``output="value"`` is the interpreter's value of the program (``semantics.run``)
   on the same data, to 1e-9;
2. with the default output (numpy, scipy or a number) holds the same entries.

Where ``test_cpp_agreement.py`` checks the generated C++ on generated programs, this
checks what ``codegen/api.py`` adds: reading and checking the inputs, choosing their
formats, laying out their buffers, specializing and caching, and reading results back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sdqlite
from benchmarks.kernels import KERNELS, P
from codegen.api import Compiled
from properties.generators import Draw
from sdqlite.parser import parse_program
from sdqlite.storage import formats_for
from semantics.convert import to_numpy
from semantics.run import Input, run
from semantics.values import Value, dense, values_equal

#: a build for each kernel, wrt, format and option met: few examples, each cheap once built
EXAMPLES = min(60, settings().max_examples)


@pytest.fixture(scope="module", autouse=True)
def quick_builds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Unoptimized builds in a private cache (unless the flags or the cache are given:
    ``make mutation`` gives one cache to all its runs)."""
    saved = {k: os.environ.get(k) for k in ("SDQLITE_CXXFLAGS", "SDQLITE_CACHE")}
    os.environ.setdefault("SDQLITE_CXXFLAGS", "-O0")
    os.environ.setdefault("SDQLITE_CACHE", str(tmp_path_factory.mktemp("cpp-cache")))
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


_COMPILED: dict[tuple[Any, ...], Compiled] = {}


def _compiled(kernel: str, wrt: str | None, formats: dict[str, str], optimize: bool,
              output: str) -> Compiled:
    key = (kernel, wrt, tuple(sorted(formats.items())), optimize, output)
    if key not in _COMPILED:
        _COMPILED[key] = sdqlite.compile(KERNELS[kernel].source, wrt=wrt, formats=formats,
                                         optimize=optimize, output=output)
    return _COMPILED[key]


@st.composite
def kernel_data(draw: Draw) -> tuple[str, dict[str, Any], dict[str, Value]]:
    """A kernel, its inputs as a user hands them over, and the same as SDQLite values."""
    kernel = draw(st.sampled_from(sorted(KERNELS)))
    m, n = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    halves = st.integers(-4, 4).map(lambda k: k / 2)  # exact in binary: sums agree

    def dense_matrix(rows: int, cols: int) -> Any:
        return np.array([[draw(halves) for _ in range(cols)] for _ in range(rows)],
                        dtype=np.float64).reshape(rows, cols)

    def sparse(a: Any) -> tuple[Any, Value]:
        """A sparse input from a dense array: scipy, numpy or a value (its nonzeros)."""
        value: Value = ({int(i): float(x) for i, x in enumerate(a) if x} if a.ndim == 1 else
                        {int(i): {int(j): float(x) for j, x in enumerate(row) if x}
                         for i, row in enumerate(a) if row.any()})
        how = draw(st.sampled_from(["scipy", "numpy", "value"]))
        if how == "value":
            return value, value
        if how == "numpy":
            return a.copy(), value
        integral = bool(np.all(a == np.round(a))) and draw(st.booleans())
        stored = a.astype(np.int64) if integral else a
        if a.ndim == 1:
            return sp.coo_array(stored), value
        m = sp.coo_array(stored)
        if draw(st.booleans()) and m.nnz:  # an explicit zero, entries out of order
            rows, cols = np.append(m.row, m.row[0]), np.append(m.col, m.col[0])
            data = np.append(m.data, 0)
            order = np.arange(len(data))[::-1]
            m = sp.coo_array((data[order], (rows[order], cols[order])), shape=m.shape)
        return m.asformat(draw(st.sampled_from(["csr", "csc", "coo"]))), value

    def dense_vector(k: int) -> tuple[Any, Value]:
        a = dense_matrix(1, k).reshape(k)
        return (a, dense([float(x) for x in a])) if draw(st.booleans()) else (
            dense([float(x) for x in a]), dense([float(x) for x in a]))

    data: dict[str, tuple[Any, Value]] = {}
    match kernel:
        case "BATAX":
            data = {"A": sparse(dense_matrix(m, n)), "beta": (draw(halves),) * 2,
                    "X": dense_vector(n)}
        case "SMMM":
            b = dense_matrix(n, P)
            data = {"A": sparse(dense_matrix(m, n)),
                    "B": (b, dense([dense([float(x) for x in row]) for row in b]))}
        case "SMVM":
            data = {"A": sparse(dense_matrix(m, n)), "X": dense_vector(n)}
        case "VVA" | "VVD":
            data = {"V1": dense_vector(n), "V2": sparse(dense_matrix(1, n).reshape(n))}
        case _:
            data = {"s": (draw(halves),) * 2, "V": sparse(dense_matrix(1, n).reshape(n))}
    return kernel, {x: d for x, (d, _) in data.items()}, {x: v for x, (_, v) in data.items()}


def _entries(x: Any) -> Any:
    """A result as a dense numpy array (a number as itself)."""
    if sp.issparse(x):
        matrix: Any = x  # (issparse narrows to a class without toarray for mypy)
        return matrix.toarray()
    return np.asarray(x, dtype=np.float64)


@settings(max_examples=EXAMPLES)
@given(kernel_data(), st.booleans(), st.booleans(), st.data())
def test_compile_agrees_with_the_interpreter(case: tuple[str, dict[str, Any], dict[str, Value]],
                                             differentiate: bool, optimize: bool,
                                             data: st.DataObject) -> None:
    kernel, given_data, values = case
    k = KERNELS[kernel]
    wrt = k.wrt if differentiate else None
    program = parse_program(k.source)
    decls = {d.name: d.type for d in program.decls}
    formats = {k.sparse: data.draw(st.sampled_from(formats_for(decls[k.sparse])))}
    *decl_lines, body = k.source.splitlines()
    text = "\n".join([*decl_lines, f"gradient ({body}) {wrt}" if wrt else body])
    want = run(parse_program(text), {x: Input(v, decls[x]) for x, v in values.items()}).value
    got = _compiled(kernel, wrt, formats, optimize, "value")(**given_data)
    assert values_equal(got, want, rel_tol=1e-9, abs_tol=1e-12), (got, want)
    auto = _entries(_compiled(kernel, wrt, formats, optimize, "auto")(**given_data))
    assert np.allclose(auto, to_numpy(want, auto.shape) if auto.ndim else want,
                       rtol=1e-9, atol=1e-12)

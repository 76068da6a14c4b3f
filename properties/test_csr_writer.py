"""The CSR writer is the CSR it writes (``sdql::csr_writer``, codegen/sdqlite_runtime.h):
for any sequence of updates ``result[k][j] += v`` with rows k in order (each row once,
or not at all), keys j anywhere (repeated, descending, negative, past 2^22 where a row
is no longer added up in a table, past the arrays' first capacity), values zero or not,
the arrays a kernel hands back through the writer — its cursors copied, a clean row
appended in place, everything else through ``csr::add`` — are those ``csr::add`` writes
alone, bit for bit, with 32-bit and 64-bit keys, of reals and of integers (whose sums
are checked); and an update of a row outside the result (of none, too: n = 0), or of a
row before the current one, fails as it does there.
"""

from __future__ import annotations

from functools import cache
from itertools import pairwise

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from codegen import build as B
from codegen import native as N
from codegen.emit import Kernel, translation_unit
from properties.generators import Draw
from sdqlite.errors import CodegenError, EvalError
from sdqlite.syntax.types import INT, REAL, DictT

Updates = list[tuple[int, int, float]]


def _kernel(name: str, keys: str, through_writer: bool, value: str) -> Kernel:
    csr = f"sdql::csr<{value}{keys}>"
    write = ("{ auto w = sdql::writer(result);\n"
             "      for (sdql::i64 e = 0; e < K.n; e++) w[K.at(e)][J.at(e)] += V.at(e);\n"
             "      sdql::prune(w); }") if through_writer else (
             "for (sdql::i64 e = 0; e < K.n; e++) result[K.at(e)][J.at(e)] += V.at(e);\n"
             "    sdql::prune(result);")
    source = (f"extern \"C\" int sdql_entry_{name}(void* const* data, const sdql::i64* lens, "
              "sdql::status* st, sdql::output** out) {\n"
              "  return sdql::run(st, out, [&]() -> sdql::output* {\n"
              "    sdql::i64 next = 0;\n"
              "    const auto K = sdql::flat<sdql::i64>(data, lens, next);\n"
              "    const auto J = sdql::flat<sdql::i64>(data, lens, next);\n"
              f"    const auto V = sdql::flat<{value}>(data, lens, next);\n"
              f"    {csr} result{{lens[next]}};\n    {write}\n"
              "    return sdql::encode(result);\n  });\n}\n")
    t = REAL if value == "double" else INT
    inputs = (("K", DictT(INT, dense=True)), ("J", DictT(INT, dense=True)),
              ("V", DictT(t, dense=True)))
    return Kernel(name, source, inputs, DictT(DictT(t), dense=True), [None],
                  flat={"K": "sdql::i64", "J": "sdql::i64", "V": value}, dest="rows")


@cache
def _natives() -> dict[tuple[str, bool, str], N.Native]:
    kernels = {(keys, w, value): _kernel(f"{'w' if w else 'c'}{len(keys)}{value[-3:]}", keys, w,
                                         value)
               for keys in ("", ", std::int32_t") for w in (False, True)
               for value in ("double", "sdql::i64")}
    built = B.build(translation_unit(list(kernels.values())))
    return {key: N.Native(built, k) for key, k in kernels.items()}


@st.composite
def updates(draw: Draw) -> tuple[int, Updates, bool]:
    """Rows in order, each a run of updates: keys ascending (a clean row), or from a
    small range with repeats, or far apart and negative; values zero among them; now
    and then a last update of a row outside (n, or a row before)."""
    n = draw(st.integers(0, 6))
    narrow = draw(st.booleans())
    rows = sorted(draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=n, unique=True)))
    out: Updates = []
    for k in rows:
        kind = draw(st.sampled_from(["ascending", "small", "far"]))
        size = draw(st.integers(1, 40))
        if kind == "ascending":
            keys = sorted(draw(st.lists(st.integers(0, 60), min_size=size, max_size=size,
                                        unique=True)))
        elif kind == "small":
            keys = draw(st.lists(st.integers(0, 8), min_size=size, max_size=size))
        else:
            big = 2**31 - 1 if narrow else 2**40
            keys = draw(st.lists(st.sampled_from([-3, 0, 5, 2**22 + 1, big]), min_size=1,
                                 max_size=size))
        values = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0])
        out += [(k, j, draw(values)) for j in keys]
    if draw(st.integers(0, 9)) == 0:
        out.append((draw(st.sampled_from([n, max(0, n - 2)])), 0, 1.0))
    return n, out, narrow


def _run(n: int, ups: Updates, narrow: bool, writer: bool, ints: bool = False) -> object:
    native = _natives()[(", std::int32_t" if narrow else "", writer,
                         "sdql::i64" if ints else "double")]
    k, j, v = (np.array([u[i] for u in ups], dtype=dt)
               for i, dt in enumerate((np.int64, np.int64, np.int64 if ints else np.float64)))
    try:
        return [a.copy() for a in native([[k], [j], [v]], n)]
    except (CodegenError, EvalError) as err:
        return err.message


@given(updates())
@example((3, [(0, 1, 0.0), (0, 2, 1.0), (1, 0, 1.0), (2, 5, 1.0)], True)).via(
    "a zero appended to a clean row: the row is not clean, its zero pruned")
@example((2, [(0, 1, 1.0), (0, 1, 1.0), (1, 0, 1.0)], False)).via(
    "a key repeated: added into the last, not appended")
@example((3, [(0, 0, 1.0), (2, 0, 1.0), (3, 0, 1.0)], True)).via(
    "a row skipped, then a row outside the result")
@example((2, [(1, 0, 1.0), (0, 0, 1.0)], True)).via("a row before the current one")
@example((0, [(0, 0, 1.0)], True)).via(
    "a result of no rows: row 0 was written, not refused (a review found it; it predates "
    "the writer: csr began in row 0 whatever its size)")
@example((2, [(0, j, 1.0) for j in range(16)] + [(1, 0, 1.0)], False)).via(
    "a row's first key when the arrays are full (room for 16)")
@example((2, [(0, 2**22 + 1, 1.0), (0, 3, 1.0), (1, 0, 1.0)], False)).via(
    "a clean row with a key past 2^22, then a smaller one: not added up in the table")
def test_the_writer_writes_what_csr_add_writes(case: tuple[int, Updates, bool]) -> None:
    n, ups, narrow = case
    ints = sum(k + j for k, j, _ in ups) % 2 == 1  # (integers for some: scaled to 2^62)
    if ints:
        ups = [(k, j, int(v * 2**61)) for k, j, v in ups]
    want, got = _run(n, ups, narrow, False, ints), _run(n, ups, narrow, True, ints)
    outside = any(k >= n for k, _, _ in ups) or any(
        b[0] < a[0] for a, b in pairwise(ups))
    assert isinstance(want, str) or not outside, (n, ups)  # a row outside fails
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    assert isinstance(want, list) and isinstance(got, list)
    assert len(got) == len(want)
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want,
                                                                           strict=True))

"""The CSR writer is the CSR it writes (``sdql::csr_writer``, codegen/sdqlite_runtime.h):
for any sequence of updates ``result[k][j] += v`` with rows k in order (each row once,
or not at all), keys j anywhere in the columns (repeated, descending, past 2^22 where a
row is no longer added up in a table, past the arrays' first capacity, up to the
largest), values zero or not, the arrays a kernel hands back through the writer — its
cursors copied, a clean row appended in place, everything else through ``csr::add`` —
are those ``csr::add`` writes alone, bit for bit, with 32-bit and 64-bit keys, of reals
and of integers (whose sums are checked); and an update of a row outside the result (of
none, too: n = 0), of a row before the current one, or of a key outside the columns
(negative, or the column count), fails as it does there, and only such an update.

And a block of rows written one entry each on the diagonal (``rows_ahead``, then bare
``diagonal(k, v)`` stores, ``rows_behind``; through ``add`` where ``rows_ahead`` says no),
after any such updates and before more, writes what ``csr::add`` writes for
``result[k][k] += v``, k from lo on, and fails as it does.
"""

from __future__ import annotations

from functools import cache
from itertools import pairwise
from typing import Any

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
              f"    {csr} result{{lens[next], lens[next + 1]}};\n    {write}\n"
              "    return sdql::encode(result);\n  });\n}\n")
    t = REAL if value == "double" else INT
    inputs = (("K", DictT(INT, dense=True)), ("J", DictT(INT, dense=True)),
              ("V", DictT(t, dense=True)))
    return Kernel(name, source, inputs, DictT(DictT(t), dense=True), [None],
                  flat={"K": "sdql::i64", "J": "sdql::i64", "V": value}, dest="rows")


def _diagonal_kernel(name: str, keys: str, value: str) -> Kernel:
    """Updates K, J, V through the writer, then rows P[0] .. P[0] + D.n - 1 on the
    diagonal (values D) in blocks of P[1] rows, then updates K2, J2, V2."""
    csr = f"sdql::csr<{value}{keys}>"
    flat = {"K": "sdql::i64", "J": "sdql::i64", "V": value, "D": value, "P": "sdql::i64",
            "K2": "sdql::i64", "J2": "sdql::i64", "V2": value}
    read = "".join(f"    const auto {x} = sdql::flat<{t}>(data, lens, next);\n"
                   for x, t in flat.items())
    source = (f"extern \"C\" int sdql_entry_{name}(void* const* data, const sdql::i64* lens, "
              "sdql::status* st, sdql::output** out) {\n"
              "  return sdql::run(st, out, [&]() -> sdql::output* {\n"
              f"    sdql::i64 next = 0;\n{read}"
              f"    {csr} result{{lens[next], lens[next + 1]}};\n"
              "    auto w = sdql::writer(result);\n"
              "    for (sdql::i64 e = 0; e < K.n; e++) w[K.at(e)][J.at(e)] += V.at(e);\n"
              "    const sdql::i64 lo = P.at(0), block = P.at(1);\n"
              "    for (sdql::i64 k = lo, end = lo + D.n; k < end;) {\n"
              "      const sdql::i64 stop = std::min(end, k + block);\n"
              "      if (w.rows_ahead(k, stop)) {\n"
              "        for (; k < stop; ++k) w.diagonal(k, D.at(k - lo));\n"
              "        w.rows_behind(stop);\n"
              "      } else {\n"
              "        for (; k < stop; ++k) w[k][k] += D.at(k - lo);\n"
              "      }\n    }\n"
              "    for (sdql::i64 e = 0; e < K2.n; e++) w[K2.at(e)][J2.at(e)] += V2.at(e);\n"
              "    sdql::prune(w);\n"
              "    return sdql::encode(result);\n  });\n}\n")
    t = REAL if value == "double" else INT
    inputs = tuple((x, DictT(t if c == value else INT, dense=True)) for x, c in flat.items())
    return Kernel(name, source, inputs, DictT(DictT(t), dense=True), [None], flat=flat,
                  dest="rows")


@cache
def _natives() -> dict[tuple[str, bool | str, str], N.Native]:
    kernels = {(keys, w, value): _kernel(f"{'w' if w else 'c'}{len(keys)}{value[-3:]}", keys, w,
                                         value)
               for keys in ("", ", std::int32_t") for w in (False, True)
               for value in ("double", "sdql::i64")}
    diagonal = {(keys, "diagonal", value): _diagonal_kernel(f"d{len(keys)}{value[-3:]}", keys,
                                                           value)
                for keys in ("", ", std::int32_t") for value in ("double", "sdql::i64")}
    built = B.build(translation_unit([*kernels.values(), *diagonal.values()]))
    return {key: N.Native(built, k) for key, k in (kernels | diagonal).items()}


Case = tuple[int, Updates, bool, int]  # rows, updates, 32-bit keys, columns


@st.composite
def updates(draw: Draw) -> Case:
    """Rows in order, each a run of updates: keys ascending (a clean row), or from a
    small range with repeats, or far apart up to the last column; values zero among
    them; now and then an update of a key outside the columns, or a last update of a
    row outside (n, or a row before)."""
    n = draw(st.integers(0, 6))
    narrow = draw(st.booleans())
    # the columns: a few (a row added up in a table reaches past them), many (32-bit
    # keys: up to the largest, 2^31 - 1), or not known (-1: any key, or any 32-bit one)
    m = draw(st.sampled_from([7, 61, 2**31 if narrow else 2**40 + 1, -1]))
    top = m if m >= 0 else 2**31 if narrow else 2**40 + 1  # (the keys drawn are below it)
    rows = sorted(draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=n, unique=True)))
    out: Updates = []
    for k in rows:
        kind = draw(st.sampled_from(["ascending", "small", "far"]))
        size = draw(st.integers(1, 40))
        if kind == "ascending":
            keys = sorted(draw(st.lists(st.integers(0, min(60, top - 1)), min_size=1,
                                        max_size=size, unique=True)))
        elif kind == "small":
            keys = draw(st.lists(st.integers(0, min(8, top - 1)), min_size=size,
                                 max_size=size))
        else:
            keys = draw(st.lists(st.sampled_from(sorted({0, 5 % top, min(2**22 + 1, top - 1),
                                                          top - 1})), min_size=1,
                                 max_size=size))
        if draw(st.integers(0, 9)) == 0:  # (outside, where the columns are known)
            keys.insert(draw(st.integers(0, len(keys))), draw(st.sampled_from([-3, top])))
        values = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0])
        out += [(k, j, draw(values)) for j in keys]
    if draw(st.integers(0, 9)) == 0:
        out.append((draw(st.sampled_from([n, max(0, n - 2)])), 0, 1.0))
    return n, out, narrow, m


def _run(n: int, ups: Updates, narrow: bool, m: int, writer: bool, ints: bool = False
         ) -> object:
    native = _natives()[(", std::int32_t" if narrow else "", writer,
                         "sdql::i64" if ints else "double")]
    k, j, v = (np.array([u[i] for u in ups], dtype=dt)
               for i, dt in enumerate((np.int64, np.int64, np.int64 if ints else np.float64)))
    try:
        return [a.copy() for a in native([[k], [j], [v]], (n, m))]
    except (CodegenError, EvalError) as err:
        return err.message


@given(updates())
@example((3, [(0, 1, 0.0), (0, 2, 1.0), (1, 0, 1.0), (2, 5, 1.0)], True, 2**31)).via(
    "a zero appended to a clean row: the row is not clean, its zero pruned")
@example((2, [(0, 1, 1.0), (0, 1, 1.0), (1, 0, 1.0)], False, 2**40 + 1)).via(
    "a key repeated: added into the last, not appended")
@example((3, [(0, 0, 1.0), (2, 0, 1.0), (3, 0, 1.0)], True, 2**31)).via(
    "a row skipped, then a row outside the result")
@example((2, [(1, 0, 1.0), (0, 0, 1.0)], True, 2**31)).via("a row before the current one")
@example((0, [(0, 0, 1.0)], True, 2**31)).via(
    "a result of no rows: row 0 was written, not refused (a review found it; it predates "
    "the writer: csr began in row 0 whatever its size)")
@example((2, [(0, j, 1.0) for j in range(16)] + [(1, 0, 1.0)], False, 2**40 + 1)).via(
    "a row's first key when the arrays are full (room for 16)")
@example((2, [(0, 2**22 + 1, 1.0), (0, 3, 1.0), (1, 0, 1.0)], False, 2**40 + 1)).via(
    "a clean row with a key past 2^22, then a smaller one: not added up in the table")
@example((1, [(0, 5, 1.0), (0, 1, 1.0), (0, 6, 1.0), (0, 7, 1.0)], False, 7)).via(
    "a row added up in its table, then a key past the columns but inside the table: "
    "refused (csr::add took it before it checked every key; with the check after the "
    "table's own test, the table must not grow past the columns: sdql::csr::grow)")
@example((2, [(0, 3, 1.0), (1, 2**31, 1.0)], True, 2**31)).via(
    "a row's first key the column count: refused (the fast path's own test)")
@example((1, [(0, 3, 1.0), (0, 2**40 + 1, 1.0)], False, 2**40 + 1)).via(
    "a key of a clean row the column count: refused (the fast path's own test)")
@example((2, [(0, 1, 1.0), (1, -3, 1.0)], False, 2**40 + 1)).via(
    "a row's first key negative: refused")
@example((2, [(0, 1, 1.0), (0, -3, 1.0), (1, -3, 1.0), (1, 2**40 + 1, 1.0)], False, -1)).via(
    "the columns not known: negative and large keys taken (the column check's first "
    "version refused them: test_codegen's negative keys)")
def test_the_writer_writes_what_csr_add_writes(case: Case) -> None:
    n, ups, narrow, m = case
    ints = sum(k + j for k, j, _ in ups) % 2 == 1  # (integers for some: scaled to 2^62)
    if ints:
        ups = [(k, j, int(v * 2**61)) for k, j, v in ups]
    want, got = _run(n, ups, narrow, m, False, ints), _run(n, ups, narrow, m, True, ints)
    bound = m if m >= 0 else 2**31 if narrow else None
    outside = any(k >= n or (bound is not None and not 0 <= j < bound) for k, j, _ in ups) \
        or any(b[0] < a[0] for a, b in pairwise(ups))
    assert isinstance(want, str) or not outside, (n, ups)  # a row or key outside fails
    assert outside or not (isinstance(want, str) and "outside" in want), (n, ups, want)
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    assert isinstance(want, list) and isinstance(got, list)
    assert len(got) == len(want)
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want,
                                                                           strict=True))


DiagonalCase = tuple[Case, int, list[float], int, Updates]  # lo, values, block, updates after


@st.composite
def diagonals(draw: Draw) -> DiagonalCase:
    """Updates as ``updates`` draws them, then rows lo .. on the diagonal (from before row
    0 to past the last, over rows written already or not, beyond the columns where they
    are fewer than the rows), in blocks of 1 to 4 rows, values zero among them, then a
    few updates of the last rows."""
    n, before, narrow, m = draw(updates())
    m = draw(st.sampled_from([m, max(n - 2, 0)]))
    lo = draw(st.integers(-2, n + 1))
    values = draw(st.lists(st.sampled_from([0.0, 1.0, -1.0, 0.5]), max_size=n + 3))
    end = lo + len(values)
    after = draw(st.lists(st.tuples(st.integers(end - 1, end), st.integers(0, 6),
                                    st.sampled_from([0.0, 1.0, 2.0])), max_size=3))
    return (n, before, narrow, m), lo, values, draw(st.integers(1, 4)), sorted(after)


@given(diagonals())
@example(((4, [], False, 4), 0, [1.0, 0.0, 2.0, 1.0], 2, [])).via("the identity, a zero in it")
@example(((2, [(0, j, 1.0) for j in range(16)], False, 61), 1, [1.0], 1, [])).via(
    "a block after the arrays are full: room made for it, the row and last key kept")
@example(((2, [(0, 3, 1.0), (0, 1, 1.0)], False, 7), 0, [1.0, 1.0], 2, [])).via(
    "row 0 begun out of order (not clean): through add")
@example(((2, [(0, 3, 1.0)], False, 7), 0, [1.0, 1.0], 2, [])).via(
    "row 0 begun (clean): through add, which merges its key 0 in before 3")
@example(((3, [(2, 0, 1.0)], False, 7), 0, [1.0], 1, [])).via("a row before the current one")
@example(((3, [], False, 7), -2, [1.0, 1.0, 1.0], 4, [])).via("rows before row 0")
@example(((3, [], False, 7), 1, [1.0, 1.0, 1.0], 4, [])).via("rows past the last")
@example(((4, [], False, 2), 0, [1.0, 1.0, 1.0], 4, [])).via("keys past the columns")
@example(((4, [], False, 7), 0, [1.0, 2.0], 2, [(1, 0, 1.0)])).via(
    "a key of the diagonal's last row before its diagonal key, after it: merged in order")
@example(((4, [], False, 7), 1, [1.0, 2.0], 2, [])).via("row 0 before the diagonal: empty")
@example(((4, [], False, 7), 2, [1.0, 2.0], 2, [])).via("rows 0 and 1 before it: empty")
@example(((0, [], False, 7), -1, [1.0], 1, [])).via(
    "no rows, and row -1: the writer has no current row (none before row 0 either)")
def test_rows_on_the_diagonal_write_what_csr_add_writes(case: DiagonalCase) -> None:
    (n, before, narrow, m), lo, values, block, after = case
    ints = (n + lo + block) % 2 == 1
    if ints:  # (integers for some: scaled to 2^62)
        before = [(k, j, int(v * 2**61)) for k, j, v in before]
        after = [(k, j, int(v * 2**61)) for k, j, v in after]
        values = [int(v * 2**61) for v in values]
    ups = [*before, *((lo + i, lo + i, v) for i, v in enumerate(values)), *after]
    want = _run(n, ups, narrow, m, False, ints)
    native = _natives()[(", std::int32_t" if narrow else "", "diagonal",
                         "sdql::i64" if ints else "double")]
    real, key = (np.int64 if ints else np.float64), np.int64

    def arrays(u: Updates) -> list[list[Any]]:
        return [[np.array([x[i] for x in u], dtype=dt)] for i, dt in
                enumerate((key, key, real))]

    d = [np.array(values, dtype=real)]
    # (first a result of 64 rows, let go: its arrays, kept for the next call, hold rows
    # pointers 0 .. 64 where this call's rows must set theirs)
    native([*arrays([]), [np.ones(64, dtype=real)], [np.array([0, 5], dtype=key)],
            *arrays([])], (64, 64))
    try:
        got: object = [a.copy() for a in native(
            [*arrays(before), d, [np.array([lo, block], dtype=key)], *arrays(after)], (n, m))]
    except (CodegenError, EvalError) as err:
        got = err.message
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    assert isinstance(want, list) and isinstance(got, list)
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want,
                                                                           strict=True))

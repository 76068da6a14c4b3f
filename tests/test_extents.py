"""Declared extents: ``{dense_int[n] -> D}`` and ``{int[n] -> D}`` on inputs — their
syntax, that they are not part of a type's identity, the data checks, and what the
optimizer gains from them (the paper's "if V1 is a dense vector")."""

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sdqlite.check.typecheck import typecheck
from sdqlite.errors import DataError, ParseError
from sdqlite.syntax.parser import parse_program, parse_type
from sdqlite.syntax.types import REAL, DictT, erase
from sdqlite.ui.cli import main
from semantics.extents import check_extents
from semantics.values import dense

Q = Fraction
BATAX = Path(__file__).parent.parent / "paper_examples" / "batax.sdql"


def test_extents_parse_print_and_are_not_part_of_the_type() -> None:
    t = parse_type("{int[m] -> {dense_int[n] -> real}}")
    assert str(t) == "{int[m] -> {dense_int[n] -> real}}"
    assert parse_type(str(t)) == t
    assert t == DictT(DictT(REAL, dense=True))  # equality ignores extents
    assert str(erase(t)) == "{int -> {dense_int -> real}}"
    prog = parse_program("x : {dense_int[n] -> real}\nx")
    assert prog.expr is not None
    _, found = typecheck(prog.expr, {d.name: d.type for d in prog.decls})
    assert str(found) == "{dense_int -> real}"  # the checker erases them


def test_extents_are_declared_on_inputs_only() -> None:
    with pytest.raises(ParseError, match="declared on inputs only"):
        parse_program("zero[{int[n] -> real}]")


def test_sizes_are_fixed_by_dense_inputs_and_bound_sparse_keys() -> None:
    x, v = DictT(REAL, dense=True, extent="n"), DictT(REAL, extent="n")
    x3 = dense([Q(1), Q(0), Q(2)])
    assert check_extents({"x": (x, x3, None), "V": (v, {0: Q(1), 2: Q(5)}, None)}) == {"n": 3}
    with pytest.raises(DataError, match=r"input V has key 3 outside int\[n\] \(n = 3, from x\)"):
        check_extents({"x": (x, x3, None), "V": (v, {3: Q(1)}, None)})
    with pytest.raises(DataError, match=r"input y has 2 positions but n = 3 \(from x\)"):
        check_extents({"x": (x, x3, None), "y": (x, dense([Q(1), Q(2)]), None)})
    with pytest.raises(DataError, match="start at 1"):
        check_extents({"x": (x, dense([Q(1)], start=1), None)})
    with pytest.raises(DataError, match="0 or more"):
        check_extents({"V": (v, {-1: Q(1)}, None)})  # n not fixed: keys need only be >= 0
    m = DictT(DictT(REAL, dense=True, extent="n"), extent="m")  # rows checked too
    with pytest.raises(DataError, match=r"input M\(4\) has 2 positions"):
        check_extents({"x": (x, x3, None), "M": (m, {4: dense([Q(1), Q(2)])}, None)})


def test_cli_reports_data_outside_a_declared_extent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "x.npy", np.array([1.0, 0.0, 2.0]))
    scipy.io.mmwrite(tmp_path / "A.mtx", sp.csr_matrix(np.array([[1.0, 0.0, 0.0, 2.0]])))
    rc = main(["eval", str(BATAX), "-i", f"A={tmp_path / 'A.mtx'}", "-i", "beta=2.0",
               "-i", f"x={tmp_path / 'x.npy'}"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert "batax.sdql:3:1: error: input A(0) has key 3 outside int[n] (n = 3, from x)" in err


def test_the_optimized_dense_gradient_is_v2_and_pipes_into_eval(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """§5.2: with V1 dense of size n and V2's keys below n, the gradient w.r.t. V1
    optimizes to V2; the printed program keeps the declaration and runs."""
    src = Path(__file__).parent.parent / "paper_examples" / "dot_v2_dense.sdql"
    assert main(["opt", str(src), "--wrt", "V1"]) == 0
    out = capsys.readouterr().out
    assert out == "V2 : {int[n] -> real}\nV2\n"
    inputs = ["-i", "V1=[2.0, 0.0, 0.0, -1.0]", "-i", "V2={0 -> 3.0, 3 -> 4.0}"]
    assert main(["grad", str(src), "--wrt", "V1", *inputs]) == 0
    unoptimized = capsys.readouterr().out
    optimized = tmp_path / "opt.sdql"
    optimized.write_text(out)
    assert main(["eval", str(optimized), *inputs[2:]]) == 0
    assert capsys.readouterr().out == unoptimized


def test_the_gradient_wrt_a_dense_matrix_of_a_linear_function_stops_reading_it() -> None:
    """sum A(i,j) * M(i,j) w.r.t. a dense m×n M: the row M(i) is whole because i lies in
    M's extent, so the row's one-hot is rewritten too and the gradient is A."""
    from sdqlite.opt.pipeline import pipeline
    from sdqlite.syntax.names import alpha_normal
    from sdqlite.syntax.parser import parse_expr

    prog = parse_program("M : {dense_int[m] -> {dense_int[n] -> real}}\n"
                         "A : {int[m] -> {int[n] -> real}}\n"
                         "sum(<i, r> in A) sum(<j, a> in r) a * M(i)(j)")
    ctx = {d.name: d.type for d in prog.decls}
    assert prog.expr is not None
    stages = pipeline(typecheck(prog.expr, ctx)[0], ctx, "M")
    lookups = next(s for s in stages if s.name == "iterated-key lookups")
    assert lookups.report["rules fired"] == {"iterated-key-lookup (declared-extent)": 2}
    assert alpha_normal(stages[-1].program) == alpha_normal(parse_expr("A"))


def test_result_sizes_follow_keys_not_shadowed_names() -> None:
    """A sum's value binder hides an outer sum's key of the same name: a singleton keyed
    by it has no size (N's values are any ints), while one keyed by the key has n."""
    from sdqlite.check.sizes import result_sizes
    from sdqlite.syntax.types import INT

    ctx = {"V1": DictT(REAL, extent="n"), "N": DictT(INT)}
    shadowed = parse_program("sum(<k, v> in V1) sum(<j, k> in N) {k -> v}").expr
    direct = parse_program("sum(<k, v> in V1) sum(<j, w> in N) {k -> v}").expr
    assert shadowed is not None and direct is not None
    assert result_sizes(typecheck(shadowed, ctx)[0], ctx) == [None]
    assert result_sizes(typecheck(direct, ctx)[0], ctx) == ["n"]


def test_keys_from_an_index_array_are_below_its_bound_unless_it_is_shadowed() -> None:
    """After storage composition keys come out of index arrays (``values``): a sum over
    one, or a lookup into one, gives keys below its bound; a binder of the same name is
    not that array."""
    from sdqlite.check.sizes import accumulator_sizes
    from sdqlite.syntax.parser import parse_expr

    def outer(text: str) -> list[str | None]:
        e = parse_expr(text)
        return accumulator_sizes(e, {}, {"idx": "n", "row": "m"})[id(e)]

    assert outer("sum(<p, j> in idx(0:3)) {j -> 1.0}") == ["n"]
    assert outer("sum(<p, _> in (0:3)) {row(p) -> 1.0}") == ["m"]
    assert outer("sum(<p, idx> in x) sum(<q, j> in idx) {j -> 1.0}") == [None]
    assert outer("sum(<p, _> in (0:3)) let row = x in {row(p) -> 1.0}") == [None]
    assert outer("sum(<p, j> in idx) {p -> 1.0}") == [None]  # (a position, not an entry)

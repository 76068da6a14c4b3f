"""Differentiation from the user's side: fresh tangent names, F = D_real, the REPL's
:anf/:fad/:grad, and `sdqlite grad`."""

from fractions import Fraction
from pathlib import Path

import pytest

from sdqlite import parse_expr, show, typecheck
from sdqlite.ad.anf import anf
from sdqlite.ad.fad import fad
from sdqlite.ad.gradient import expand, jvp
from sdqlite.errors import DiffError, EvalError, SDQLTypeError
from sdqlite.opt.saturation import optimize
from sdqlite.syntax.ast import Gradient
from sdqlite.syntax.types import REAL, DictT, tensor
from sdqlite.ui.cli import main
from sdqlite.ui.session import Session
from semantics.interp import evaluate
from semantics.oracle import jacobian
from semantics.values import FRACTION


def test_tangent_names_do_not_capture_primed_user_names() -> None:
    """x' is the user's own input here; the tangent of x must be another name."""
    ctx = {"x": REAL, "x'": REAL}
    e, t = typecheck(parse_expr("x * x' + sin(x)"), ctx)
    d, names = fad(e, ctx)
    assert names["x"] == "x''" and names["x'"] == "x'''"
    d_elab, _ = typecheck(d, {**ctx, "x''": REAL, "x'''": REAL})
    env = {"x": Fraction(1, 2), "x'": Fraction(3)}
    got = evaluate(d_elab, {**env, "x''": Fraction(1), "x'''": Fraction(0)}, FRACTION)
    assert abs(float(got) - float(jacobian(e, ctx, t, env, "x"))) < 1e-12


def test_gradient_with_primed_inputs() -> None:
    ctx = {"V": tensor(1), "V'": tensor(1)}
    e = expand(typecheck(parse_expr("gradient (sum(<i, a> in V) a * V'(i)) V"), ctx)[0], ctx)
    env = {"V": {0: Fraction(2), 1: Fraction(3)}, "V'": {0: Fraction(5)}}
    assert evaluate(e, env, FRACTION) == {0: Fraction(5)}


def test_scalar_fad_is_tensorized_fad_at_real() -> None:
    """With τ = real the rules of Fig. diffrules are those of Fig. forward_diffrules:
    constants have tangent 0 (zero[real]), and *^T[real] is plain * (no re-indexing)."""
    ctx = {"s": REAL, "V": tensor(1)}
    e, _ = typecheck(parse_expr("2.0 * s + sum(<i, a> in V) a * V(i)"), ctx)
    f, _ = jvp(e, ctx)
    expected = ("2.0 * s' + 0.0 * s + sum(<i, a> in V) let i' = 0.0 in let a' = V'(i) in "
                "a * V'(i) + a' * V(i)")
    assert f == parse_expr(expected)
    tensorized, _ = fad(e, ctx, tensor(1))  # the same program with τ = tensor 1 differs:
    assert "zero[{int -> real}]" in show(tensorized)  # the constant's tangent is zero[τ]


def test_repl_differentiation_commands() -> None:
    s = Session()
    s.handle("s : real")
    s.handle("V : {int -> real}")
    s.handle(":input s = 2.0")
    s.handle(":input V = {0 -> 1.0, 2 -> -3.0}")
    assert s.handle(":anf s * V + V") == "let t1 = s * V in\nlet t2 = t1 + V in\nt2"
    assert s.handle(":fad s * V").splitlines()[1] == "let t1' = s * V' + s' * V in"
    out = s.handle(":grad s * V V").splitlines()
    assert out[-2:] == ["{ 0 -> { 0 -> 2.0 }, 2 -> { 2 -> 2.0 } }",
                        "  : {int -> {int -> real}}"]
    with pytest.raises(SDQLTypeError, match="not an input"):
        s.handle(":grad s * V q")


def test_cli_grad(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "dot.sdql"
    f.write_text("V1 : {int -> real}\nV2 : {int -> real}\nsum(<i, a> in V1) a * V2(i)\n")
    args = ["grad", str(f), "--wrt", "V2", "-i", "V1={0 -> 2.0, 1 -> 3.0}",
            "-i", "V2={0 -> 5.0, 1 -> 1.0, 4 -> 2.0}", "--program"]
    assert main(args) == 0
    out = capsys.readouterr()
    # masked to the stored entries of V2: index 4 has derivative V1(4) = 0
    assert out.out.strip() == "{ 0 -> 2.0, 1 -> 3.0 }"
    assert out.err.startswith("let V1' = zero[{int -> {int -> real}}] in")
    assert main(["grad", str(f), "--wrt", "W", "-i", "V1={}", "-i", "V2={}"]) == 1
    assert "cannot differentiate with respect to W" in capsys.readouterr().err


def test_at_a_non_generic_point_sparse_ad_follows_the_concrete_support() -> None:
    """An intermediate entry that cancels to exactly zero is dropped, and with it its
    tangent: concrete FAD follows the concrete support, the generic point does not."""
    from semantics.oracle import directional, evaluate_generic

    ctx = {"x": tensor(2)}
    e, t = typecheck(parse_expr("sum(<_, v> in (sum(<k, w> in x) w) * 1.5) v"), ctx)
    env = {"x": {0: {0: Fraction(1), 4: Fraction(2)}, 1: {4: Fraction(-2)}}}
    dirs = {"x": {0: {0: Fraction(1), 4: Fraction(1)}, 1: {4: Fraction(1)}}}
    d, names = fad(e, ctx)
    tan_ctx = {**ctx, names["x"]: tensor(2)}
    d_elab, dt = typecheck(d, tan_ctx)
    tan_env = {**env, names["x"]: dirs["x"]}
    assert evaluate(d_elab, tan_env, FRACTION) == Fraction(3, 2)  # entry 4 was dropped
    assert evaluate_generic(d_elab, tan_ctx, dt, tan_env) == Fraction(9, 2)
    assert directional(e, ctx, t, env, dirs) == Fraction(9, 2)


def test_coverage_follows_the_variable_type() -> None:
    """DESIGN.md: masked to the stored entries for a sparse variable; every position,
    zeros included, for a dense one.  Here ∂/∂x_j = w(j), and x_1 = 0."""
    from semantics.values import dense

    w = {1: Fraction(5), 2: Fraction(2)}
    program = "gradient (sum(<i, a> in x) a * w(i)) x"
    sparse_ctx = {"x": tensor(1), "w": tensor(1)}
    e = expand(typecheck(parse_expr(program), sparse_ctx)[0], sparse_ctx)
    assert evaluate(e, {"x": {0: Fraction(1), 2: Fraction(3)}, "w": w}, FRACTION) == {
        2: Fraction(2)}  # x has no entry 1: masked
    dense_ctx = {"x": DictT(REAL, dense=True), "w": tensor(1)}
    e, t = typecheck(parse_expr(program), dense_ctx)
    assert t == tensor(1)
    e = expand(e, dense_ctx)
    got = evaluate(e, {"x": dense([Fraction(1), Fraction(0), Fraction(3)]), "w": w}, FRACTION)
    assert got == {1: Fraction(5), 2: Fraction(2)}  # position 1 holds 0 and is covered


def test_the_checker_types_gradient_without_expanding_it() -> None:
    """The checker gives ``gradient e x`` its type ``T ⊗ τ`` from the types alone and keeps
    the node (it does not call into AD); the interpreter refuses the node with a located
    error that says what to call, and ``expand`` gives the program it evaluates."""
    ctx = {"V": tensor(1)}
    e, t = typecheck(parse_expr("gradient (sum(<i, a> in V) a * a) V"), ctx)
    assert isinstance(e, Gradient) and t == DictT(REAL)
    env = {"V": {0: Fraction(3), 4: Fraction(1)}}
    with pytest.raises(EvalError, match=r"sdqlite\.ad\.gradient\.expand") as err:
        evaluate(e, env, FRACTION)
    assert err.value.span == e.span
    # AD's own stages and the optimizer's encoding say so too
    for stage in (lambda: anf(e), lambda: fad(e, ctx), lambda: optimize(e, ctx)):
        with pytest.raises(DiffError, match=r"sdqlite\.ad\.gradient\.expand"):
            stage()
    assert evaluate(expand(e, ctx), env, FRACTION) == {0: Fraction(6), 4: Fraction(2)}


def test_an_error_expanding_a_gradient_keeps_its_own_location() -> None:
    """``expand`` re-raises an error of the expansion located where it arose when it says
    where (here the body's sum, which the checker has not typed: ``gradient`` refuses it),
    and at the ``gradient`` only when it does not (a context without x: ``wrt_type``
    says no place)."""
    ctx = {"V": tensor(1)}
    text = "gradient (sum(<i, a> in V) a * a) V"
    raw = parse_expr(text)  # straight from the parser: no node has its type yet
    assert isinstance(raw, Gradient) and raw.span is not None
    body = raw.expr
    assert body.span is not None and body.span.col == text.index("sum") + 1 != raw.span.col
    with pytest.raises(SDQLTypeError, match="checked program") as err:
        expand(raw, ctx)
    assert err.value.span == body.span
    checked = typecheck(raw, ctx)[0]
    with pytest.raises(SDQLTypeError, match="with respect to V: it is not an input") as err:
        expand(checked, {})  # the program checked in ctx, expanded in another
    assert err.value.span == checked.span

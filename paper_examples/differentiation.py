"""The paper's differentiation examples (§2.1, §4.1–4.3): each prints the transformed
program, checks it against the paper's listing up to renaming, and checks its value
against the sympy oracle (the interpreter on symbols, differentiated by sympy).

Up to renaming means α-equivalence with ``1`` and ``1.0`` identified and ``{}`` equal to
``zero[T]`` (``sdqlite.syntax.names.alpha_normal``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Literal

from sdqlite.ad.anf import anf
from sdqlite.ad.fad import fad, tangent_context
from sdqlite.ad.gradient import expand
from sdqlite.check.typecheck import typecheck
from sdqlite.syntax.ast import Expr, Gradient
from sdqlite.syntax.names import alpha_normal
from sdqlite.syntax.parser import parse_expr, parse_program
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import REAL, Type
from semantics.display import show_value
from semantics.interp import evaluate
from semantics.oracle import directional, jacobian
from semantics.values import FRACTION, Value, values_equal

HERE = Path(__file__).parent
Q = Fraction


@dataclass(frozen=True)
class ADExample:
    name: str
    title: str
    source: str  # a .sdql file next to this module
    transform: Literal["anf+F", "D", "gradient"]
    wrt: str  # the input: the one-hot seed for D, the variable for gradient
    env: dict[str, Value]
    paper: str  # the paper's listing of the transformed program
    note: str = ""


TENSORS = {"V1": {0: Q(2), 3: Q(-1), 4: Q(1, 2)}, "V2": {0: Q(3), 1: Q(5), 4: Q(-2)}}

AD_EXAMPLES = [
    ADExample(
        "ex1_unrolled_fad", "Example 1: ANF then scalar FAD of the unrolled dot product",
        "ex1_unrolled.sdql", "anf+F", "x1",
        {"x1": Q(2), "x2": Q(3), "y1": Q(5), "y2": Q(7)},
        """let <t1, t1'> = <x1*y1, x1*y1' + x1'*y1> in
           let <t2, t2'> = <x2*y2, x2*y2' + x2'*y2> in
           let <t3, t3'> = <t1+t2, t1'+t2'> in
           t3'"""),
    ADExample(
        "ex1_dot_tensorized", "Example 1: tensorized FAD of the dot product (iterating V2)",
        "dot_v2.sdql", "D", "V1", TENSORS,
        """sum(<i,a> in V2)
             let <i',a'> = <0,V2'(i)>
             V1(i) * a' + V1'(i) * a"""),
    ADExample(
        "ex1_dot_tensorized_v1", "Example 1: tensorized FAD of the dot product (iterating V1)",
        "dot_v1.sdql", "D", "V2", TENSORS,
        """sum(<i, a> in V1)
             let <i', a'> = <0, V1'(i)> in
             a * V2'(i) + a' * V2(i)""",
        note="the paper prints `<{}, V1'(i)>`; the tangent of the int i is 0 (Fig. diffrules)"),
    ADExample(
        "ex1_dot_gradient", "Example 1: gradient (sum(<i, a> in V1) a * V2(i)) V2",
        "dot_v1.sdql", "gradient", "V2", TENSORS,
        """let V1' = {}
           let V2' = sum(<i,_> in V2) {i -> {i -> 1}}
           sum(<i, a> in V1)
             let <i', a'> = <0, V1'(i)> in
             a * V2'(i) + a' * V2(i)""",
        note="the paper prints `<{}, V1'(i)>`; the tangent of the int i is 0 (Fig. diffrules)"),
    ADExample(
        "ex2_wrt_s", "Example 2: s * V differentiated w.r.t. s", "scalar_vector.sdql",
        "gradient", "s", {"s": Q(5, 2), "V": {1: Q(4), 3: Q(-1)}},
        """let V' = {} in let s' = 1 in s * V' + s' * V"""),
    ADExample(
        "ex2_wrt_V", "Example 2: s * V differentiated w.r.t. V", "scalar_vector.sdql",
        "gradient", "V", {"s": Q(5, 2), "V": {1: Q(4), 3: Q(-1)}},
        """let V' = sum(<i,_> in V) {i -> {i -> 1}} in let s' = {} in s * V' + V * s'"""),
    ADExample(
        "ex3_trace", "Example 3: tensorized FAD of the trace", "trace.sdql", "D", "M",
        {"M": {0: {0: Q(1), 2: Q(3)}, 1: {1: Q(-2)}, 2: {0: Q(4), 2: Q(5)}}},
        """sum(<i,r> in M)
             let <i',r'> = <0,M'(i)>
             r'(i)"""),
]


@dataclass(frozen=True)
class Outcome:
    transformed: Expr
    matches_paper: bool
    value: Value
    expected: Value
    agrees: bool
    type: Type


def run_ad_example(ex: ADExample) -> Outcome:
    prog = parse_program((HERE / ex.source).read_text(encoding="utf-8"))
    assert prog.expr is not None
    ctx = {d.name: d.type for d in prog.decls}
    elab, t = typecheck(prog.expr, ctx)
    env = ex.env
    match ex.transform:
        case "anf+F":  # the directional derivative along the one-hot tangent of `wrt`
            transformed, names = fad(anf(elab), ctx)
            tangents = {names[x]: Q(int(x == ex.wrt)) for x in ctx}
            d_elab, dt = typecheck(transformed, tangent_context(ctx, REAL, names))
            value = evaluate(d_elab, {**env, **tangents}, FRACTION)
            expected = directional(elab, ctx, t, env, {ex.wrt: Q(1)})
        case "D":  # D_τ[e] with τ = type(wrt), seeded like gradient: x' = onehot, others 0
            tau = ctx[ex.wrt]
            transformed, _ = fad(elab, ctx, tau)
            expanded, dt = typecheck(Gradient(prog.expr, ex.wrt), ctx)
            value = evaluate(expand(expanded, ctx), env, FRACTION)
            expected = jacobian(elab, ctx, t, env, ex.wrt)
        case "gradient":
            checked, dt = typecheck(Gradient(prog.expr, ex.wrt), ctx)
            transformed = expand(checked, ctx)
            value = evaluate(transformed, env, FRACTION)
            expected = jacobian(elab, ctx, t, env, ex.wrt)
    paper = parse_expr(ex.paper)
    return Outcome(transformed, alpha_normal(transformed) == alpha_normal(paper), value,
                   expected, values_equal(value, expected), dt)


def report(ex: ADExample) -> bool:
    out = run_ad_example(ex)
    print(f"== {ex.name}: {ex.title}")
    print("  " + show(out.transformed).replace("\n", "\n  "))
    print(f"  : {out.type}")
    print(f"  {'matches' if out.matches_paper else 'DIFFERS FROM'} the paper's listing up to "
          "renaming" + (f" ({ex.note})" if ex.note else ""))
    print(f"  = {show_value(out.value)}   (w.r.t. {ex.wrt}, at the example's inputs)")
    print(f"  {'OK: agrees with' if out.agrees else 'MISMATCH with'} the sympy oracle"
          + ("" if out.agrees else f": {show_value(out.expected)}"))
    print()
    return out.matches_paper and out.agrees


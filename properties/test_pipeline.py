"""The pipeline of Fig. fig:arch preserves meaning and type, stage by stage.

For generated Γ ⊢ e : T and a real input x: every stage of ``pipeline(e, Γ, x)`` up to
AD has e's value, and every stage from AD on has the value of ``gradient e x``
(T ⊗ τ_x), exactly over the rationals (to 1e-9 with unary operations); without x every
stage has e's value.  Saturation never raises the cost of its input.  The same holds
for inputs with declared sizes, on data that obey them.
"""

from hypothesis import given
from hypothesis import strategies as st

from properties.generators import (
    SIZED_CTX,
    Generated,
    environments,
    sized_environments,
    sized_programs,
)
from properties.test_rules import rewrite_sites
from sdqlite.ast import Expr
from sdqlite.fad import is_discrete
from sdqlite.gradient import gradient
from sdqlite.pipeline import Limits, pipeline
from sdqlite.typecheck import typecheck
from semantics.interp import evaluate
from semantics.values import FRACTION, Value, values_equal

LIMITS = Limits(iter_limit=3, node_limit=2000, time_limit=20.0)


@given(rewrite_sites(), st.data())
def test_every_stage_keeps_the_meaning(site: tuple[Generated, Expr], data: st.DataObject
                                       ) -> None:
    g, elab = site
    reals = sorted(x for x, t in g.ctx.items() if not is_discrete(t))
    wrt = data.draw(st.sampled_from([None, *reals]))
    env = data.draw(environments(g.ctx, exact=True))
    primal = evaluate(elab, env, FRACTION)
    target = primal
    if wrt is not None:
        grad, _ = typecheck(gradient(elab, wrt, g.ctx), g.ctx)
        target = evaluate(grad, env, FRACTION)
    differentiated = False
    for stage in pipeline(elab, g.ctx, wrt, LIMITS):
        differentiated |= stage.name.startswith("AD")
        want = target if differentiated else primal
        got = evaluate(typecheck(stage.program, g.ctx)[0], env, FRACTION)
        assert values_equal(got, want, rel_tol=1e-9, abs_tol=1e-12), stage.name
        if "cost after" in stage.report:
            assert stage.report["cost after"] <= stage.report["cost before"]  # type: ignore[operator]


@given(sized_programs(), sized_environments())
def test_the_pipeline_keeps_the_gradient_on_inputs_obeying_declared_sizes(
        case: tuple[Expr, str], env: dict[str, Value]) -> None:
    """The same for Γ with declared sizes (a dense x of size n, a dense m×n X2, other
    layers below m and n) and ρ obeying them, differentiated w.r.t. x or X2: there,
    lookups within the extents apply."""
    e, wrt = case
    want = evaluate(typecheck(gradient(e, wrt, SIZED_CTX), SIZED_CTX)[0], env, FRACTION)
    stages = pipeline(e, SIZED_CTX, wrt, LIMITS)
    for stage in stages[next(i for i, s in enumerate(stages) if s.name.startswith("AD")):]:
        got = evaluate(typecheck(stage.program, SIZED_CTX)[0], env, FRACTION)
        assert values_equal(got, want, rel_tol=1e-9, abs_tol=1e-12), stage.name

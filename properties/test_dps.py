"""Destination-passing style keeps meaning (§6, "Destination-Passing Style & C++ Code
Generation"; ``codegen/dps.py``).

For generated Γ ⊢ e : T (Physical SDQLite: every construct, gradients included) and
ρ ∈ ⟦Γ⟧, the statements of ``lower(e)`` add exactly ⟦e⟧(ρ) into the destination, with
DPS (``dest[k] += v`` pushed into the innermost loop) and without it, computed over the
rationals.  DPS sums in another order than the interpreter, so where dense arrays are
stored inside dictionaries the two agree pointwise (``inner_extents_forgotten``: an
all-zero array entry is dropped with its extent); everywhere else exactly.  The
statements' expressions are pure (no ``sum``/``let``), so the emitter can print each as
one C++ expression.
"""

from hypothesis import given
from hypothesis import strategies as st

from codegen.dps import Loop, Lowered, Stmt, When, lower
from codegen.execute import execute
from properties.generators import Generated, programs_with_env
from sdqlite.ast import Let, Sum, subterms
from sdqlite.typecheck import typecheck
from semantics.interp import evaluate
from semantics.values import FRACTION, Value, inner_extents_forgotten


def _exprs(stmts: tuple[Stmt, ...]) -> list[object]:
    out: list[object] = []
    for s in stmts:
        out += [getattr(s, f) for f in ("value", "cond", "dom", "left", "right")
                if hasattr(s, f)]
        out += [k for d in (getattr(s, "dest", None),) if d is not None for k in d.keys]
        if isinstance(s, Loop | When):
            out += _exprs(s.body)
    return out


def _pure(low: Lowered) -> bool:
    return not any(isinstance(t, Sum | Let) for e in _exprs(low.body)
                   for t in subterms(e))  # type: ignore[arg-type]


@given(programs_with_env(exact=True), st.booleans())
def test_lowered_statements_add_the_programs_value(case: tuple[Generated, dict[str, Value]],
                                                   dps: bool) -> None:
    g, env = case
    elab, t = typecheck(g.expr, g.ctx)
    low = lower(elab, g.ctx, t, dps=dps)
    assert _pure(low)
    want = evaluate(elab, env, FRACTION)
    got = execute(low, env, FRACTION)
    assert inner_extents_forgotten(got) == inner_extents_forgotten(want)


"""Correctness of forward-mode AD against the sympy oracle (§6.3–6.4).

* Theorem thm:simple-fad-correct (scalar FAD computes differentials): for generated
  Γ ⊢ e : T of Logical SDQLite, inputs ρ and tangent directions v (on the stored
  entries of each input), ⟦F[e]⟧(ρ, v) = J_ρ⟦e⟧ · v, where J · v is computed by the
  oracle (the interpreter on sympy symbols, ``sympy.diff``).  Exact over the rationals
  when e has no unary operation, to 1e-9 relative otherwise.
* Tensorized FAD theorem: ⟦gradient e x⟧ρ equals the oracle's Jacobian of ⟦e⟧ w.r.t.
  the stored entries of x, for x of order 0–2 and outputs of order 0–2; and D_τ[e] with
  an arbitrary seed S : τ_x ⊗ τ for x' (zero for the other inputs) equals J · S.
* The oracle itself agrees with central finite differences.
"""

from fractions import Fraction
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from properties.generators import LOGICAL, Generated, environments, programs, seeds
from sdqlite.anf import anf
from sdqlite.ast import UnOp, free_vars, subterms
from sdqlite.fad import fad, is_discrete, tangent_context, tangent_type
from sdqlite.gradient import gradient
from sdqlite.typecheck import typecheck
from sdqlite.types import REAL, DictT, Type, order, otimes, tensor
from semantics.interp import evaluate
from semantics.oracle import contract, directional, finite_jacobian, jacobian
from semantics.values import FRACTION, values_equal

logical = programs(lang=LOGICAL, max_depth=3)
#: programs with a real output (order 0-2), for the Jacobian statements
real_valued = st.sampled_from([REAL, tensor(1), tensor(2)]).flatmap(
    lambda t: programs(lang=LOGICAL, type=t, max_depth=3))


def _agree(got: Any, want: Any, g: Generated) -> bool:
    exact = not any(isinstance(s, UnOp) for s in subterms(g.expr))
    if exact:
        return values_equal(got, want)
    return values_equal(got, want, rel_tol=1e-9, abs_tol=1e-12)


@given(logical, st.data())
def test_scalar_fad_computes_the_differential(g: Generated, data: st.DataObject) -> None:
    elab, t = typecheck(g.expr, g.ctx)
    env = data.draw(environments(g.ctx, exact=True))
    dirs = {x: data.draw(seeds(env[x], s, REAL)) for x, s in g.ctx.items()
            if not is_discrete(s)}
    tangent, names = fad(anf(elab) if data.draw(st.booleans()) else elab, g.ctx)
    tan_env = {names[x]: dirs.get(x, Fraction(0)) for x in g.ctx}
    d_elab, _ = typecheck(tangent, tangent_context(g.ctx, REAL, names))
    got = evaluate(d_elab, {**env, **tan_env}, FRACTION)
    want = directional(elab, g.ctx, t, env, dirs)
    assert _agree(got, want, g), (got, want)


def _real_input(g: Generated, data: st.DataObject) -> str:
    """A real input to differentiate by: one the program uses, where there is one."""
    xs = sorted(x for x, s in g.ctx.items() if not is_discrete(s))
    used = [x for x in xs if x in free_vars(g.expr)]
    return str(data.draw(st.sampled_from(used or xs)))


@given(real_valued, st.data())
def test_gradient_is_the_jacobian(g: Generated, data: st.DataObject) -> None:
    elab, t = typecheck(g.expr, g.ctx)
    x = _real_input(g, data)
    env = data.draw(environments(g.ctx, exact=True))
    grad, _ = typecheck(gradient(elab, x, g.ctx), g.ctx)
    got = evaluate(grad, env, FRACTION)
    want = jacobian(elab, g.ctx, t, env, x)
    assert _agree(got, want, g), (got, want)


@given(real_valued, st.sampled_from([REAL, tensor(1), tensor(2)]), st.data())
def test_tensorized_fad_applies_the_jacobian_to_a_seed(
        g: Generated, tau: Type, data: st.DataObject) -> None:
    elab, t = typecheck(g.expr, g.ctx)
    x = _real_input(g, data)
    env = data.draw(environments(g.ctx, exact=True))
    seed = data.draw(seeds(env[x], g.ctx[x], tau))
    tangent, names = fad(elab, g.ctx, tau)
    tan_env = {names[v]: (seed if v == x else _zero(s, tau)) for v, s in g.ctx.items()}
    d_elab, _ = typecheck(tangent, tangent_context(g.ctx, tau, names))
    got = evaluate(d_elab, {**env, **tan_env}, FRACTION)
    jac = jacobian(elab, g.ctx, t, env, x)
    jac_t, seed_t = otimes(t, g.ctx[x]), otimes(g.ctx[x], tau)
    assert jac_t is not None and seed_t is not None
    want = contract(jac, jac_t, order(t), seed, seed_t, order(g.ctx[x]),
                    tangent_type(t, tau))
    assert _agree(got, want, g), (got, want)


def _zero(s: Type, tau: Type) -> Any:
    tt = tangent_type(s, tau)
    return {} if isinstance(tt, DictT) else Fraction(0)


@given(real_valued, st.data())
def test_oracle_agrees_with_finite_differences(g: Generated, data: st.DataObject) -> None:
    elab, t = typecheck(g.expr, g.ctx)
    x = _real_input(g, data)
    env = data.draw(environments(g.ctx, exact=True))
    exact = jacobian(elab, g.ctx, t, env, x)
    numeric = finite_jacobian(elab, g.ctx, t, env, x)
    assert values_equal(exact, numeric, rel_tol=1e-4, abs_tol=1e-5), (exact, numeric)

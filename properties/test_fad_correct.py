"""Correctness of forward-mode AD against the sympy oracle (§6.3–6.4), at generic points.

* Theorem thm:simple-fad-correct (scalar FAD computes differentials): for generated
  Γ ⊢ e : T of Logical SDQLite, inputs ρ and tangent directions v (on the stored
  entries of each input), ⟦F[e]⟧(ρ, v) = J_ρ⟦e⟧ · v.
* Tensorized FAD theorem: ⟦gradient e x⟧ρ equals the oracle's Jacobian of ⟦e⟧ w.r.t.
  the stored entries of x, for x of order 0–2 and outputs of order 0–2; and D_τ[e] with
  an arbitrary seed S : τ_x ⊗ τ for x' (zero for the other inputs) equals J · S, also
  for products of two vectors (rule [mul]'s ``*^T[τ]`` with both orders positive).
* The oracle itself agrees with central finite differences.

Each statement is checked on Logical SDQLite (the paper's setting) and again on Physical
SDQLite with dense inputs, whose gradients cover every position, zeros included.

Both sides are evaluated at a *generic point* (``semantics.oracle``: every input entry a
symbol, the point substituted at the end), exactly over the rationals when e has no
unary operation and to 1e-9 relative otherwise.  At a non-generic point, where an
intermediate entry cancels to exactly zero, sparse AD differentiates along the smaller
support: ``tests/test_differentiation.py`` pins that behaviour down.
"""

from fractions import Fraction
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from properties.generators import (
    DENSE_REAL,
    LOGICAL,
    PHYSICAL,
    SPARSE1,
    SPARSE2,
    Draw,
    Generated,
    Lang,
    contexts,
    environments,
    programs,
    seeds,
)
from sdqlite.ad.anf import anf
from sdqlite.ad.fad import fad, tangent_context
from sdqlite.ad.gradient import checked, gradient
from sdqlite.check.typecheck import typecheck
from sdqlite.syntax.ast import (
    BoolConst,
    If,
    Let,
    Mul,
    RealConst,
    Sum,
    UnOp,
    Var,
    free_vars,
    subterms,
)
from sdqlite.syntax.types import (
    REAL,
    DictT,
    Type,
    is_discrete,
    order,
    otimes,
    sparse,
    tangent_type,
    tensor,
)
from semantics.oracle import (
    contract,
    directional,
    evaluate_generic,
    finite_jacobian,
    jacobian,
)
from semantics.values import Value, values_equal

Env = dict[str, Value]
#: output types of the Jacobian statements, by ``Lang.physical``
REAL_OUT = {False: [REAL, tensor(1), tensor(2)], True: [REAL, tensor(1), DENSE_REAL]}


def _programs(lang: Lang) -> st.SearchStrategy[Generated]:
    return programs(lang=lang, max_depth=3)


def _real_valued(lang: Lang) -> st.SearchStrategy[Generated]:
    """Programs with a real output (order 0-2), for the Jacobian statements."""
    return st.sampled_from(REAL_OUT[lang.physical]).flatmap(
        lambda t: programs(lang=lang, type=t, max_depth=3))


def _agree(got: Any, want: Any, g: Generated) -> bool:
    if not any(isinstance(s, UnOp) for s in subterms(g.expr)):
        return values_equal(got, want)
    return values_equal(got, want, rel_tol=1e-9, abs_tol=1e-12)


def _real_input(draw: Draw, g: Generated) -> str:
    """A real input to differentiate by: one the program uses, where there is one."""
    xs = sorted(x for x, s in g.ctx.items() if not is_discrete(s))
    used = [x for x in xs if x in free_vars(g.expr)]
    return str(draw(st.sampled_from(used or xs)))


ScalarCase = tuple[Generated, Env, Env, bool]


@st.composite
def scalar_cases(draw: Draw, lang: Lang = LOGICAL) -> ScalarCase:
    """(Γ ⊢ e, ρ, directions v, whether to run ANF first)."""
    g = draw(_programs(lang))
    env = draw(environments(g.ctx, exact=True))
    dirs = {x: draw(seeds(env[x], s, REAL)) for x, s in g.ctx.items() if not is_discrete(s)}
    return g, env, dirs, draw(st.booleans())


# Shrunk: the inner row sum cancels at entry 4 (2 + -2) on these numbers; on them sparse
# AD drops the entry's tangent — the theorem holds at generic points (see module doc).
CANCELLING: ScalarCase = (
    Generated({"x": SPARSE2},
              Sum("_", "v1'", Mul(Sum("k2'", "v3'", Var("x"), Var("v3'")), RealConst(1.5)),
                  Var("v1'")), REAL),
    {"x": {0: {0: Fraction(1), 4: Fraction(2)}, 1: {4: Fraction(-2)}}},
    {"x": {0: {0: Fraction(1), 4: Fraction(1)}, 1: {4: Fraction(1)}}},
    False,
)


# A let rebinding the input it reads: D[let x = x * x in x] at x = 3 is 6, not the 18
# of D[x * x] read under the rebinding (x = 9).
SELF_SHADOWING: ScalarCase = (
    Generated({"x": REAL}, Let("x", Mul(Var("x"), Var("x")), Var("x")), REAL),
    {"x": Fraction(3)}, {"x": Fraction(1)}, False)


# Shrunk (issue 30, names): a sum's key named like the input its domain reads; D[e1](k)
# under the binder read the key (an int) for the input: D[e1] is now bound outside.
CAPTURED_DOMAIN: ScalarCase = (
    Generated({"x": REAL, "V1": SPARSE1},
              Sum("V1", "v", If(BoolConst(False), Mul(Var("x"), Var("V1"))), RealConst(1.5)),
              REAL),
    {"x": Fraction(1), "V1": {}}, {"x": Fraction(1), "V1": {}}, False)


@given(scalar_cases())
@example(CANCELLING)
@example(SELF_SHADOWING)
@example(CAPTURED_DOMAIN)
def test_scalar_fad_computes_the_differential(case: ScalarCase) -> None:
    _check_scalar(case)


@given(scalar_cases(PHYSICAL))
def test_scalar_fad_on_physical_programs(case: ScalarCase) -> None:
    _check_scalar(case)


def _check_scalar(case: ScalarCase) -> None:
    g, env, dirs, use_anf = case
    elab, t = checked(g.expr, g.ctx)
    tangent, names = fad(anf(elab) if use_anf else elab, g.ctx)
    tan_ctx = tangent_context(g.ctx, REAL, names)
    d_elab, dt = typecheck(tangent, tan_ctx)
    tan_env = {names[x]: dirs.get(x, Fraction(0)) for x in g.ctx}
    got = evaluate_generic(d_elab, tan_ctx, dt, {**env, **tan_env})
    want = directional(elab, g.ctx, t, env, dirs)
    assert _agree(got, want, g), (got, want)


GradientCase = tuple[Generated, str, Env]


@st.composite
def gradient_cases(draw: Draw, lang: Lang = LOGICAL) -> GradientCase:
    g = draw(_real_valued(lang))
    return g, _real_input(draw, g), draw(environments(g.ctx, exact=True))


@given(gradient_cases())
def test_gradient_is_the_jacobian(case: GradientCase) -> None:
    _check_gradient(case)


@given(gradient_cases(PHYSICAL))
def test_gradient_is_the_jacobian_with_dense_inputs(case: GradientCase) -> None:
    _check_gradient(case)


def _check_gradient(case: GradientCase) -> None:
    g, x, env = case
    elab, t = checked(g.expr, g.ctx)
    grad, gt = typecheck(gradient(elab, x, g.ctx), g.ctx)
    got = evaluate_generic(grad, g.ctx, gt, env)
    assert _agree(got, jacobian(elab, g.ctx, t, env, x), g)


SeedCase = tuple[Generated, str, Type, Env, Value]


@st.composite
def seed_cases(draw: Draw, lang: Lang = LOGICAL) -> SeedCase:
    g, x, env = draw(gradient_cases(lang))
    tau = draw(st.sampled_from([REAL, tensor(1), tensor(2)]))
    return g, x, tau, env, draw(seeds(env[x], g.ctx[x], tau))


@given(seed_cases())
def test_tensorized_fad_applies_the_jacobian_to_a_seed(case: SeedCase) -> None:
    _check_seed(case)


@given(seed_cases(PHYSICAL))
def test_tensorized_fad_on_physical_programs(case: SeedCase) -> None:
    _check_seed(case)


@st.composite
def product_seed_cases(draw: Draw) -> SeedCase:
    """Seed cases of a product of two vectors, ``e1 * e2 : tensor 2``: rule [mul]'s
    ``D[e1] *^T[τ] e2`` with both orders positive, which moves τ's indices past e2's (the
    generated programs reach it rarely)."""
    ctx = draw(contexts(lang=LOGICAL))
    e1, e2 = (draw(programs(ctx, tensor(1), max_depth=2, lang=LOGICAL)).expr
              for _ in range(2))
    g = Generated(ctx, Mul(e1, e2), tensor(2))
    x, env = _real_input(draw, g), draw(environments(ctx, exact=True))
    tau = draw(st.sampled_from([tensor(1), tensor(2)]))
    return g, x, tau, env, draw(seeds(env[x], ctx[x], tau))


@given(product_seed_cases())
def test_tensorized_fad_of_a_product_of_tensors(case: SeedCase) -> None:
    _check_seed(case)


def _check_seed(case: SeedCase) -> None:
    g, x, tau, env, seed = case
    elab, t = checked(g.expr, g.ctx)
    tangent, names = fad(elab, g.ctx, tau)
    tan_ctx = tangent_context(g.ctx, tau, names)
    d_elab, dt = typecheck(tangent, tan_ctx)
    tan_env = {names[v]: (seed if v == x else _zero(s, tau)) for v, s in g.ctx.items()}
    got = evaluate_generic(d_elab, tan_ctx, dt, {**env, **tan_env})
    jac = jacobian(elab, g.ctx, t, env, x)
    jac_t, seed_t = tangent_type(t, sparse(g.ctx[x])), otimes(sparse(g.ctx[x]), tau)
    assert seed_t is not None
    want = contract(jac, jac_t, order(t), seed, seed_t, order(g.ctx[x]),
                    tangent_type(t, tau))
    assert _agree(got, want, g), (got, want)


def _zero(s: Type, tau: Type) -> Any:
    return {} if isinstance(tangent_type(s, tau), DictT) else Fraction(0)


# Shrunk: the row sum of x cancels at entry 1 (-1/3 + 1/3), so the number of its entries,
# and so the derivative by V1, jumps there; finite differences now use a generic point too.
COUNTING: GradientCase = (
    Generated({"x": SPARSE2, "V1": REAL, "M": REAL},
              Sum("_", "_", Sum("k1'", "v2'", Var("x"), Var("v2'")), Var("V1")), REAL),
    "V1",
    {"x": {0: {1: Fraction(-1, 3)}, 1: {0: Fraction(1), 1: Fraction(1, 3)}},
     "V1": Fraction(1), "M": Fraction(1)})


@given(st.sampled_from([LOGICAL, PHYSICAL]).flatmap(gradient_cases))
@example(COUNTING)
def test_oracle_agrees_with_finite_differences(case: GradientCase) -> None:
    g, x, env = case
    elab, t = checked(g.expr, g.ctx)
    exact = jacobian(elab, g.ctx, t, env, x)
    numeric = finite_jacobian(elab, g.ctx, t, env, x)
    assert values_equal(exact, numeric, rel_tol=1e-4, abs_tol=1e-5), (exact, numeric)

"""The passes preserve meaning and type (§5.2, Fig. fig:trans, and the lookup at an
iterated key).

For generated Γ ⊢ e : T — of Logical and of Physical SDQLite, and differentiated
(``gradient e x``) — sparsity propagation and multiplication normalization return a
program of type T with ⟦pass(e)⟧ρ = ⟦e⟧ρ for generated ρ (exactly over the rationals,
to 1e-9 where a unary operation computes in floats).  Each pass reaches a normal form:
after normalization no normalization rule applies anywhere (every product of a sparse
tensor has become a sum of scalar products), and after sparsity propagation no sparsity
rule applies (in particular no ``let x = zero[D]`` is left).

The lookup at an iterated key keeps the meaning of generated programs and gradients, and
on inputs that obey their declared sizes, of gradients that read x at keys iterated from
sized layers: of x's size n (where the declared-extent reason applies and fires) and of
another size (M's row keys, of size m: where it must not fire).
"""

from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from properties.generators import SIZED_CTX, Draw, Generated, sized_environments, sized_programs
from properties.test_rules import assert_same_meaning, places, rewrite_sites
from sdqlite.ast import Expr
from sdqlite.errors import DataError
from sdqlite.gradient import gradient
from sdqlite.parser import parse_expr
from sdqlite.passes import iterated_key_lookup, normalize_multiplication, sparsity_propagation
from sdqlite.rules import NORMALIZATION, SPARSITY, family
from sdqlite.typecheck import Ctx, typecheck
from sdqlite.types import erase
from semantics.extents import check_extents
from semantics.interp import evaluate
from semantics.values import FRACTION, Value, dense, values_equal


@given(rewrite_sites(), st.data())
def test_sparsity_propagation_is_sound(site: tuple[Generated, Expr],
                                       data: st.DataObject) -> None:
    g, elab = site
    out = sparsity_propagation(elab, g.ctx).program
    assert_same_meaning(site, out, data)
    _assert_normal_form(out, g.ctx, SPARSITY)


@given(rewrite_sites(), st.data())
def test_normalization_is_sound_and_leaves_scalar_products(site: tuple[Generated, Expr],
                                                          data: st.DataObject) -> None:
    g, elab = site
    out = normalize_multiplication(elab, g.ctx).program
    assert_same_meaning(site, out, data)
    _assert_normal_form(out, g.ctx, NORMALIZATION)


def _assert_normal_form(e: Expr, ctx: Ctx, name: str) -> None:
    for sub_e, scope in places(e, ctx):
        for rule in family(name):
            assert rule.match(sub_e, scope) is None, f"{rule.name} still applies to {sub_e}"


@given(rewrite_sites(), st.data())
def test_iterated_key_lookup_is_sound(site: tuple[Generated, Expr], data: st.DataObject) -> None:
    g, elab = site
    assert_same_meaning(site, iterated_key_lookup(elab, g.ctx).program, data)


def test_iterated_key_lookup_fires_on_generated_gradients() -> None:
    fired: Counter[str] = Counter()

    @settings(max_examples=500, derandomize=True, database=None)
    @given(rewrite_sites())
    def collect(site: tuple[Generated, Expr]) -> None:
        g, elab = site
        fired.update(iterated_key_lookup(elab, g.ctx).fired)

    collect()
    assert fired["iterated-key-lookup (same-dictionary)"] > 0


# ---- declared extents ---------------------------------------------------------------------

@st.composite
def sized_gradients(draw: Draw) -> Expr:
    """A program over SIZED_CTX differentiated w.r.t. a dense input (x or X2)."""
    elab, wrt = draw(sized_programs())
    return typecheck(gradient(elab, wrt, SIZED_CTX), SIZED_CTX)[0]


@given(sized_gradients(), sized_environments())
def test_lookup_at_a_key_within_a_declared_extent_is_sound(e: Expr,
                                                             env: dict[str, Value]) -> None:
    out = iterated_key_lookup(e, SIZED_CTX).program
    assert typecheck(out, SIZED_CTX)[1] == typecheck(e, SIZED_CTX)[1]
    assert values_equal(evaluate(e, env, FRACTION), evaluate(out, env, FRACTION),
                        rel_tol=1e-9, abs_tol=1e-12)


def test_lookup_within_a_declared_extent_fires_on_generated_gradients() -> None:
    fired: Counter[str] = Counter()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(sized_gradients())
    def collect(e: Expr) -> None:
        fired.update(iterated_key_lookup(e, SIZED_CTX).fired)

    collect()
    assert fired["iterated-key-lookup (declared-extent)"] >= 10, fired


def test_the_declared_extent_is_needed() -> None:
    """With V1's key outside x's extent (data the declaration forbids), the rewritten
    gradient differs from the original: the sizes are what make the rewrite sound."""
    e, _ = typecheck(parse_expr("gradient (sum(<i, a> in V1) x(i) * a) x"), SIZED_CTX)
    result = iterated_key_lookup(e, SIZED_CTX)
    assert result.fired["iterated-key-lookup (declared-extent)"] == 1
    env: dict[str, Value] = {"x": dense([Fraction(1), Fraction(2)]), "V1": {5: Fraction(3)}}
    with pytest.raises(DataError, match="outside int"):
        check_extents({x: (SIZED_CTX[x], env[x], None) for x in env})
    assert not values_equal(evaluate(e, env, FRACTION), evaluate(result.program, env, FRACTION))
    unsized = {x: erase(t) for x, t in SIZED_CTX.items()}
    assert not iterated_key_lookup(e, unsized).fired  # without sizes, nothing to go on

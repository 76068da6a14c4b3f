"""The passes preserve meaning and type (§5.2, Fig. fig:trans, and the lookup at an
iterated key).

For generated Γ ⊢ e : T — of Logical and of Physical SDQLite, and differentiated
(``gradient e x``) — sparsity propagation and multiplication normalization return a
program of type T with ⟦pass(e)⟧ρ = ⟦e⟧ρ for generated ρ (exactly over the rationals,
to 1e-9 where a unary operation computes in floats).  Each pass reaches a normal form:
after normalization no normalization rule applies anywhere (every product of a sparse
tensor has become a sum of scalar products), and after sparsity propagation no sparsity
rule applies (in particular no ``let x = zero[D]`` is left).
"""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from properties.generators import Generated
from properties.test_rules import assert_same_meaning, places, rewrite_sites
from sdqlite.ast import Expr
from sdqlite.passes import iterated_key_lookup, normalize_multiplication, sparsity_propagation
from sdqlite.rules import NORMALIZATION, SPARSITY, family
from sdqlite.typecheck import Ctx


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
    assert fired["iterated-key-lookup"] > 0

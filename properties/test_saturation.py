"""Equality saturation with the SDQLite rules (``sdqlite.saturation``) is sound.

* de Bruijn encoding is faithful: ⟦decode(encode(e))⟧ρ = ⟦e⟧ρ, and the round trip is
  α-equivalent to e (binders renamed).
* Every saturation rule, run alone to saturation, and all of them together, followed by
  extraction: ``optimize(e)`` has e's type and e's value on generated ρ — for generated
  programs of both fragments and differentiated ones; extraction never returns a program
  costlier than its input under the cost model.
* Every rule fires on some generated program.
"""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from properties.generators import Generated, environments
from properties.test_rules import rewrite_sites
from sdqlite.ast import Expr
from sdqlite.names import NameSupply, alpha_normal, names_in
from sdqlite.saturation import SATURATION_RULES, decode, encode, optimize
from sdqlite.typecheck import typecheck
from semantics.interp import evaluate
from semantics.values import FRACTION, values_equal

Site = tuple[Generated, Expr]
LIMITS = {"iter_limit": 4, "node_limit": 3000, "time_limit": 20.0}


def _same_meaning(site: Site, out: Expr, data: st.DataObject) -> None:
    g, elab = site
    _, t = typecheck(elab, g.ctx)
    _, t2 = typecheck(out, g.ctx)
    assert t2 == t
    env = data.draw(environments(g.ctx, exact=True))
    assert values_equal(evaluate(elab, env, FRACTION), evaluate(out, env, FRACTION),
                        rel_tol=1e-9, abs_tol=1e-12)


@given(rewrite_sites(), st.data())
def test_de_bruijn_round_trip(site: Site, data: st.DataObject) -> None:
    g, elab = site
    back = decode(encode(elab, g.ctx), NameSupply(names_in(elab) | set(g.ctx)))
    assert alpha_normal(back) == alpha_normal(elab)
    _same_meaning(site, typecheck(back, g.ctx)[0], data)


@given(rewrite_sites(), st.sampled_from(sorted(SATURATION_RULES)), st.data())
def test_each_rule_alone_is_sound(site: Site, rule: str, data: st.DataObject) -> None:
    g, elab = site
    result = optimize(elab, g.ctx, rules=[rule], **LIMITS)  # type: ignore[arg-type]
    assert result.cost_after <= result.cost_before
    _same_meaning(site, result.program, data)


@given(rewrite_sites(), st.data())
def test_saturation_and_extraction_are_sound(site: Site, data: st.DataObject) -> None:
    g, elab = site
    result = optimize(elab, g.ctx, **LIMITS)  # type: ignore[arg-type]
    assert result.cost_after <= result.cost_before
    _same_meaning(site, result.program, data)


def test_every_saturation_rule_fires() -> None:
    fired: Counter[str] = Counter()

    @settings(max_examples=150, derandomize=True, database=None)
    @given(rewrite_sites())
    def collect(site: Site) -> None:
        g, elab = site
        fired.update(optimize(elab, g.ctx, **LIMITS).report.fired)  # type: ignore[arg-type]

    collect()
    never = sorted(set(SATURATION_RULES) - set(fired))
    assert not never, f"saturation rules never fired: {never}"

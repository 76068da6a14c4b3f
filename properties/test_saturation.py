"""Equality saturation with the SDQLite rules (``sdqlite.saturation``) is sound.

* de Bruijn encoding is faithful: ⟦decode(encode(e))⟧ρ = ⟦e⟧ρ, and the round trip is
  α-equivalent to e (binders renamed).
* Every saturation rule, run alone to saturation, and all of them together, followed by
  extraction: ``optimize(e)`` has e's type and e's value on generated ρ — for generated
  programs of both fragments and differentiated ones; extraction never returns a program
  costlier than its input under the cost model.
* Every rule fires on some generated program.
* Every semantic guard is needed: without it the rule rewrites some instance wrongly
  (``SATURATION_GUARD_COUNTEREXAMPLES``).
"""

from collections import Counter
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from properties.generators import Generated
from properties.test_rules import assert_same_meaning, rewrite_sites
from sdqlite.ast import Expr
from sdqlite.egraph import EGraph, Rewrite, ematch, extract
from sdqlite.errors import SDQLiteError
from sdqlite.names import NameSupply, alpha_normal, names_in
from sdqlite.parser import parse_expr
from sdqlite.saturation import (
    SATURATION_RULES,
    Info,
    SDQLiteAnalysis,
    cost_model,
    decode,
    encode,
    optimize,
)
from sdqlite.typecheck import typecheck
from sdqlite.types import REAL, DictT, Type, tensor
from semantics.interp import evaluate
from semantics.values import FRACTION

Site = tuple[Generated, Expr]
LIMITS = {"iter_limit": 4, "node_limit": 3000, "time_limit": 20.0}


@given(rewrite_sites(), st.data())
def test_de_bruijn_round_trip(site: Site, data: st.DataObject) -> None:
    g, elab = site
    back = decode(encode(elab, g.ctx), NameSupply(names_in(elab) | set(g.ctx)))
    assert alpha_normal(back) == alpha_normal(elab)
    assert_same_meaning(site, typecheck(back, g.ctx)[0], data)


@given(rewrite_sites(), st.sampled_from(sorted(SATURATION_RULES)), st.data())
def test_each_rule_alone_is_sound(site: Site, rule: str, data: st.DataObject) -> None:
    g, elab = site
    result = optimize(elab, g.ctx, rules=[rule], **LIMITS)  # type: ignore[arg-type]
    assert result.cost_after <= result.cost_before
    assert_same_meaning(site, result.program, data)


@given(rewrite_sites(), st.data())
def test_saturation_and_extraction_are_sound(site: Site, data: st.DataObject) -> None:
    g, elab = site
    result = optimize(elab, g.ctx, **LIMITS)  # type: ignore[arg-type]
    assert result.cost_after <= result.cost_before
    assert_same_meaning(site, result.program, data)


def test_every_saturation_rule_fires() -> None:
    fired: Counter[str] = Counter()

    @settings(max_examples=400, derandomize=True, database=None)
    @given(rewrite_sites())
    def collect(site: Site) -> None:
        g, elab = site
        fired.update(optimize(elab, g.ctx, **LIMITS).report.fired)  # type: ignore[arg-type]

    collect()
    never = sorted(set(SATURATION_RULES) - set(fired))
    assert not never, f"saturation rules never fired: {never}"


# rule name -> (Γ, an instance its semantic guard rejects, where the rule is wrong)
SATURATION_GUARD_COUNTEREXAMPLES: dict[str, tuple[dict[str, Type], str]] = {
    # b1 is zero, so the inner dictionary is empty; fused, the body 1.0 counts V's entries
    "sum-sum-vert-fuse-1": ({"V": tensor(1)},
                            "sum(<k1, v1> in sum(<k2, v2> in V) {k2 -> v2 * 0.0}) 1.0"),
    # the identity map turns a dense array into a dictionary: another type
    "sum-sing": ({"a": DictT(REAL, dense=True)}, "sum(<k, v> in a) {k -> v}"),
    # b * {a -> c} = {a -> b * c} only for a scalar b: a dictionary b reorders the indices
    "sing-mult-3": ({"V": tensor(1), "W": tensor(1)}, "{0 -> V * W}"),
    # shrunk by the thorough profile: {1 -> [0]} is {} (an all-zero entry is dropped), so
    # the lookup is the empty array, while `if 1 = 1 then [0]` is [0]
    "lookup-single": ({"z": DictT(REAL, dense=True)}, "{1 -> z}(1)"),
    # {0 -> [0, 0]} is dropped, but inside the sum [0, 0] pads [1] to two positions
    "sum-fact-3": ({"W2": DictT(DictT(REAL, dense=True)), "W": tensor(1)},
                   "sum(<k, v> in W2) {0 -> v * W(k)}"),
    "sum-fact-inv-3": ({"W2": DictT(DictT(REAL, dense=True)), "W": tensor(1)},
                       "{0 -> sum(<k, v> in W2) v * W(k)}"),
}


def test_saturation_guards_are_needed() -> None:
    from semantics.values import dense

    env = {"V": {0: Fraction(2), 1: Fraction(3)}, "W": {0: Fraction(5)},
           "a": dense([Fraction(1), Fraction(0)]), "z": dense([Fraction(0)])}
    env_w = {"W2": {0: dense([Fraction(1), Fraction(1)]), 1: dense([Fraction(1)])},
             "W": {1: Fraction(1)}}
    for name, (ctx, text) in SATURATION_GUARD_COUNTEREXAMPLES.items():
        _, rw = SATURATION_RULES[name]
        e, t = typecheck(parse_expr(text), ctx)
        g: EGraph[Info] = EGraph(SDQLiteAnalysis())
        root = g.add_term(encode(e, ctx))
        subst = next(ematch(g, rw.lhs, root), None)
        assert subst is not None, f"{name} should match {text}"
        assert rw.condition is not None and not rw.condition(g, root, subst), name
        unguarded = Rewrite(rw.name, rw.lhs, rw.rhs)  # the same rule, no condition
        new = unguarded.apply(g, root, subst)
        assert new is not None, name
        program = decode(extract(g, new, cost_model(g))[1], NameSupply(names_in(e)))
        env_here = {x: (env_w if "W2" in ctx else env)[x] for x in ctx}
        try:
            r_elab, rt = typecheck(program, ctx)
        except SDQLiteError:
            continue  # ill-typed without the guard: needed
        assert rt != t or evaluate(r_elab, env_here, FRACTION) != evaluate(
            e, env_here, FRACTION), f"{name}: no wrong rewrite without the guard"

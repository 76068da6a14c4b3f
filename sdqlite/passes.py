"""Rewriting passes over the rule table (Fig. fig:trans): sparsity propagation, run after
differentiation, and multiplication normalization.

A pass rewrites bottom-up — the children first, in the typing context of their scope,
then the node, as long as a rule of the family applies — and repeats until nothing
fires.  It takes and returns elaborated programs and reports how often each rule fired.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from sdqlite.ast import Expr, Let, Sum, map_children
from sdqlite.names import NameSupply, names_in
from sdqlite.rules import NORMALIZATION, SPARSITY, Rule, family
from sdqlite.typecheck import Ctx, synth, typecheck
from sdqlite.types import INT, DictT

MAX_ROUNDS = 100


@dataclass
class PassResult:
    program: Expr
    fired: Counter[str]
    rounds: int


def rewrite(e: Expr, ctx: Ctx, rules: tuple[Rule, ...]) -> PassResult:
    """Apply ``rules`` bottom-up until none applies; the result is elaborated again."""
    names = NameSupply(names_in(e) | set(ctx))
    fired: Counter[str] = Counter()
    rounds = 0
    for rounds in range(1, MAX_ROUNDS + 1):  # noqa: B007 - reported
        before = sum(fired.values())
        e = _bottom_up(e, ctx, rules, names, fired)
        if sum(fired.values()) == before:
            break
    elab, _ = typecheck(e, ctx)
    return PassResult(elab, fired, rounds)


def _bottom_up(e: Expr, ctx: Ctx, rules: tuple[Rule, ...], names: NameSupply,
               fired: Counter[str]) -> Expr:
    def go(x: Expr, scope: Ctx = ctx) -> Expr:
        return _bottom_up(x, scope, rules, names, fired)

    match e:
        case Sum(k, v, dom, body):
            dom2 = go(dom)
            dt = synth(ctx, dom2)[1]
            assert isinstance(dt, DictT)
            inner = {**ctx, **{x: t for x, t in ((k, INT), (v, dt.val)) if x != "_"}}
            e = replace(e, dom=dom2, body=go(body, inner))
        case Let(x, rhs, body):
            rhs2 = go(rhs)
            e = replace(e, rhs=rhs2, body=go(body, {**ctx, x: synth(ctx, rhs2)[1]}))
        case _:
            e = map_children(e, go)
    for rule in rules:
        m = rule.match(e, ctx)
        if m is not None:
            fired[rule.name] += 1
            return _bottom_up(rule.apply(m, names), ctx, rules, names, fired)
    return e


def sparsity_propagation(e: Expr, ctx: Ctx) -> PassResult:
    """Fig. fig:trans, first group, with the constant propagation of ``let x = zero``."""
    return rewrite(e, ctx, family(SPARSITY))


def normalize_multiplication(e: Expr, ctx: Ctx) -> PassResult:
    """Fig. fig:trans, second group: tensor products become sums of scalar products."""
    return rewrite(e, ctx, family(NORMALIZATION))

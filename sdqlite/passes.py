"""Rewriting passes over the rule table (Fig. fig:trans): sparsity propagation, run after
differentiation, and multiplication normalization.

A pass rewrites bottom-up — the children first, in the typing context of their scope,
then the node, as long as a rule of the family applies — and repeats until nothing
fires.  It takes and returns elaborated programs and reports how often each rule fired.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from sdqlite.ast import Expr, Let, Lookup, Single, Sum, Var, free_vars, map_children, subterms
from sdqlite.names import NameSupply, names_in, substitute
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


def iterated_key_lookup(e: Expr, ctx: Ctx) -> PassResult:
    """Lookups at a key that comes from iterating the same dictionary (DESIGN.md: a
    condition "discharged from keys produced by iterating that same range"):

        sum(<i, a> in X) ... (sum(<k, v> in X) {k -> b})(i) ...
          ~>  sum(<i, a> in X) ... b[k := i, v := X(i)] ...

    ``i`` is a stored key of ``X`` and keys are unique, so the lookup finds exactly the
    entry built for ``k = i`` — for a dense ``X`` as for a sparse one.  It is what lets
    the gradient w.r.t. a variable ``x`` of a function linear in ``x`` stop reading the
    values of ``x``: the one-hot ``x'`` looked up at ``x``'s own keys is ``{i -> 1}``.
    Definitions come from ``let`` (``let x' = sum(<k, v> in X) {k -> b} in ...``)."""
    fired: Counter[str] = Counter()
    out = _keys(e, {}, {}, fired)
    return PassResult(typecheck(out, ctx)[0], fired, 1)


def _keys(e: Expr, defs: dict[str, Sum], keys: dict[str, str],
          fired: Counter[str]) -> Expr:
    """``defs``: let-bound names of a sum of singletons over a variable;
    ``keys``: key binder → the variable its sum iterates."""
    def go(x: Expr, d: dict[str, Sum] = defs, k: dict[str, str] = keys) -> Expr:
        return _keys(x, d, k, fired)

    def without(names: set[str]) -> tuple[dict[str, Sum], dict[str, str]]:
        """Forget what a new binder of one of ``names`` shadows."""
        d = {n: s for n, s in defs.items()
             if n not in names and not names & free_vars(s)}
        k = {n: x for n, x in keys.items() if n not in names and x not in names}
        return d, k

    match e:
        case Sum(k, v, dom, body):
            d, ks = without({k, v})
            if isinstance(dom, Var) and k != "_" and dom.name not in (k, v):
                ks = {**ks, k: dom.name}
            return replace(e, dom=go(dom), body=go(body, d, ks))
        case Let(x, rhs, body):
            rhs2 = go(rhs)
            d, ks = without({x})
            if _onehot_like(rhs2):
                d = {**d, x: rhs2}  # type: ignore[dict-item]
            return replace(e, rhs=rhs2, body=go(body, d, ks))
        case Lookup(Var(name), Var(i)) if name in defs and keys.get(i) == _iterated(defs[name]):
            fired["iterated-key-lookup"] += 1
            return _entry(defs[name], i)
        case Lookup(Sum() as s, Var(i)) if _onehot_like(s) and keys.get(i) == _iterated(s):
            fired["iterated-key-lookup"] += 1
            return _entry(s, i)
        case _:
            return map_children(e, go)


def _onehot_like(e: Expr) -> bool:
    """``sum(<k, v> in X) {k -> b}`` for a variable ``X``."""
    return (isinstance(e, Sum) and isinstance(e.dom, Var) and e.key != "_"
            and isinstance(e.body, Single) and e.body.key == Var(e.key))


def _iterated(s: Sum) -> str | None:
    return s.dom.name if isinstance(s.dom, Var) else None


def _entry(s: Sum, i: str) -> Expr:
    """b[k := i, v := X(i)] for ``s = sum(<k, v> in X) {k -> b}``."""
    assert isinstance(s.body, Single)
    b = s.body.val
    bound = {n for t in subterms(b) for n in _binders(t)}
    if i in bound:  # would be captured: rename the key through a let instead
        return Let(s.key, Var(i), b if s.val == "_" else Let(s.val, Lookup(s.dom, Var(i)), b))
    b = substitute(b, s.key, Var(i))
    return b if s.val == "_" else Let(s.val, Lookup(s.dom, Var(i)), b)


def _binders(e: Expr) -> set[str]:
    match e:
        case Sum(k, v):
            return {k, v}
        case Let(x):
            return {x}
    return set()

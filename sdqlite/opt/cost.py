"""STOREL's cost model (``../shared/research/storel-rules.md``): what extraction minimises.

A loop costs its body times a factor, higher over a dictionary than over a dense array
(and 1 over a dictionary of one entry at most by its syntax: a singleton or an empty
one, or a let or a sum made of them, ``Info.one``; not in STOREL's table, which has no
rule that makes one);
an outer product (a product with a dictionary factor) is expensive; a lookup, a let and
a singleton cost a constant.  The figures are STOREL's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sdqlite.opt.analysis import Info, is_one
from sdqlite.opt.egraph import ClassId, EGraph, ENode, Term
from sdqlite.syntax.types import DictT

DENSE_LOOP, DICT_LOOP, OUTER_PRODUCT, SINGLE_LOOP = 200, 1000, 1000, 1


def cost_model(g: EGraph[Info]) -> Callable[[ENode, list[float], ClassId], float]:
    """constant 1, variable 5, lookup 20, let 10, singleton 50, unique 0, others 1 + kids;
    sum: cost(R) + c·(1 + cost(body)), c = 200 over a dense array, 1000 over a dictionary,
    1 over a class with a term of one entry at most (``Info.one``), which is then what
    the class is extracted as (its other terms cost ∞);
    a product with a dictionary factor (an outer product) 1000 + kids."""
    def cost(node: ENode, kids: list[float], cid: ClassId) -> float:
        if g.data(cid).one and not is_one(node.op, [g.data(c) for c in node.children]):
            return math.inf  # a class of one entry at most is extracted as such
        op = node.op
        if isinstance(op, tuple):
            if op[0] in ("bvar", "var"):
                return 5
            if op[0] in ("int", "real", "bool", "zero"):
                return 1
            if op[0] == "keep":
                return kids[0]
            return 1 + sum(kids)
        match op:
            case "sum":
                dom = node.children[0]
                dom_t = g.data(dom).type
                c = DENSE_LOOP if isinstance(dom_t, DictT) and dom_t.dense else DICT_LOOP
                if g.data(dom).one:
                    c = SINGLE_LOOP
                return kids[0] + c * (1 + kids[1])
            case "lookup":
                return 20 + sum(kids)
            case "let":
                return 10 + sum(kids)
            case "single":
                return 50 + sum(kids)
            case "unique":
                return sum(kids)
            case "mul":
                ts = [g.data(c).type for c in node.children]
                outer = any(isinstance(t, DictT) for t in ts)
                return (OUTER_PRODUCT if outer else 1) + sum(kids)
        return 1 + sum(kids)
    return cost

def term_cost(g: EGraph[Info], t: Term,
              cost: Callable[[ENode, list[float], ClassId], float]) -> float:
    """The cost of a term already in ``g`` (its children's classes give their types),
    bottom-up: each sub-term is looked up once."""

    def go(t: Term) -> tuple[ClassId, float]:
        kids = [go(c) for c in t.children]
        node = ENode(t.op, tuple(cid for cid, _ in kids))
        cid = g.lookup(node)
        assert cid is not None, "the term was added to the e-graph"
        return cid, cost(node, [c for _, c in kids], cid)

    return go(t)[1]

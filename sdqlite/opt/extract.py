"""Extraction (egg's ``Extractor``): the cheapest term of an e-class under a cost
function, from the engine of ``sdqlite.opt.egraph``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sdqlite.opt.egraph import ClassId, EGraph, ENode, Term

#: the cost of a node, given its children's costs and the class it is a member of
CostFn = Callable[[ENode, list[float], ClassId], float]


class Extractor:
    """egg's ``Extractor``: the cheapest node of every class under ``cost`` — the least
    fixpoint of best(c) = min over nodes n of c of cost(n, [best(child)...]) — computed
    once, then read by ``find_best`` for any class.

    The table is a snapshot: each entry's node is stored with the children's classes as
    they were, so the terms it builds stay members of their classes however the graph
    grows or merges afterwards (an e-graph never loses a term).  A class added after the
    snapshot is not in it (``in`` says so); a cheaper term added after it is not seen."""

    def __init__(self, egraph: EGraph[Any], cost: CostFn) -> None:
        self.egraph = egraph
        find, parent = egraph.find, egraph.parent
        best: dict[ClassId, tuple[float, ENode]] = {}
        improved: list[ClassId] = []

        def evaluate(cid: ClassId, node: ENode) -> None:
            costs: list[float] = []
            for kid in node.children:  # (canonical, but between a union and a rebuild)
                k = best.get(kid if parent[kid] == kid else find(kid))
                if k is None:
                    return
                costs.append(k[0])
            c = cost(node, costs, cid)
            known = best.get(cid)
            if known is None or c < known[0]:
                children = node.children
                if any(parent[k] != k for k in children):
                    children = tuple(find(k) for k in children)
                best[cid] = (c, node if children is node.children else ENode(node.op, children))
                improved.append(cid)

        for cid, eclass in egraph.classes.items():  # one pass in the order classes were
            for node in eclass.nodes:                # made (children mostly first), then
                evaluate(cid, node)                  # only the parents of what improved
        while improved:
            changed = dict.fromkeys(improved)
            improved.clear()
            for cid in changed:
                for node, up in egraph.classes[find(cid)].parents:
                    evaluate(find(up), node)
        self.best = best
        self._terms: dict[ClassId, Term] = {}  # the terms built so far, shared

    def __contains__(self, cid: ClassId) -> bool:
        return cid in self.best or self.egraph.find(cid) in self.best

    def find_best(self, cid: ClassId) -> tuple[float, Term]:
        """The cheapest term of ``cid``'s class (as of the snapshot) and its cost."""
        if cid not in self.best:
            cid = self.egraph.find(cid)
        if cid not in self.best:
            raise ValueError("no finite-cost term in the class")

        def build(c: ClassId) -> Term:
            term = self._terms.get(c)
            if term is None:
                node = self.best[c][1]
                term = self._terms[c] = Term(node.op, tuple(build(k) for k in node.children))
            return term

        return self.best[cid][0], build(cid)


def extract(egraph: EGraph[Any], root: ClassId, cost: CostFn) -> tuple[float, Term]:
    """The cheapest term of ``root``'s class."""
    return Extractor(egraph, cost).find_best(root)

"""Extraction (egg's ``Extractor``): the cheapest term of an e-class under a cost
function, from the engine of ``sdqlite.opt.egraph``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sdqlite.opt.egraph import ClassId, EGraph, ENode, Term

CostFn = Callable[[ENode, list[float]], float]


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
        find = egraph.find
        best: dict[ClassId, tuple[float, ENode]] = {}
        improved: list[ClassId] = []

        def evaluate(cid: ClassId, node: ENode) -> None:
            kids = [best.get(find(c)) for c in node.children]
            if any(k is None for k in kids):
                return
            c = cost(node, [k[0] for k in kids if k is not None])
            if cid not in best or c < best[cid][0]:
                best[cid] = (c, ENode(node.op, tuple(find(k) for k in node.children)))
                improved.append(cid)

        for cid, eclass in egraph.classes.items():  # one pass in the order classes were
            for node in eclass.nodes:                # made (children mostly first), then
                evaluate(cid, node)                  # only the parents of what improved
        while improved:
            changed = dict.fromkeys(improved)
            improved.clear()
            for cid in changed:
                for node, parent in egraph.classes[find(cid)].parents:
                    evaluate(find(parent), node)
        self.best = best

    def __contains__(self, cid: ClassId) -> bool:
        return cid in self.best or self.egraph.find(cid) in self.best

    def find_best(self, cid: ClassId) -> tuple[float, Term]:
        """The cheapest term of ``cid``'s class (as of the snapshot) and its cost."""
        if cid not in self.best:
            cid = self.egraph.find(cid)
        if cid not in self.best:
            raise ValueError("no finite-cost term in the class")

        def build(c: ClassId) -> Term:
            node = self.best[c][1]
            return Term(node.op, tuple(build(k) for k in node.children))

        return self.best[cid][0], build(cid)


def extract(egraph: EGraph[Any], root: ClassId, cost: CostFn) -> tuple[float, Term]:
    """The cheapest term of ``root``'s class."""
    return Extractor(egraph, cost).find_best(root)

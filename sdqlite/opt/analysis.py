"""The e-class analysis of SDQLite terms: each class's type and free de Bruijn indices.

The side conditions of the rules read a class's type (dense arrays are not
dictionaries: several classic rules are wrong on them).  One class serves every binder
depth its free indices allow, so a class keeps the typed free indices it was made with:
a rewrite whose result needs fewer is merged through a ``keep`` node, one whose result
needs more is not merged (``scoped``).  Every term extracted from a class is then well
scoped wherever the class is used.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace

from sdqlite.opt.debruijn import fails
from sdqlite.opt.egraph import (
    ClassId,
    EGraph,
    ENode,
    PNode,
    PVar,
    Rewrite,
    Subst,
    Term,
    instantiate,
)
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type, erase, otimes

Free = frozenset[tuple[int, Type]]


@dataclass(frozen=True)
class Info:
    """What the analysis knows of a class: its type (None while unknown), its free de
    Bruijn indices with their types — the scope every context of the class provides —
    and whether a term of it is syntactically a dictionary of one entry at most (a
    singleton or an empty one; a let whose body is one; a sum of ones over one): the
    cost model counts a loop over such a class once, and extraction takes such a term
    from it (``sdqlite.opt.cost``), so the loop it counts once is one in the program.
    ``total``: a term of it fails nowhere (no operation that can fail: ``debruijn.total``);
    the rules keep each failure, so then none of its terms fails."""

    type: Type | None
    free: Free
    one: bool = False
    total: bool = True

    @property
    def loose(self) -> frozenset[int]:
        """The free indices without their types."""
        return frozenset(i for i, _ in self.free)


def _binder_shift(free: Free, n: int) -> Free:
    return frozenset((i - n, t) for i, t in free if i >= n)


class SDQLiteAnalysis:
    """Each class's type and free indices.  ``unique`` names the index arrays whose
    entries are unique within the segments of a pointer array (None: throughout), which
    the rules may rely on (storage formats' promises, checked on the data)."""

    def __init__(self, unique: Mapping[str, str | None] | None = None) -> None:
        self.unique = dict(unique or {})

    def make(self, g: EGraph[Info], node: ENode) -> Info:
        info = self._make(g, node)
        if fails(node.op) or not all(g.data(c).total for c in node.children):
            return replace(info, total=False)
        return info

    def _make(self, g: EGraph[Info], node: ENode) -> Info:
        kids = [g.data(c) for c in node.children]
        one = is_one(node.op, kids)
        free: Free = frozenset().union(*(k.free for k in kids)) if kids else frozenset()
        op = node.op
        if isinstance(op, tuple):
            match op[0]:
                case "bvar":
                    return Info(op[2], frozenset({(op[1], erase(op[2]))}))
                case "var":
                    return Info(op[2], frozenset())
                case "int":
                    return Info(INT, frozenset())
                case "real":
                    return Info(REAL, frozenset())
                case "bool":
                    return Info(BOOL, frozenset())
                case "zero":
                    return Info(op[1], frozenset(), one)
                case "unop":
                    return Info(REAL, free)
                case "array":
                    return Info(DictT(op[1], dense=True), free)
                case "keep":
                    return Info(kids[0].type, op[1], one)
        t = [k.type for k in kids]
        match op:
            case "sum":
                return Info(t[1], kids[0].free | _binder_shift(kids[1].free, 2), one)
            case "let":
                return Info(t[1], kids[0].free | _binder_shift(kids[1].free, 1), one)
            case "single":
                return Info(None if t[1] is None else DictT(t[1]), free, one)
            case "lookup":
                return Info(t[0].val if isinstance(t[0], DictT) else None, free)
            case "if":
                return Info(t[1], free)
            case "add":
                return Info(t[0] or t[1], free)
            case "mul":
                both = t[0] is not None and t[1] is not None
                return Info(otimes(t[0], t[1]) if both else None, free)  # type: ignore[arg-type]
            case "eq" | "not":
                return Info(BOOL, free)
            case "range":
                return Info(DictT(INT, dense=True), free)
            case "subarray" | "unique":
                return Info(t[0], free)
        raise AssertionError(op)

    def merge(self, a: Info, b: Info) -> Info:
        # classes are only merged with the same free indices (see ``scoped``)
        return Info(a.type or b.type, a.free | b.free, a.one or b.one, a.total or b.total)


def is_one(op: Hashable, kids: list[Info]) -> bool:
    """``Info.one`` of a node from its children's: an empty dictionary or a singleton;
    a let whose body is one; a sum of ones over one (``keep`` is its argument)."""
    if isinstance(op, tuple):
        return op[0] == "zero" or (op[0] == "keep" and kids[0].one)
    return op == "single" or (op == "let" and kids[1].one) or \
        (op == "sum" and kids[0].one and kids[1].one)


# ---- scoping: a class's free indices are fixed ------------------------------------------------


def keep(free: Free) -> tuple[str, Free]:
    """The operator of ``keep[free](e)``: ``e`` (whose free indices are fewer) in a class
    whose scope is ``free``.  Cost 0, decoded as ``e``; only the e-graph has it."""
    return ("keep", free)


def scoped(rw: Rewrite) -> Rewrite:
    """``rw``, merging its result only into a class with the same free indices.

    One class serves every binder depth its free indices allow: ``zero`` or ``V`` is one
    class under any binders.  A rewrite can drop a dependence — ``let x = a in b`` with x
    unused becomes ``b``; ``sum(<k,v> in A) zero`` becomes ``zero`` — and a union would
    then put a term mentioning A's indices into the class of ``zero``, where another
    context reads those indices as other binders, of other types, or none at all.  So a
    result with fewer free indices enters as ``keep[free](result)``, a class of its own
    with the matched scope, and a result mentioning indices the match does not is not
    merged.  Every class keeps the free indices it was made with, and every term of it
    mentions only those: extraction at the root (no free index) gives a closed term."""
    def apply(g: EGraph[Info], cid: ClassId, s: Subst) -> ClassId | None:
        new = instantiate(g, rw.rhs, s) if isinstance(rw.rhs, PVar | PNode) else \
            rw.rhs(g, cid, s)
        return None if new is None else in_scope(g, g.data(cid).free, new)
    return Rewrite(rw.name, rw.lhs, apply, rw.condition, pure=rw.is_pure(),
                   invariant=rw.invariant)


def in_scope(g: EGraph[Info], free: Free, new: ClassId) -> ClassId | None:
    """A class equal to ``new`` with the free indices ``free``: ``new`` itself, or
    ``keep[free](new)`` when it needs fewer; None when it needs others."""
    got = g.data(new).free
    if got == free:
        return new
    return g.add(ENode(keep(free), (new,))) if got < free else None


def is_keep(op: object) -> bool:
    return isinstance(op, tuple) and op[0] == "keep"


def new_egraph(unique: Mapping[str, str | None] | None = None) -> EGraph[Info]:
    """An e-graph for SDQLite terms: the analysis (with the index arrays known unique),
    and matching through ``keep``."""
    return EGraph(SDQLiteAnalysis(unique), transparent=is_keep)


def unique_arrays(g: EGraph[Info]) -> Mapping[str, str | None]:
    analysis = g.analysis
    return analysis.unique if isinstance(analysis, SDQLiteAnalysis) else {}


def without_keep(t: Term) -> Term:
    """``t`` with the e-graph's ``keep`` nodes removed: a term of the language."""
    if is_keep(t.op):
        return without_keep(t.children[0])
    return Term(t.op, tuple(without_keep(c) for c in t.children))

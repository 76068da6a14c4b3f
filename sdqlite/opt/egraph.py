"""A small equality-saturation engine in pure Python, after egg (Willsey et al., POPL 2021).

It knows nothing about SDQLite: operators are any hashable values, terms are trees of
them.  The pieces, in egg's vocabulary:

* **e-nodes** ``ENode(op, children)`` whose children are e-class ids, **hash-consed** in
  ``memo`` so that a node exists once;
* a **union-find** over e-class ids; ``union`` is cheap and marks work for ``rebuild``,
  which restores the invariants — every node canonical, congruent nodes in one class —
  once per batch of unions (egg's *deferred rebuilding*);
* an **e-class analysis**: a value per class made from its nodes and joined on union
  (e.g. free variables, or the kind of value a class denotes), which conditions read;
  a binding may declare *transparent* operators, whose nodes matching looks through;
* **patterns** with variables ``?x``, **e-matching** them against the graph, and
  **rewrites** whose right side is a pattern or a Python *applier*, with a *condition*;
* a **runner** with egg's back-off scheduler (a rule that matches too often is banned
  for a few iterations, with growing thresholds) and node, iteration and time limits,
  checked after every application, not only between iterations;
and, in ``sdqlite.opt.extract``, **extraction** of the cheapest term of a class under a
cost function.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, KeysView
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

ClassId = int
D = TypeVar("D")


class ENode(NamedTuple):
    """An operator over classes (a named tuple: hashed and compared in C, as the graph's
    tables and matching do millions of times)."""

    op: Hashable
    children: tuple[ClassId, ...] = ()


class Term(NamedTuple):
    """A tree of operators: what goes in and comes out of the e-graph."""

    op: Hashable
    children: tuple[Term, ...] = ()

    def size(self) -> int:
        return 1 + sum(c.size() for c in self.children)


class Analysis(Protocol[D]):
    """An e-class analysis (egg §4): ``make`` a value for a new node, ``merge`` the values
    of two classes being unioned.  ``merge`` must be a join (commutative, associative,
    idempotent) for the result not to depend on the order of unions."""

    def make(self, egraph: EGraph[D], node: ENode) -> D: ...

    def merge(self, a: D, b: D) -> D: ...


class NoAnalysis:
    def make(self, egraph: EGraph[None], node: ENode) -> None:
        return None

    def merge(self, a: None, b: None) -> None:
        return None


@dataclass
class EClass(Generic[D]):
    id: ClassId
    nodes: dict[ENode, None]  # an ordered set: matching order, and so runs, reproducible
    parents: list[tuple[ENode, ClassId]]
    data: D


class EGraph(Generic[D]):
    """``transparent(op)``: a node of this operator (with one child) stands for its child's
    class, and matching looks through it (``members``); none by default."""

    def __init__(self, analysis: Analysis[D] | None = None,
                 transparent: Callable[[Hashable], bool] = lambda op: False) -> None:
        self.analysis: Analysis[D] = analysis or NoAnalysis()  # type: ignore[assignment]
        self.transparent = transparent
        self.parent: list[ClassId] = []  # the union-find
        self.memo: dict[ENode, ClassId] = {}
        self.classes: dict[ClassId, EClass[D]] = {}
        self.pending: list[ClassId] = []  # classes whose parents need repair
        self.analysis_pending: list[ClassId] = []
        self.generation = 0  # how many rebuilds changed something: a key for caches
        self._members: dict[ClassId, list[ENode]] = {}  # until the next union or rebuild
        self._by_op: dict[ClassId, dict[Hashable, list[ENode]]] = {}  # (the same, by op)
        self.touched: set[ClassId] = set()  # classes merged into: see ``near``

    # ---- union-find ---------------------------------------------------------------------

    def find(self, a: ClassId) -> ClassId:
        root = a
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[a] != root:  # path compression
            self.parent[a], a = root, self.parent[a]
        return root

    # ---- adding and merging ---------------------------------------------------------------

    def canonicalize(self, node: ENode) -> ENode:
        parent = self.parent  # (a root is its own parent: most children are roots)
        if all(parent[c] == c for c in node.children):
            return node
        return ENode(node.op, tuple(self.find(c) for c in node.children))

    def add(self, node: ENode) -> ClassId:
        node = self.canonicalize(node)
        known = self.memo.get(node)
        if known is not None:
            return known if self.parent[known] == known else self.find(known)
        cid = len(self.parent)
        self.parent.append(cid)
        self.classes[cid] = EClass(cid, {node: None}, [], self.analysis.make(self, node))
        for child in node.children:
            self.classes[child].parents.append((node, cid))
        self.memo[node] = cid
        return cid

    def add_term(self, term: Term) -> ClassId:
        return self.add(ENode(term.op, tuple(self.add_term(c) for c in term.children)))

    def lookup(self, node: ENode) -> ClassId | None:
        """The class of ``node`` if the graph has it, without adding anything."""
        found = self.memo.get(self.canonicalize(node))
        return None if found is None else self.find(found)

    def lookup_term(self, term: Term) -> ClassId | None:
        """The class of ``term`` if the graph represents it, without adding anything."""
        kids = []
        for c in term.children:
            k = self.lookup_term(c)
            if k is None:
                return None
            kids.append(k)
        return self.lookup(ENode(term.op, tuple(kids)))

    def union(self, a: ClassId, b: ClassId) -> ClassId:
        """Merge two classes; the invariants hold again after ``rebuild``."""
        a, b = self.find(a), self.find(b)
        if a == b:
            return a
        self._forget_members()
        if len(self.classes[a].parents) < len(self.classes[b].parents):
            a, b = b, a  # keep the class with more parents as the root
        self.parent[b] = a
        ca, cb = self.classes[a], self.classes.pop(b)
        ca.nodes |= cb.nodes
        ca.parents += cb.parents
        merged = self.analysis.merge(ca.data, cb.data)
        if merged != ca.data:
            ca.data = merged
            self.analysis_pending.append(a)
        if merged != cb.data:
            self.analysis_pending.append(a)
        self.pending.append(a)
        self.touched.add(a)
        return a

    def rebuild(self) -> None:
        """Restore congruence closure and canonical nodes (egg's ``rebuild``): repair the
        parents of merged classes until no congruence is left, then canonicalize the nodes
        of every class (a class whose *children* merged still lists stale nodes)."""
        if not (self.pending or self.analysis_pending):
            return
        self.generation += 1
        self._forget_members()
        while self.pending or self.analysis_pending:
            todo = {self.find(c) for c in self.pending}
            self.pending.clear()
            for cid in todo:
                self._repair(cid)
            changed = {self.find(c) for c in self.analysis_pending}
            self.analysis_pending.clear()
            for cid in changed:
                self._propagate_analysis(cid)
        for eclass in self.classes.values():  # egg's rebuild_classes
            eclass.nodes = dict.fromkeys(self.canonicalize(n) for n in eclass.nodes)
        # a node repaired as a parent of one child, then of another, left its middle form
        # in the memo (the second repair removes the form its parent list recorded)
        for node in [n for n in self.memo if self.canonicalize(n) != n]:
            del self.memo[node]

    def _repair(self, cid: ClassId) -> None:
        eclass = self.classes[self.find(cid)]
        # take the parents out first: a union below may merge other classes into this one
        # and append *their* parents, which must not be lost (nor iterated half-way)
        parents, eclass.parents = eclass.parents, []
        new_parents: dict[ENode, ClassId] = {}
        for node, parent in parents:
            self.memo.pop(node, None)
            node = self.canonicalize(node)
            if node in new_parents:  # two congruent parents: merge their classes
                self.union(parent, new_parents[node])
            new_parents[node] = self.find(parent)
            self.memo[node] = self.find(parent)
        self.classes[self.find(cid)].parents += [(n, self.find(p)) for n, p in
                                                 new_parents.items()]

    def _propagate_analysis(self, cid: ClassId) -> None:
        for node, parent in list(self.classes[self.find(cid)].parents):
            pc = self.classes[self.find(parent)]
            merged = self.analysis.merge(pc.data, self.analysis.make(self, node))
            if merged != pc.data:
                pc.data = merged
                self.analysis_pending.append(pc.id)

    # ---- reading ---------------------------------------------------------------------------

    def data(self, cid: ClassId) -> D:
        return self.classes[cid if self.parent[cid] == cid else self.find(cid)].data

    def nodes(self, cid: ClassId) -> KeysView[ENode]:
        return self.classes[self.find(cid)].nodes.keys()

    def members(self, cid: ClassId) -> list[ENode]:
        """The nodes of a class and, through its transparent nodes, those of the classes
        they stand for (transparent nodes themselves left out).  Kept until the classes
        change (a union, a rebuild: adding a node makes a class of its own): the search
        phase of saturation reads them many times.  Not to be modified."""
        root = self.find(cid)
        known = self._members.get(root)
        if known is not None:
            return known
        out: list[ENode] = []
        seen: set[ClassId] = set()
        todo = [root]
        while todo:
            c = todo.pop()
            if c in seen:
                continue
            seen.add(c)
            for n in self.classes[c].nodes:
                if self.transparent(n.op):
                    todo.append(self.find(n.children[0]))
                else:
                    out.append(n)
        self._members[root] = out
        return out

    def _forget_members(self) -> None:
        """The classes changed (a union, a rebuild): the kept members are stale."""
        self._members.clear()
        self._by_op.clear()

    def members_with(self, cid: ClassId, op: Hashable) -> list[ENode]:
        """The members of a class whose operator is ``op`` (where a pattern node can match)."""
        root = cid if self.parent[cid] == cid else self.find(cid)
        index = self._by_op.get(root)
        if index is None:
            index = {}
            for n in self.members(root):
                index.setdefault(n.op, []).append(n)
            self._by_op[root] = index
        return index.get(op, [])

    def class_ids(self) -> list[ClassId]:
        return list(self.classes)

    def classes_by_op(self) -> dict[Hashable, list[ClassId]]:
        """The classes with a member of each operator (where a pattern can match)."""
        index: dict[Hashable, list[ClassId]] = {}
        for cid in self.classes:
            for op in dict.fromkeys(n.op for n in self.members(cid)):
                index.setdefault(op, []).append(cid)
        return index

    def near(self, touched: set[ClassId], depth: int) -> dict[ClassId, int]:
        """For each class with a ``touched`` class at most ``depth`` child links below it
        (through transparent nodes at no cost, as ``members`` looks through them), the
        least such distance: the classes where a pattern that deep may match differently
        than before the touch.  Read after a rebuild (parents are canonical then)."""
        dist = {self.find(c): 0 for c in touched if self.find(c) in self.classes}
        todo = list(dist)
        while todo:
            c = todo.pop()
            for node, up in self.classes[c].parents:
                d = dist[c] + (0 if self.transparent(node.op) else 1)
                up = self.find(up)
                if d <= depth and d < dist.get(up, depth + 1):
                    dist[up] = d
                    todo.append(up)
        return dist

    @property
    def node_count(self) -> int:
        return len(self.memo)

    @property
    def class_count(self) -> int:
        return len(self.classes)


# ---- patterns and e-matching ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PVar:
    """A pattern variable ``?name``."""

    name: str


@dataclass(frozen=True, slots=True)
class PNode:
    op: Hashable
    children: tuple[Pattern, ...] = ()
    #: its children's names when every child is a variable (matched without recursion)
    variables: tuple[str, ...] | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        flat = all(isinstance(k, PVar) for k in self.children)
        object.__setattr__(self, "variables", tuple(
            k.name for k in self.children if isinstance(k, PVar)) if flat else None)


Pattern = PVar | PNode
Subst = dict[str, ClassId]


def depth(pattern: Pattern) -> int:
    """How many child links below its root a pattern reads (a variable reads its class's
    id, a node its class's members)."""
    return 0 if isinstance(pattern, PVar) or not pattern.children else \
        1 + max(depth(k) for k in pattern.children)


def ematch(egraph: EGraph[Any], pattern: Pattern, cid: ClassId, subst: Subst | None = None
           ) -> Iterator[Subst]:
    """Every substitution under which ``pattern`` is represented in class ``cid`` (in
    the order of a depth-first search: each node's children left to right)."""
    return iter(_search(egraph, pattern, cid, subst or {}))


def _ematch(egraph: EGraph[Any], pattern: Pattern, cid: ClassId, subst: Subst,
            out: list[Subst]) -> None:
    """``ematch`` into ``out``, without generators (the saturation's hot loop: a class id
    is looked up in the union-find only when it is not a root, which after a rebuild,
    when the search runs, none is)."""
    parent = egraph.parent
    if parent[cid] != cid:
        cid = egraph.find(cid)
    if isinstance(pattern, PVar):
        bound = subst.get(pattern.name)
        if bound is None:
            out.append({**subst, pattern.name: cid})
        elif (bound if parent[bound] == bound else egraph.find(bound)) == cid:
            out.append(subst)
        return
    kids, names = pattern.children, pattern.variables
    if names is not None:  # every child a variable: one substitution per node at most
        for node in egraph.members_with(cid, pattern.op):
            if len(node.children) != len(names):
                continue
            s: Subst | None = None  # (copied at the first binding)
            for name, child in zip(names, node.children, strict=True):
                if parent[child] != child:
                    child = egraph.find(child)
                bound = (subst if s is None else s).get(name)
                if bound is None:
                    if s is None:
                        s = dict(subst)
                    s[name] = child
                elif (bound if parent[bound] == bound else egraph.find(bound)) != child:
                    break
            else:
                out.append(subst if s is None else s)
        return
    for node in egraph.members_with(cid, pattern.op):
        if len(node.children) != len(kids):
            continue
        partial = [subst]
        for kid, child in zip(kids, node.children, strict=True):
            found: list[Subst] = []
            if isinstance(kid, PVar):  # (inline: most children of a pattern are variables)
                if parent[child] != child:
                    child = egraph.find(child)
                name = kid.name
                for s in partial:
                    bound = s.get(name)
                    if bound is None:
                        found.append({**s, name: child})
                    elif (bound if parent[bound] == bound else egraph.find(bound)) == child:
                        found.append(s)
            else:
                for s in partial:
                    _ematch(egraph, kid, child, s, found)
            partial = found
            if not partial:
                break
        out += partial


def _search(egraph: EGraph[Any], pattern: Pattern, cid: ClassId, subst: Subst | None = None
            ) -> list[Subst]:
    """``ematch``'s substitutions as a list (the runner keeps them per root)."""
    out: list[Subst] = []
    _ematch(egraph, pattern, cid, subst or {}, out)
    return out


def instantiate(egraph: EGraph[Any], pattern: Pattern, subst: Subst) -> ClassId:
    match pattern:
        case PVar(name):
            return subst[name]
        case PNode(op, kids):
            return egraph.add(ENode(op, tuple(instantiate(egraph, k, subst) for k in kids)))


Applier = Callable[[EGraph[Any], ClassId, Subst], ClassId | None]
Condition = Callable[[EGraph[Any], ClassId, Subst], bool]


@dataclass(frozen=True)
class Rewrite:
    """``lhs ~> rhs`` if ``condition``; ``rhs`` is a pattern or a Python applier that
    returns the class to merge with (or None to do nothing)."""

    name: str
    lhs: Pattern
    rhs: Pattern | Applier
    condition: Condition | None = None
    #: the result depends on the match alone (a pattern, not an applier that reads the
    #: graph): applied again to the same match it adds nothing, so the runner skips it
    pure: bool | None = None
    #: what makes the rewrite an equality wherever the condition admits it (a factor that
    #: moves past another's layers is a scalar): asserted, so the condition cannot drift
    invariant: Condition | None = None

    def is_pure(self) -> bool:
        return isinstance(self.rhs, PVar | PNode) if self.pure is None else self.pure

    def apply(self, egraph: EGraph[Any], cid: ClassId, subst: Subst) -> ClassId | None:
        if self.condition is not None and not self.condition(egraph, cid, subst):
            return None
        assert self.invariant is None or self.invariant(egraph, cid, subst), \
            f"{self.name} applies where its invariant does not hold"
        if isinstance(self.rhs, PVar | PNode):
            return instantiate(egraph, self.rhs, subst)
        return self.rhs(egraph, cid, subst)


# ---- the runner --------------------------------------------------------------------------------


@dataclass
class BackoffScheduler:
    """egg's back-off scheduler: a rule with more than ``match_limit · 2^bans`` matches in
    an iteration is skipped and banned for ``ban_length · 2^bans`` iterations."""

    match_limit: int = 1000
    ban_length: int = 5
    banned_until: dict[str, int] = field(default_factory=dict)
    times_banned: Counter[str] = field(default_factory=Counter)

    def can_run(self, rule: str, iteration: int) -> bool:
        return self.banned_until.get(rule, -1) <= iteration

    def accept(self, rule: str, iteration: int, matches: int) -> bool:
        threshold = self.match_limit << self.times_banned[rule]
        if matches > threshold:
            self.banned_until[rule] = iteration + (self.ban_length << self.times_banned[rule])
            self.times_banned[rule] += 1
            return False
        return True

    def unban(self) -> None:
        """egg's ``can_stop``: nothing else changes, so the banned rules run again now
        (their thresholds stay doubled)."""
        self.banned_until.clear()


@dataclass
class Report:
    stop_reason: str  # saturated | iteration limit | node limit | time limit
    iterations: int
    fired: Counter[str]
    nodes: int
    classes: int
    seconds: float


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def run(egraph: EGraph[Any], rewrites: list[Rewrite], *, iter_limit: int = 30,
        node_limit: int = 10_000, time_limit: float = 5.0,
        scheduler: BackoffScheduler | None = None,
        clock: Callable[[], float] = time.perf_counter) -> Report:
    """Equality saturation: apply ``rewrites`` until an iteration in which every rule ran
    changes nothing ("saturated"; when only banned rules are left, they are unbanned, as
    egg's ``can_stop`` does) or a limit is hit.  Limits are checked after every single
    application, so a blow-up inside one iteration stops promptly (the graph stays
    consistent: it is rebuilt before returning)."""
    with _without_cycle_collection():
        return _run(egraph, rewrites, iter_limit, node_limit, time_limit,
                    scheduler or BackoffScheduler(), clock)


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """CPython's cycle collector off for a run: saturation makes millions of small
    objects, almost none of them cyclic (what is, an extraction's recursive closures, is
    collected once the run ends), which the collector would walk over and over (10–30%
    of a run on the kernels of ``make bench``)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _run(egraph: EGraph[Any], rewrites: list[Rewrite], iter_limit: int, node_limit: int,
         time_limit: float, scheduler: BackoffScheduler, clock: Callable[[], float]
         ) -> Report:
    start = clock()
    fired: Counter[str] = Counter()
    iterations = 0
    applied: set[tuple[int, ...]] = set()  # (the rule's place, the classes)

    def check() -> None:
        if egraph.node_count > node_limit:
            raise _Stop("node limit")
        if clock() - start > time_limit:
            raise _Stop("time limit")

    # each rule's matches at each root as of its last search, kept where no class within
    # the pattern's depth below the root was touched since (the search is incremental;
    # it finds what a full one finds, in the same order)
    searched: dict[int, dict[ClassId, list[Subst]]] = {}  # (rules by their place)
    depths = [depth(rw.lhs) for rw in rewrites]
    pure = [rw.is_pure() for rw in rewrites]
    reason = "iteration limit"
    try:
        egraph.rebuild()
        for iterations in range(1, iter_limit + 1):
            before = (egraph.node_count, egraph.class_count, fired.total())
            matches: list[tuple[int, ClassId, Subst]] = []
            by_op = egraph.classes_by_op()
            near = egraph.near(egraph.touched, max(depths, default=0))
            near_at = {d: {c for c, n in near.items() if n <= d} for d in set(depths)}
            egraph.touched = set()
            skipped = False  # a rule banned or refused here: nothing changing proves nothing
            last, searched = searched, {}
            for i, rw in enumerate(rewrites):
                if not scheduler.can_run(rw.name, iterations):
                    skipped = True
                    continue
                roots = by_op.get(rw.lhs.op, []) if isinstance(rw.lhs, PNode) else \
                    egraph.class_ids()
                known, stale = last.get(i, {}), near_at[depths[i]]
                now = {c: known[c] if c in known and c not in stale else _search(egraph, rw.lhs, c)
                       for c in roots}
                searched[i] = now
                every = [(i, cid, s) for cid, found in now.items() for s in found]
                check()
                if scheduler.accept(rw.name, iterations, len(every)):
                    matches += every
                else:
                    skipped = True
            find = egraph.find
            for i, cid, s in matches:
                rw, key = rewrites[i], None
                if pure[i]:  # (a match already applied: its result is in cid's class;
                    # a rule binds its variables in one order)
                    key = (i, find(cid), *[find(c) for c in s.values()])
                    if key in applied:
                        continue
                new = rw.apply(egraph, cid, s)
                if new is not None and key is not None:
                    applied.add(key)
                if new is not None and find(new) != find(cid):
                    egraph.union(cid, new)
                    fired[rw.name] += 1
                check()
            egraph.rebuild()
            # nothing changed: no node added, no union (one can leave both counts as
            # they were: a class merged away while an application added one)
            if (egraph.node_count, egraph.class_count, fired.total()) == before:
                if not skipped:  # every rule ran and changed nothing
                    reason = "saturated"
                    break
                scheduler.unban()
    except _Stop as stop:
        reason = stop.reason
    egraph.rebuild()
    return Report(reason, iterations, fired, egraph.node_count, egraph.class_count,
                  clock() - start)

"""Rewriting passes over the rule table (Fig. fig:trans): sparsity propagation, run after
differentiation, and multiplication normalization.

A pass rewrites bottom-up — the children first, in the typing context of their scope,
then the node, as long as a rule of the family applies — and repeats until nothing
fires.  It takes and returns elaborated programs and reports how often each rule fired.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from sdqlite.check.typecheck import Ctx, NodeTypes, bind, typecheck
from sdqlite.opt.rules import NORMALIZATION, SPARSITY, Rule, family
from sdqlite.syntax.ast import (
    Add,
    Expr,
    IntConst,
    Let,
    Lookup,
    Single,
    SubArray,
    Sum,
    Unique,
    Var,
    children,
    free_vars,
    map_children,
    subterms,
)
from sdqlite.syntax.names import NameSupply, names_in, rename, substitute
from sdqlite.syntax.ops import total
from sdqlite.syntax.types import INT, DictT

MAX_ROUNDS = 100


@dataclass
class PassResult:
    program: Expr
    fired: Counter[str]
    rounds: int
    stop: str = "done"  # or "time limit": the rounds finished before the deadline


class _Deadline(Exception):
    pass


def rewrite(e: Expr, ctx: Ctx, rules: tuple[Rule, ...], deadline: float | None = None
            ) -> PassResult:
    """Apply ``rules`` bottom-up until none applies, or until ``deadline`` (a
    ``time.perf_counter()`` instant) passes: then the program of the last whole round is
    the result (every round keeps meaning).  The result is elaborated again."""
    names = NameSupply(names_in(e) | set(ctx))
    fired: Counter[str] = Counter()
    rounds, stop = 0, "done"
    for rounds in range(1, MAX_ROUNDS + 1):  # noqa: B007 - reported
        this_round: Counter[str] = Counter()
        try:  # the types of e's nodes, once a round: a rewrite keeps its node's type
            e = _bottom_up(e, ctx, _Walk(rules, names, this_round, NodeTypes(ctx, e),
                                         deadline))
        except _Deadline:
            stop = "time limit"
            break
        fired += this_round
        if not this_round:
            break
    elab, _ = typecheck(e, ctx)
    return PassResult(elab, fired, rounds, stop)


@dataclass(frozen=True)
class _Walk:
    rules: tuple[Rule, ...]
    names: NameSupply
    fired: Counter[str]
    types: NodeTypes
    deadline: float | None


def _bottom_up(e: Expr, ctx: Ctx, w: _Walk) -> Expr:
    if w.deadline is not None and time.perf_counter() > w.deadline:
        raise _Deadline

    def go(x: Expr, scope: Ctx = ctx) -> Expr:
        return _bottom_up(x, scope, w)

    match e:
        case Sum(k, v, dom, body):
            dt = w.types(ctx, dom)
            assert isinstance(dt, DictT)
            e = replace(e, dom=go(dom), body=go(body, bind(ctx, **{k: INT, v: dt.val})))
        case Let(x, rhs, body):
            rt = w.types(ctx, rhs)
            e = replace(e, rhs=go(rhs), body=go(body, bind(ctx, **{x: rt})))
        case _:
            e = map_children(e, go)
    for rule in w.rules:
        m = rule.match(e, ctx)
        if m is not None:
            w.fired[rule.name] += 1
            return _bottom_up(rule.apply(m, w.names), ctx, w)
    return e


def sparsity_propagation(e: Expr, ctx: Ctx, deadline: float | None = None) -> PassResult:
    """Fig. fig:trans, first group, with the constant propagation of ``let x = zero``."""
    return rewrite(e, ctx, family(SPARSITY), deadline)


def normalize_multiplication(e: Expr, ctx: Ctx, deadline: float | None = None
                             ) -> PassResult:
    """Fig. fig:trans, second group: tensor products become sums of scalar products."""
    return rewrite(e, ctx, family(NORMALIZATION), deadline)


def iterated_key_lookup(e: Expr, ctx: Ctx) -> PassResult:
    """Lookups in a one-hot-like dictionary at a key known to be stored in it (DESIGN.md:
    a condition "discharged from what is known (declared extents, keys produced by
    iterating that same range)"):

        (sum(<k, v> in X) {k -> b})(i)  ~>  b[k := i, v := X(i)]    if i ∈ dom(X)

    ``X`` is a path (``M``, ``M(i)``, ...) and ``i ∈ dom(X)`` is known when
      [same-dictionary]  ``i`` comes from iterating ``X`` itself; or
      [declared-extent]  ``X`` is a whole dense array ``{dense_int[n] -> D}`` — it stores
                         every position ``0 .. n-1`` — and ``i`` iterates a layer whose
                         keys lie in ``0 .. n-1`` (declared ``int[n]`` or ``dense_int[n]``).
    A path is whole when it is an input, or a path looked up at a key known to be
    stored in it (a dense matrix's row ``M(i)``).  The pass repeats until nothing fires:
    rewriting ``M'(i)`` exposes the row's one-hot ``sum(<j, _> in M(i)) ...``.
    Keys are unique, so the lookup finds exactly the entry built for ``k = i``.  A sum
    looked up in place must not fail (``ops.total``): its other entries are no longer
    evaluated (a ``let``-bound one stays bound, and is evaluated whole).  It is
    what lets the gradient w.r.t. ``x`` of a function linear in ``x`` stop reading the
    values of ``x``: the one-hot ``x'`` looked up at such a key is ``{i -> 1}``.
    Definitions come from ``let`` (``let x' = sum(<k, v> in X) {k -> b} in ...``)."""
    fired: Counter[str] = Counter()
    shapes = {x: t for x, t in ctx.items() if isinstance(t, DictT)}
    names = NameSupply(names_in(e) | set(ctx))
    rounds = 0
    for rounds in range(1, MAX_ROUNDS + 1):  # noqa: B007 - reported
        before = sum(fired.values())  # a rewritten lookup may expose the next layer's
        e = _keys(e, _Scope({}, {}, shapes, {}), fired, names)
        if sum(fired.values()) == before:
            break
    return PassResult(typecheck(e, ctx)[0], fired, rounds)


@dataclass(frozen=True)
class _Scope:
    """What is known at a point of the program.  A *path* is a variable looked up at
    keys (``M``, ``M(i)``, ``M(i)(j)``): what a one-hot iterates."""

    defs: dict[str, Sum]  # let-bound names of a one-hot-like sum over a path
    keys: dict[str, tuple[Expr | None, str | None]]  # key binder → (iterated path, extent)
    # a whole dictionary variable → its declared type (extents included): an input, an
    # entry stored in one, or an alias of one; never a lookup's result (maybe an empty 0)
    shapes: dict[str, DictT]
    paths: dict[str, Expr]  # a variable that is a path: sum(<k, v> in P) makes v = P(k)
    # a let-bound lookup's declared type: its keys' extents hold (a stored entry's, or
    # the empty dictionary's), not its wholeness (``let row = A(i)``, A sparse)
    lookups: dict[str, DictT] = field(default_factory=dict)

    def without(self, names: set[str]) -> _Scope:
        """Forget what a new binder of one of ``names`` shadows."""
        def kept(n: str, e: Expr | None) -> bool:
            return n not in names and not (e is not None and names & free_vars(e))
        return _Scope(
            {n: s for n, s in self.defs.items() if kept(n, s)},
            {n: (x, ext) for n, (x, ext) in self.keys.items() if kept(n, x)},
            {n: sh for n, sh in self.shapes.items() if n not in names},
            {n: p for n, p in self.paths.items() if kept(n, p)},
            {n: t for n, t in self.lookups.items() if n not in names})

    def path(self, e: Expr) -> Expr:
        """``e`` with variables that stand for paths replaced by them (``row`` → ``M(i)``)."""
        match e:
            case Var(x) if x in self.paths:
                return self.paths[x]
            case Lookup(d, Var() as k):
                return Lookup(self.path(d), k)
        return e

    def shape(self, e: Expr) -> DictT | None:
        """The declared shape of a dictionary expression, where it follows from one."""
        match e:
            case Var(x) if x in self.shapes:
                return self.shapes[x]
            case Var(x) if x in self.lookups:
                return self.lookups[x]
            case Lookup(d) | Unique(d):
                t = self.shape(d)
                inner = t.val if isinstance(t, DictT) and isinstance(e, Lookup) else t
                return inner if isinstance(inner, DictT) else None
        return None

    def whole(self, path: Expr) -> DictT | None:
        """The shape of a path whose value is whole: an input or a stored entry of one."""
        match path:
            case Var(x) if x in self.shapes:
                return self.shapes[x]
            case Lookup(d, Var(i)) if (t := self.whole(d)) and self.holds(i, d):
                return t.val if isinstance(t.val, DictT) else None
        return None

    def holds(self, i: str, path: Expr) -> str | None:
        """Why key ``i`` is stored in the dictionary at ``path``, if it is."""
        source, extent = self.keys.get(i, (None, None))
        if source is not None and source == self.path(path):
            return "same-dictionary"
        t = self.whole(path)
        if t is not None and t.dense and extent is not None and t.extent == extent:
            return "declared-extent"
        return None


def _in_sum(sc: _Scope, k: str, v: str, dom: Expr) -> _Scope:
    """What is known in the body of ``sum(<k, v> in dom)``."""
    inner = sc.without({k, v})
    t = sc.shape(dom)
    if k != "_" and not {k, v} & free_vars(dom):
        p = sc.path(dom) if _is_path(dom) else None
        inner.keys[k] = (p, t.extent if t else None)
        if v != "_" and p is not None:
            inner.paths[v] = Lookup(p, Var(k))
    if v != "_" and t is not None and isinstance(t.val, DictT):
        inner.shapes[v] = t.val
    return inner


def _in_let(sc: _Scope, x: str, rhs: Expr) -> _Scope:
    """What is known in the body of ``let x = rhs``."""
    inner = sc.without({x})
    if _onehot_like(rhs) and x not in free_vars(rhs):  # (else x means two things)
        inner.defs[x] = rhs  # type: ignore[assignment]
    if (t := sc.whole(rhs)) is not None:  # an alias of a whole value
        inner.shapes[x] = t
    elif (t := sc.shape(rhs)) is not None:  # a lookup (or its alias)
        inner.lookups[x] = t  # [declared-extent] for the keys iterating it
    if _is_path(rhs) and x not in free_vars(rhs):
        inner.paths[x] = sc.path(rhs)
    return inner


def _keys(e: Expr, sc: _Scope, fired: Counter[str], names: NameSupply) -> Expr:
    def go(x: Expr, inner: _Scope = sc) -> Expr:
        return _keys(x, inner, fired, names)

    match e:
        case Sum(k, v, dom, body):
            return replace(e, dom=go(dom), body=go(body, _in_sum(sc, k, v, dom)))
        case Let(x, rhs, body):
            rhs2 = go(rhs)
            return replace(e, rhs=rhs2, body=go(body, _in_let(sc, x, rhs2)))
        case Lookup(Var(name), Var(i)) if name in sc.defs and (
                why := sc.holds(i, sc.defs[name].dom)):
            fired[f"iterated-key-lookup ({why})"] += 1
            return _entry(sc.defs[name], i, names)
        case Lookup(Sum() as s, Var(i)) if _onehot_like(s) and total(s) and (
                why := sc.holds(i, s.dom)):  # (the other entries are not evaluated)
            fired[f"iterated-key-lookup ({why})"] += 1
            return _entry(s, i, names)
        case _:
            return map_children(e, go)


def positional_rows(e: Expr, ctx: Ctx, inputs: Collection[str]) -> set[int]:
    """The lookups ``A(k)`` of an input of ``inputs`` (stored in a format whose first
    layer is positional, laid out to span its declared size) at a key ``k`` iterating a
    layer of the same declared size as A's first: storage composition may read them as
    the format's row at ``k`` (``sdqlite.storage.compose``), for k lies in ``0 .. len``.
    They are named by identity: composition walks this same ``e``."""
    out: set[int] = set()
    shapes = {x: t for x, t in ctx.items() if isinstance(t, DictT)}

    def walk(x: Expr, sc: _Scope) -> None:
        match x:
            case Sum(k, v, dom, body):
                walk(dom, sc)
                walk(body, _in_sum(sc, k, v, dom))
            case Let(y, rhs, body):
                walk(rhs, sc)
                walk(body, _in_let(sc, y, rhs))
            case Lookup(Var(a), Var(k)) if a in inputs and sc.shapes.get(a) is ctx.get(a) \
                    and (t := shapes.get(a)) is not None and t.extent is not None \
                    and sc.keys.get(k, (None, None))[1] == t.extent:
                out.add(id(x))
            case _:
                for c in children(x):
                    walk(c, sc)

    walk(e, _Scope({}, {}, shapes, {}))
    return out


def _is_path(e: Expr) -> bool:
    """A variable looked up at variables: ``M``, ``M(i)``, ``M(i)(j)``."""
    match e:
        case Var():
            return True
        case Lookup(d, Var()):
            return _is_path(d)
    return False


def _onehot_like(e: Expr) -> bool:
    """``sum(<k, v> in X) {k -> b}`` over a path ``X``."""
    return (isinstance(e, Sum) and _is_path(e.dom) and e.key != "_"
            and isinstance(e.body, Single) and e.body.key == Var(e.key))


def _entry(s: Sum, i: str, names: NameSupply) -> Expr:
    """b[k := i, v := X(i)] for ``s = sum(<k, v> in X) {k -> b}``, both at once (``i``
    may be named v, and ``X`` may name k): v is renamed fresh first.  ``X(i)`` is a
    path, a lookup, so it is substituted; through ``let`` where a binder of b would
    capture ``i`` or a variable of ``X(i)``."""
    assert isinstance(s.body, Single)
    b = s.body.val
    entry = Lookup(s.dom, Var(i))
    bound = {n for t in subterms(b) for n in _binders(t)}
    capture = bool(bound & ({i} | free_vars(entry)))
    if s.val == "_":
        return Let(s.key, Var(i), b) if capture else substitute(b, s.key, Var(i))
    v = names.fresh(s.val.rstrip("'0123456789"))  # a name starts with a letter or _
    b = rename(b, s.val, v)
    if capture:
        return Let(v, entry, Let(s.key, Var(i), b))
    return substitute(substitute(b, s.key, Var(i)), v, entry)


def _binders(e: Expr) -> set[str]:
    match e:
        case Sum(k, v):
            return {k, v}
        case Let(x):
            return {x}
    return set()


def row_views(e: Expr, ctx: Ctx, unique: Mapping[str, str | None]) -> PassResult:
    """A row of a stored input bound by a ``let`` (normalization binds ``x3`` for BATAX's
    ``x3 * x3``, after the last saturation, so no fusion sees it) and iterated after is
    iterated in place, each entry as a one-entry dictionary (a zero value dropped, as
    the row drops it):

        let x = sum(<p, j> in idx(lo:hi)) {j -> v}  in ... sum(<i, w> in x) b ...
          ~>  ... sum(<p', j'> in idx(lo:hi)) sum(<i, w> in {j' -> v[p := p']}) b ...

    Guard: ``idx``'s entries are unique within the segment (``unique``: the formats'
    promise, which the door makes true, within each segment ``pos(e):pos(e + 1)`` of
    its pointer array, or throughout); a repeated key would be iterated twice instead of
    once with the sum of its values.  No binder between the ``let`` and the loop may bind
    a name the row reads.  The row's values cannot fail (``ops.total``): the let goes,
    and a value is then evaluated only where a loop reads it."""
    names = NameSupply(names_in(e))
    fired: Counter[str] = Counter()

    def go(x: Expr) -> Expr:
        x = map_children(x, go)
        if isinstance(x, Let) and _unique_row(x.rhs, unique) and total(x.rhs):
            body = _in_place(x.body, x.name, x.rhs, free_vars(x.rhs), names, fired)
            return body if x.name not in free_vars(body) else replace(x, body=body)
        return x

    out = go(e)
    if not fired:
        return PassResult(e, fired, 1)
    return PassResult(typecheck(out, ctx)[0], fired, 1)


def _unique_row(e: Expr, unique: Mapping[str, str | None]) -> bool:
    """``sum(<p, j> in idx(lo:hi)) {j -> v}`` with idx's entries unique in ``lo:hi``."""
    match e:
        case Sum(p, j, SubArray(Var(idx), lo, hi), Single(Var(k), v)) \
                if k == j != p and j not in free_vars(v) and idx in unique:
            pos = unique[idx]
            if pos is None:
                return True
            match lo, hi:
                case Lookup(Var(a), at), Lookup(Var(b), Add(at1, IntConst(1))):
                    return a == b == pos and at == at1
    return False


def _in_place(e: Expr, x: str, row: Expr, reads: frozenset[str], names: NameSupply,
              fired: Counter[str]) -> Expr:
    """``e`` with each loop over ``x`` (the ``let``-bound ``row``) a loop over the row's
    positions, where no binder hides ``x`` or a name the row reads."""
    def go(t: Expr) -> Expr:
        match t:
            case Sum(i, w, Var(name), b) if name == x:
                assert isinstance(row, Sum) and isinstance(row.body, Single)
                p, j = names.fresh("p"), names.fresh("j")
                entry = Single(Var(j), rename(row.body.val, row.key, p))
                fired["row-view"] += 1
                inner = b if {i, w} & ({x} | reads) else go(b)
                return Sum(p, j, row.dom, Sum(i, w, entry, inner))
            case Sum(k, v, d, b):
                return replace(t, dom=go(d), body=b if {k, v} & ({x} | reads) else go(b))
            case Let(y, r, b):
                return replace(t, rhs=go(r), body=b if y in {x} | reads else go(b))
        return map_children(t, go)

    return go(e)

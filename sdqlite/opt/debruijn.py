"""SDQLite terms with de Bruijn indices: the boundary between the AST and the e-graph.

Binders become de Bruijn indices inside the e-graph (a ``sum`` binds its key as index 1
and its value as index 0 in the body; a ``let`` binds index 0); names come back through
a name supply (``decode``).  Free variables keep their names.  Each leaf carries its
type, so the e-class analysis (``sdqlite.opt.analysis``) knows every class's type.
Moving a term across binders needs a shift of its free indices (``shift``), and
beta-reduction a substitution (``substitute``); both act on one term, a class's
representative (``sdqlite.opt.storel``).  The rules' guards test a term syntactically:
``strict`` (zero when a variable is), ``linear``, ``mentions``, ``total`` (fails nowhere),
``needed`` (a variable every evaluation reads).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sdqlite.check.typecheck import Ctx, synth
from sdqlite.errors import NOT_EXPANDED, DiffError, Span
from sdqlite.opt.egraph import Term
from sdqlite.syntax.ast import (
    Add,
    ArrayLit,
    BoolConst,
    Empty,
    Eq,
    Expr,
    Gradient,
    If,
    IntConst,
    Let,
    Lookup,
    Mul,
    Not,
    Range,
    RealConst,
    Single,
    SubArray,
    Sum,
    Unique,
    UnOp,
    Var,
)
from sdqlite.syntax.names import NameSupply
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.types import INT, DictT, Type, erase


# ---- encoding and decoding --------------------------------------------------------------------
def encode(e: Expr, ctx: Ctx, scope: tuple[tuple[str, Type], ...] = (),
           spans: dict[Term, Span] | None = None, outer: tuple[Term, ...] = ()) -> Term:
    """An elaborated expression as a term with de Bruijn indices (innermost binder 0).

    ``spans`` collects where each unary operation is in the source, by its term closed
    over the binders it is under (``_closed``; ``outer`` describes them), and each
    integer constant (closed already): ``decode`` gives them back their spans, so that a
    failure in the optimized program (an operation's, or a constant too large for the
    C++ backend) is reported where the source has it."""
    def go(x: Expr, inner: tuple[tuple[str, Type], ...] = scope,
           binders: tuple[Term, ...] = outer) -> Term:
        return encode(x, ctx, inner, spans, binders)

    full = {**ctx, **dict(scope)}
    match e:
        case Var(x):
            for i, (name, t) in enumerate(reversed(scope)):
                if name == x:
                    return Term(("bvar", i, t))
            return Term(("var", x, erase(ctx[x])))
        case IntConst(n):  # located too: one may not fit the C++ backend's int
            return _located(Term(("int", n)), e.span, spans, outer)
        case RealConst(r):
            return Term(("real", r))
        case BoolConst(b):
            return Term(("bool", b))
        case Empty(t):
            return Term(("zero", t))
        case Sum(k, v, dom, body):
            dt = synth(full, dom)[1]
            assert isinstance(dt, DictT)
            over = go(dom)
            return Term("sum", (over, go(body, (*scope, (k, INT), (v, dt.val)),
                                         _bound(outer, "sum", over) if spans is not None
                                         else ())))
        case Let(x, rhs, body):
            rt = synth(full, rhs)[1]
            bound = go(rhs)
            return Term("let", (bound, go(body, (*scope, (x, rt)),
                                          _bound(outer, "let", bound) if spans is not None
                                          else ())))
        case Single(k, v):
            return Term("single", (go(k), go(v)))
        case Lookup(d, k):
            return Term("lookup", (go(d), go(k)))
        case Not(a):
            return Term("not", (go(a),))
        case If(c, b):
            return Term("if", (go(c), go(b)))
        case Add(a, b):
            return Term("add", (go(a), go(b)))
        case Mul(a, b):
            return Term("mul", (go(a), go(b)))
        case Eq(a, b):
            return Term("eq", (go(a), go(b)))
        case UnOp(op, a):
            term = Term(("unop", op), (go(a),))
            return _located(term, e.span, spans, outer)
        case Range(lo, hi):
            return Term("range", (go(lo), go(hi)))
        case SubArray(arr, lo, hi):
            return Term("subarray", (go(arr), go(lo), go(hi)))
        case Unique(a):
            return Term("unique", (go(a),))
        case ArrayLit(elems, _, ty):
            return Term(("array", ty), tuple(go(x) for x in elems))
        case Gradient():
            raise DiffError(NOT_EXPANDED, e.span)
    raise AssertionError(e)


def _located(t: Term, span: Span | None, spans: dict[Term, Span] | None,
             outer: tuple[Term, ...]) -> Term:
    """``t``, its ``span`` noted in ``spans`` as that of ``t`` closed over ``outer`` (the
    first one wins: the e-graph merges equal terms)."""
    if spans is not None and span is not None:
        spans.setdefault(_closed(t, outer), span)
    return t


def decode(t: Term, names: NameSupply, scope: tuple[str, ...] = (),
           spans: Mapping[Term, Span] | None = None, outer: tuple[Term, ...] = ()) -> Expr:
    """A term back to an expression; binders get fresh names, and a unary operation or an
    integer constant the span ``spans`` gives its closed term (``encode``)."""
    def go(x: Term, inner: tuple[str, ...] = scope, binders: tuple[Term, ...] = outer
           ) -> Expr:
        return decode(x, names, inner, spans, binders)

    op, kids = t.op, t.children
    if isinstance(op, tuple):
        match op[0]:
            case "bvar":
                return Var(scope[len(scope) - 1 - op[1]])
            case "var":
                return Var(op[1])
            case "int":
                return IntConst(op[1], span=spans.get(t) if spans else None)
            case "real":
                return RealConst(op[1])
            case "bool":
                return BoolConst(op[1])
            case "zero":
                return Empty(op[1])
            case "unop":
                return UnOp(op[1], go(kids[0]),
                            span=spans.get(_closed(t, outer)) if spans else None)
            case "array":
                return ArrayLit(tuple(go(k) for k in kids))
            case "keep":
                return go(kids[0])
    match op:
        case "sum":
            k, v = names.fresh("k"), names.fresh("v")
            return Sum(k, v, go(kids[0]), go(kids[1], (*scope, k, v),
                                              _bound(outer, "sum", kids[0]) if spans else ()))
        case "let":
            x = names.fresh("x")
            return Let(x, go(kids[0]), go(kids[1], (*scope, x),
                                          _bound(outer, "let", kids[0]) if spans else ()))
    binary: dict[str, Callable[[Expr, Expr], Expr]] = {
        "single": Single, "lookup": Lookup, "if": If, "add": Add, "mul": Mul, "eq": Eq,
        "range": Range}
    if op in binary:
        return binary[str(op)](go(kids[0]), go(kids[1]))
    if op == "not":
        return Not(go(kids[0]))
    if op == "unique":
        return Unique(go(kids[0]))
    if op == "subarray":
        return SubArray(go(kids[0]), go(kids[1]), go(kids[2]))
    raise AssertionError(op)


def _bound(outer: tuple[Term, ...], binder: str, over: Term) -> tuple[Term, ...]:
    """``outer`` with the binders of a ``sum`` over ``over`` (its key, then its value) or
    of a ``let`` of ``over``, each described by the closed term it ranges over."""
    closed = _closed(over, outer)
    if binder == "sum":
        return (*outer, Term(("key of",), (closed,)), Term(("value of",), (closed,)))
    return (*outer, Term(("let of",), (closed,)))


def _closed(t: Term, outer: tuple[Term, ...], depth: int = 0) -> Term:
    """``t`` with each index bound outside it replaced by its binder's description in
    ``outer`` (innermost last): a key that tells apart the same term under different
    binders, as ``log(v)`` in two sums over different vectors."""
    op = t.op
    if isinstance(op, tuple) and op[0] == "bvar":
        return t if op[1] < depth else outer[len(outer) - 1 - (op[1] - depth)]
    binds = {"sum": 2, "let": 1}.get(op if isinstance(op, str) else "", 0)
    return Term(op, tuple(_closed(c, outer, depth + binds if binds and i == len(t.children) - 1
                                  else depth) for i, c in enumerate(t.children)))


# ---- shifting and substitution --------------------------------------------


def shift(t: Term, d: int, cutoff: int = 0) -> Term:
    """Add ``d`` to every index ≥ ``cutoff`` (free in ``t``)."""
    op = t.op
    if isinstance(op, tuple) and op[0] == "bvar":
        return Term(("bvar", op[1] + d if op[1] >= cutoff else op[1], op[2]))
    binds = {"sum": 2, "let": 1}.get(op if isinstance(op, str) else "", 0)
    kids = tuple(shift(c, d, cutoff + (binds if i == len(t.children) - 1 and binds else 0))
                 for i, c in enumerate(t.children))
    return Term(op, kids)


def substitute(t: Term, index: int, by: Term) -> Term:
    """``t[index := by]``, removing the binder: indices above ``index`` move down by one."""
    op = t.op
    if isinstance(op, tuple) and op[0] == "bvar":
        if op[1] == index:
            return shift(by, index)
        return Term(("bvar", op[1] - 1, op[2])) if op[1] > index else t
    binds = {"sum": 2, "let": 1}.get(op if isinstance(op, str) else "", 0)
    kids = []
    for i, c in enumerate(t.children):
        inner = binds if binds and i == len(t.children) - 1 else 0
        kids.append(substitute(c, index + inner, by))
    return Term(op, tuple(kids))


def alias(t: Term, frm: int, to: int) -> Term:
    """``t`` with the index ``frm`` read as ``to`` (both bound outside ``t``)."""
    op = t.op
    if isinstance(op, tuple) and op[0] == "bvar":
        return Term(("bvar", to, op[2])) if op[1] == frm else t
    binds = {"sum": 2, "let": 1}.get(op if isinstance(op, str) else "", 0)
    return Term(op, tuple(
        alias(c, frm + binds, to + binds) if binds and i == len(t.children) - 1
        else alias(c, frm, to) for i, c in enumerate(t.children)))


def strict(t: Term, index: int) -> bool:
    """A sufficient, syntactic test that ``t`` is zero whenever the variable ``index`` is
    zero (for types without dense layers, where zero is ``{}`` or ``0``), and then fails
    nowhere: whatever else it evaluates is total (``v * exp(c)`` is not strict in v: at
    v = 0 it still fails where exp(c) does, which a rule that skips it would hide)."""
    op, kids = t.op, t.children
    if isinstance(op, tuple):
        return bool(op[0] == "bvar" and op[1] == index)
    match op:
        case "mul":
            return ((strict(kids[0], index) and total(kids[1]))
                    or (total(kids[0]) and strict(kids[1], index)))
        case "add":
            return strict(kids[0], index) and strict(kids[1], index)
        case "single" | "if":
            return total(kids[0]) and strict(kids[1], index)
        case "lookup":
            return strict(kids[0], index) and total(kids[1])
        case "sum":  # an empty domain evaluates no body
            return strict(kids[0], index) or (total(kids[0]) and strict(kids[1], index + 2))
        case "let":
            return total(kids[0]) and strict(kids[1], index + 1)
    return False


def fails(op: object) -> bool:
    """The operator is a unary operation that can fail (``UnaryOp.total``)."""
    return isinstance(op, tuple) and op[0] == "unop" and not UNARY_OPS[op[1]].total


def total(t: Term) -> bool:
    """No operation of ``t`` can fail (``sdqlite.syntax.ops.total``)."""
    return not fails(t.op) and all(total(c) for c in t.children)


def needed(t: Term, index: int) -> bool:
    """Every evaluation of ``t`` evaluates the variable ``index``: bound to a term that
    fails, ``t`` then fails too (at the first failure of the two, which may be the other)."""
    op, kids = t.op, t.children
    if isinstance(op, tuple):
        return (op[0] == "bvar" and op[1] == index) or any(needed(c, index) for c in kids)
    match op:
        case "if" | "sum":  # only the condition, the domain, is always evaluated
            return needed(kids[0], index)
        case "let":
            return needed(kids[0], index) or needed(kids[1], index + 1)
    return any(needed(c, index) for c in kids)


def linear(t: Term, index: int) -> bool:
    """A sufficient, syntactic test that ``t`` is linear in the variable ``index``,
    ``t(x1 + x2) = t(x1) + t(x2)`` (for types without dense layers): x reaches the result
    through one factor of each product, the value of a singleton, both sides of ``+``."""
    op, kids = t.op, t.children
    if isinstance(op, tuple):
        return bool(op[0] == "bvar" and op[1] == index)
    match op:
        case "mul":
            return ((linear(kids[0], index) and not mentions(kids[1], index))
                    or (not mentions(kids[0], index) and linear(kids[1], index)))
        case "add":
            return linear(kids[0], index) and linear(kids[1], index)
        case "single" | "if":
            return not mentions(kids[0], index) and linear(kids[1], index)
        case "lookup":
            return linear(kids[0], index) and not mentions(kids[1], index)
        case "sum":
            return not mentions(kids[0], index) and linear(kids[1], index + 2)
        case "let":
            return not mentions(kids[0], index) and linear(kids[1], index + 1)
        case "unique":
            return linear(kids[0], index)
    return False


def mentions(t: Term, index: int) -> bool:
    """Does the variable ``index`` occur in ``t``?"""
    op = t.op
    if isinstance(op, tuple):
        return bool(op[0] == "bvar" and op[1] == index)
    binds = {"sum": 2, "let": 1}.get(op if isinstance(op, str) else "", 0)
    return any(mentions(c, index + (binds if binds and i == len(t.children) - 1 else 0))
               for i, c in enumerate(t.children))

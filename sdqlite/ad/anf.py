"""ANF conversion (§5.1 "ANF"; Example 1 of §2.1): every non-trivial sub-expression is
let-bound, so that differentiation shares primal work.

    x1*y1 + x2*y2   ⇒   let t1 = x1*y1 in let t2 = x2*y2 in let t3 = t1+t2 in t3

Atoms are variables, constants, ``zero[T]`` and array literals of atoms.  Bindings never
leave the body of a ``sum`` (they may depend on its key and value) nor the body of an
``if`` (``if x = 0 then log(x)`` must not evaluate ``log`` when the test fails).  The
input is an *elaborated* program (from the type checker), so every let-bound
sub-expression can synthesise its type; the output has the same type and meaning.
"""

from __future__ import annotations

from typing import assert_never

from sdqlite.errors import NOT_EXPANDED, DiffError
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
from sdqlite.syntax.names import NameSupply, names_in, rename

Bindings = list[tuple[str, Expr]]


def is_atom(e: Expr) -> bool:
    match e:
        case Var() | IntConst() | RealConst() | BoolConst() | Empty():
            return True
        case ArrayLit(elems):
            return all(is_atom(x) for x in elems)
        case _:
            return False


def anf(e: Expr, names: NameSupply | None = None) -> Expr:
    """The ANF of an elaborated expression."""
    return _norm(e, names or NameSupply(names_in(e)))


def _wrap(binds: Bindings, body: Expr) -> Expr:
    for x, rhs in reversed(binds):
        body = Let(x, rhs, body)
    return body


def _norm(e: Expr, ns: NameSupply) -> Expr:
    """A let chain ending in an atom; the user's own lets in tail position keep their
    names (nothing follows them that could be captured)."""
    binds: Bindings = []
    while isinstance(e, Let):
        binds.append((e.name, _rhs(e.rhs, binds, ns)))
        e = e.body
    return _wrap(binds, _atom(e, binds, ns))


def _atom(e: Expr, binds: Bindings, ns: NameSupply) -> Expr:
    """Turn ``e`` into an atom, appending the bindings it needs to ``binds``."""
    if is_atom(e):
        return e
    if isinstance(e, Let):  # hoisted out of an operand: a fresh name, or it could capture
        x = ns.fresh()
        binds.append((x, _rhs(e.rhs, binds, ns)))
        return _atom(rename(e.body, e.name, x), binds, ns)
    rhs = _rhs(e, binds, ns)  # operands first, so names follow evaluation order
    x = ns.fresh()
    binds.append((x, rhs))
    return Var(x)


def _rhs(e: Expr, binds: Bindings, ns: NameSupply) -> Expr:
    """``e`` with atomic operands (its own bindings go to ``binds``)."""
    def a(x: Expr) -> Expr:
        return _atom(x, binds, ns)

    match e:
        case Let():
            return _atom(e, binds, ns)
        case Sum(k, v, dom, body, span, ty):  # the body's bindings stay inside
            return Sum(k, v, a(dom), _norm(body, ns), span=span, ty=ty)
        case If(c, body, span, ty):  # so do the conditional's
            return If(a(c), _norm(body, ns), span=span, ty=ty)
        case Single(k, v):
            return Single(a(k), a(v), span=e.span)
        case Lookup(d, k, span, ty):
            return Lookup(a(d), a(k), span=span, ty=ty)
        case Not(x):
            return Not(a(x), span=e.span)
        case Add(l, r):
            return Add(a(l), a(r), span=e.span)
        case Mul(l, r):
            return Mul(a(l), a(r), span=e.span)
        case Eq(l, r):
            return Eq(a(l), a(r), span=e.span)
        case UnOp(op, x):
            return UnOp(op, a(x), span=e.span)
        case Range(lo, hi):
            return Range(a(lo), a(hi), span=e.span)
        case SubArray(arr, lo, hi, span, ty):
            return SubArray(a(arr), a(lo), a(hi), span=span, ty=ty)
        case Unique(x):
            return Unique(a(x), span=e.span)
        case ArrayLit(elems, span, ty):
            return ArrayLit(tuple(a(x) for x in elems), span=span, ty=ty)
        case Var() | IntConst() | RealConst() | BoolConst() | Empty():
            return e
        case Gradient():
            raise DiffError(NOT_EXPANDED, e.span)
        case _:
            assert_never(e)

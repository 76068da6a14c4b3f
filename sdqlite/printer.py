"""Printer: AST → text in the paper's notation, such that ``parse(show(e)) == e``.

Precedence (loosest first): open forms (``sum``, ``let``, ``if``, ``not``) < ``=`` <
``+`` < ``*`` < unary minus < lookup/sub-array < atoms.  Open forms are parenthesised
whenever they are an operand.  A left-nested ``+`` of singletons prints as a dictionary
literal.  Long expressions are laid out over several lines, ``let`` one per line.
"""

from __future__ import annotations

from typing import assert_never

from sdqlite.ast import (
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
    subterms,
)

OPEN, EQ, ADD, MUL, UNARY, POSTFIX, ATOM = range(7)
WIDTH = 80


def _prec(e: Expr) -> int:
    match e:
        case Sum() | Let() | If() | Not() | Gradient():
            return OPEN
        case Eq():
            return EQ
        case Add():
            return ATOM if _dict_entries(e) else ADD
        case Mul():
            return MUL
        case IntConst(n):
            return UNARY if n < 0 else ATOM
        case RealConst(r):
            return UNARY if r < 0 or str(r).startswith("-") else ATOM
        case Lookup() | SubArray():
            return POSTFIX
        case (
            Var() | BoolConst() | Empty() | Single() | UnOp() | Range() | Unique() | ArrayLit()
        ):
            return ATOM
        case _:
            assert_never(e)


def _dict_entries(e: Expr) -> list[Single] | None:
    """The singletons of a left-nested ``+`` of at least two singletons, else None."""
    spine: list[Expr] = []
    while isinstance(e, Add):
        spine.append(e.right)
        e = e.left
    spine.append(e)
    if len(spine) < 2 or not all(isinstance(s, Single) for s in spine):
        return None
    return [s for s in reversed(spine) if isinstance(s, Single)]


def _real(r: float) -> str:
    text = repr(r)
    return text if any(c in text for c in ".e") else text + ".0"


def show(e: Expr, indent: int = 0) -> str:
    """Print ``e``; continuation lines are indented by ``indent`` spaces."""
    flat = _flat(e)
    if "\n" not in flat and indent + len(flat) <= WIDTH and not _has_let(e):
        return flat
    return _broken(e, indent)


def _has_let(e: Expr) -> bool:
    return any(isinstance(s, Let) for s in subterms(e))


def _operand(e: Expr, need: int, indent: int, flat: bool) -> str:
    text = _flat(e) if flat else show(e, indent + 1)
    return f"({text})" if _prec(e) < need else text


def _flat(e: Expr) -> str:
    return _render(e, 0, flat=True)


def _broken(e: Expr, indent: int) -> str:
    return _render(e, indent, flat=False)


def _render(e: Expr, ind: int, *, flat: bool) -> str:
    def sub(x: Expr, extra: int = 0) -> str:
        return _flat(x) if flat else show(x, ind + extra)

    def op(x: Expr, need: int) -> str:
        return _operand(x, need, ind, flat)

    nl = " " if flat else "\n" + " " * ind
    nl2 = " " if flat else "\n" + " " * (ind + 2)
    match e:
        case Var(name):
            return name
        case IntConst(n):
            return str(n)
        case RealConst(r):
            return _real(r)
        case BoolConst(b):
            return "true" if b else "false"
        case Sum(k, v, dom, body):
            head = f"sum(<{k}, {v}> in {sub(dom)})"
            body_text = sub(body, 2)
            if flat or ("\n" not in body_text and len(head) + len(body_text) + ind < WIDTH):
                return f"{head} {body_text}"
            return f"{head}{nl2}{body_text}"
        case Single(k, v):
            return f"{{ {sub(k)} -> {sub(v, 2)} }}"
        case Empty(t):
            return "{}" if t is None else f"zero[{t}]"
        case Lookup(d, k):
            return f"{op(d, POSTFIX)}({sub(k)})"
        case Let(x, rhs, body):
            return f"let {x} = {sub(rhs, 2)} in{nl}{sub(body)}"
        case Not(a):
            return f"not {op(a, EQ)}"
        case If(c, body):
            body_text = sub(body, 2)
            if flat or "\n" not in body_text:
                return f"if {sub(c)} then {body_text}"
            return f"if {sub(c)} then{nl2}{body_text}"
        case Add(a, b):
            entries = _dict_entries(e)
            if entries is not None:
                inner = ", ".join(f"{sub(s.key)} -> {sub(s.val)}" for s in entries)
                return f"{{ {inner} }}"
            return f"{op(a, ADD)} + {op(b, MUL)}"
        case Mul(a, b):
            return f"{op(a, MUL)} * {op(b, UNARY)}"
        case Eq(a, b):
            return f"{op(a, ADD)} = {op(b, ADD)}"
        case UnOp(name, a):
            return f"{name}({sub(a)})"
        case Range(lo, hi):
            return f"({sub(lo)}:{sub(hi)})"
        case SubArray(arr, lo, hi):
            return f"{op(arr, POSTFIX)}({sub(lo)}:{sub(hi)})"
        case Unique(a):
            return f"unique({sub(a)})"
        case ArrayLit(elems):
            return "[" + ", ".join(sub(x) for x in elems) + "]"
        case Gradient(body, x):
            return f"gradient {op(body, POSTFIX)} {x}"
        case _:
            assert_never(e)

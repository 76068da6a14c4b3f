"""Printer: AST → text in the paper's notation, such that ``parse(show(e)) == e``.

Precedence (loosest first): open forms (``sum``, ``let``, ``if``, ``not``) < ``=`` <
``+`` < ``*`` < unary minus < lookup/sub-array < atoms.  Open forms are parenthesised
whenever they are an operand.  A ``+``-tree of singletons grouped as the parser groups a
dictionary literal (``sugar.dict_literal``) prints as one.  Long expressions are laid out
over several lines, ``let`` one per line.
"""

from __future__ import annotations

from typing import assert_never

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
    children,
)
from sdqlite.syntax.sugar import literal_split

OPEN, EQ, ADD, MUL, UNARY, POSTFIX, ATOM = range(7)
WIDTH = 80


def show(e: Expr, indent: int = 0) -> str:
    """Print ``e``; continuation lines are indented by ``indent`` spaces.

    >>> from sdqlite import parse_expr, show
    >>> print(show(parse_expr("let y = x*x in y+y")))
    let y = x * x in
    y + y
    """
    return _Printer().show(e, indent)


class _Printer:
    """One printing: each node's one-line text, whether it holds a ``let`` and whether it
    is a dictionary literal are computed once (a node's layout asks about every node
    below it, so recomputing would make printing quadratic in the depth)."""

    def __init__(self) -> None:
        self._flat: dict[int, str] = {}
        self._lets: dict[int, bool] = {}
        self._dicts: dict[int, list[Single] | None] = {}

    def show(self, e: Expr, indent: int) -> str:
        flat = self.flat(e)
        if indent + len(flat) <= WIDTH and not self.has_let(e):
            return flat
        return self.render(e, indent, flat=False)

    def flat(self, e: Expr) -> str:
        text = self._flat.get(id(e))
        if text is None:
            text = self._flat[id(e)] = self.render(e, 0, flat=True)
        return text

    def has_let(self, e: Expr) -> bool:
        found = self._lets.get(id(e))
        if found is None:
            found = self._lets[id(e)] = isinstance(e, Let) or any(
                self.has_let(c) for c in children(e))
        return found

    def dict_entries(self, e: Expr) -> list[Single] | None:
        """The singletons of a dictionary literal as ``dict_literal`` builds it (at least
        two singletons), else None."""
        if id(e) not in self._dicts:
            self._dicts[id(e)] = _dict_entries(e)
        return self._dicts[id(e)]

    def prec(self, e: Expr) -> int:
        match e:
            case Sum() | Let() | If() | Not() | Gradient():
                return OPEN
            case Eq():
                return EQ
            case Add():
                return ATOM if self.dict_entries(e) else ADD
            case Mul():
                return MUL
            case IntConst(n):
                return UNARY if n < 0 else ATOM
            case RealConst(r):
                return UNARY if r < 0 or str(r).startswith("-") else ATOM
            case Lookup() | SubArray():
                return POSTFIX
            case (
                Var() | BoolConst() | Empty() | Single() | UnOp() | Range() | Unique()
                | ArrayLit()
            ):
                return ATOM
            case _:
                assert_never(e)

    def render(self, e: Expr, ind: int, *, flat: bool) -> str:
        def sub(x: Expr, extra: int = 0) -> str:
            return self.flat(x) if flat else self.show(x, ind + extra)

        def op(x: Expr, need: int) -> str:
            text = self.flat(x) if flat else self.show(x, ind + 1)
            return f"({text})" if self.prec(x) < need else text

        nl = " " if flat else "\n" + " " * ind
        nl2 = " " if flat else "\n" + " " * (ind + 2)
        match e:
            case Var(name):
                return name
            case IntConst(n):
                return str(n)
            case RealConst(r):
                return real_text(r)
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
                entries = self.dict_entries(e)
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


def _dict_entries(e: Expr) -> list[Single] | None:
    """The singletons of ``e`` if it is ``dict_literal`` of two or more, else None."""
    if not isinstance(e, Add):
        return None
    leaves: list[Expr] = []
    todo: list[Expr] = [e]
    while todo:  # the leaves of the +-tree, left to right
        x = todo.pop()
        if isinstance(x, Add):
            todo += (x.right, x.left)
        elif isinstance(x, Single):
            leaves.append(x)
        else:
            return None
    singles = [x for x in leaves if isinstance(x, Single)]
    return singles if _literal_shape(e, len(singles)) else None


def _literal_shape(e: Expr, n: int) -> bool:
    """Is the +-tree ``e`` (of ``n`` leaves) grouped as ``dict_literal`` groups?"""
    if n == 1:
        return isinstance(e, Single)
    half = literal_split(n)
    return isinstance(e, Add) and _literal_shape(e.left, half) and _literal_shape(e.right,
                                                                                  n - half)


def real_text(r: float) -> str:
    """A real literal's text: Python's shortest repr, with a point."""
    text = repr(r)
    return text if any(c in text for c in ".e") else text + ".0"

"""An explicit supply of fresh names (DESIGN.md: no global counters, so that Hypothesis
shrinking is reproducible).  A supply never hands out a name it was told to avoid —
every name of the program being transformed — so generated binders cannot capture."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from sdqlite.syntax.ast import Expr, Let, Sum, Var, free_vars, map_children, subterms


def names_in(e: Expr) -> set[str]:
    """Every variable and binder name occurring in ``e``."""
    out: set[str] = set()
    for s in subterms(e):
        match s:
            case Sum(k, v):
                out |= {k, v}
            case Let(x):
                out.add(x)
            case _:
                name = getattr(s, "name", None)
                if isinstance(name, str):
                    out.add(name)
    return out


class NameSupply:
    def __init__(self, avoid: Iterable[str] = ()) -> None:
        self.avoid = set(avoid)
        self.counter = 0

    def prime(self, x: str) -> str:
        """The tangent name of ``x``: ``x'`` as the paper writes it, or ``x''``, and so on,
        when that name is taken (a program may already use ``x'``)."""
        name = x + "'"
        while name in self.avoid:
            name += "'"
        self.avoid.add(name)
        return name

    def fresh(self, stem: str = "t") -> str:
        while True:
            self.counter += 1
            name = f"{stem}{self.counter}"
            if name not in self.avoid:
                self.avoid.add(name)
                return name


def substitute(e: Expr, x: str, by: Expr) -> Expr:
    """``e[x := by]``.  No binder of ``e`` may bind a free variable of ``by`` (true when
    ``by`` is closed, or its free names are fresh): then no capture can happen."""
    match e:
        case Var(name) if name == x:
            return by
        case Sum(k, v, d, b):
            return replace(e, dom=substitute(d, x, by),
                           body=b if x in (k, v) else substitute(b, x, by))
        case Let(y, r, b):
            return replace(e, rhs=substitute(r, x, by), body=b if y == x else substitute(b, x, by))
        case _:
            return map_children(e, lambda c: substitute(c, x, by))


def rename(e: Expr, old: str, new: str) -> Expr:
    """``e`` with the free occurrences of ``old`` renamed to the fresh name ``new``."""
    return substitute(e, old, Var(new))


def alpha_normal(e: Expr) -> Expr:
    """``e`` up to renaming, for comparing a program with the paper's listing: bound
    variables renamed ``b0, b1, ...`` in binding order (an unused sum binder is ``_``),
    numeric literals as reals, and ``{}`` without its elaborated type."""
    from sdqlite.syntax.ast import Empty, IntConst, RealConst

    counter = iter(range(1_000_000))

    def go(e: Expr, env: dict[str, str]) -> Expr:
        match e:
            case Var(x):
                return Var(env.get(x, x))
            case IntConst(n):
                return RealConst(float(n))
            case Empty():
                return Empty()
            case Sum(k, v, dom, body):  # a binder the body does not use is `_` (a key
                used = free_vars(body)  # named as the value is shadowed by it: unused)
                k2, v2 = (f"b{next(counter)}" if k not in ("_", v) and k in used else "_",
                          f"b{next(counter)}" if v != "_" and v in used else "_")
                inner = {**env, **({k: k2} if k != "_" else {}), **({v: v2} if v != "_" else {})}
                return Sum(k2, v2, go(dom, env), go(body, inner))
            case Let(x, rhs, body):
                x2 = f"b{next(counter)}"
                return Let(x2, go(rhs, env), go(body, {**env, x: x2}))
            case _:
                return map_children(e, lambda c: go(c, env))

    return go(e, {})

"""Derived forms, expanded into the core in one place (Fig. fig:langs, lower half).

The parser calls these; the theorems and generators only ever see the core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sdqlite.errors import ParseError, Span
from sdqlite.syntax.ast import Add, Empty, Expr, IntConst, Let, Mul, RealConst, Single, Sum, Var
from sdqlite.syntax.types import BoolT, DictT, IntT, RealT, Type


def dict_literal(entries: Sequence[tuple[Expr, Expr]], span: Span | None = None) -> Expr:
    """``{k1 -> v1, ..., kn -> vn}`` ≜ ``{k1 -> v1} + ... + {kn -> vn}``, grouped as a
    balanced tree (``literal_split``) so that a literal of any length is only
    logarithmically deep; up to three entries this is the left-nested sum."""
    singles: list[Expr] = [Single(k, v, span=span) for k, v in entries]

    def group(lo: int, hi: int) -> Expr:
        if hi - lo == 1:
            return singles[lo]
        mid = lo + literal_split(hi - lo)
        return Add(group(lo, mid), group(mid, hi), span=span)

    return group(0, len(singles))


def literal_split(n: int) -> int:
    """How many of a literal's ``n >= 2`` entries its left operand holds."""
    return (n + 1) // 2


def tuple_let(
    names: Sequence[str], rhss: Sequence[Expr], body: Expr, span: Span | None = None
) -> Expr:
    """``let <v1,...,vn> = <e1,...,en> in e`` ≜ ``let v1 = e1 in ... let vn = en in e``."""
    if len(names) != len(rhss):
        raise ParseError(
            f"tupled let binds {len(names)} names but gives {len(rhss)} expressions", span
        )
    out = body
    for name, rhs in reversed(list(zip(names, rhss, strict=True))):
        out = Let(name, rhs, out, span=span)
    return out


def negate(e: Expr, span: Span | None = None) -> Expr:
    """``-e`` ≜ ``-1 * e``; on a numeric literal it is the negative literal."""
    match e:
        case IntConst(n):
            return IntConst(-n, span=span)
        case RealConst(r):
            return RealConst(-r, span=span)
        case _:
            return Mul(IntConst(-1, span=span), e, span=span)


def subtract(a: Expr, b: Expr, span: Span | None = None) -> Expr:
    """``a - b`` ≜ ``a + -1 * b``."""
    return Add(a, negate(b, span), span=span)


def zero(t: Type, span: Span | None = None) -> Expr:
    """Fig. fig:langs: ``zero[real] ≜ 0``, ``zero[{I -> D}] ≜ {}`` (and ``zero[int] ≜ 0``)."""
    match t:
        case RealT():
            return RealConst(0.0, span=span)
        case IntT():
            return IntConst(0, span=span)
        case DictT():
            return Empty(t, span=span)
        case BoolT():
            raise ParseError("zero[bool] is not defined: bool is not a semiring type", span)


def onehot(t: Type, x: Expr, fresh: Callable[[str], str], span: Span | None = None) -> Expr:
    """Fig. fig:api: ``onehot[tensor n] x`` — the tensor (2n) that is 1 on the diagonal of
    the hypercube over the *stored* entries of ``x``:

        onehot[real] x ≜ 1
        onehot[tensor n] x ≜ sum(<i_1,v_2> in x) {i_1 -> ... sum(<i_n,_> in v_n)
                                 {i_n -> {i_1 -> ... {i_n -> 1} ...}} ...}
    """
    n = 0
    leaf = t
    while isinstance(leaf, DictT):
        leaf, n = leaf.val, n + 1
    if not isinstance(leaf, RealT):
        raise ParseError(f"onehot[{t}] is not defined: onehot needs a real tensor type", span)
    keys = [fresh("i") for _ in range(n)]  # none for onehot[real] x: the diagonal is 1
    diagonal: Expr = RealConst(1.0)
    for i in reversed(keys):
        diagonal = Single(Var(i), diagonal)

    def nest(level: int, src: Expr) -> Expr:
        if level == n:
            return diagonal
        v = fresh("v") if level < n - 1 else "_"
        inner = nest(level + 1, Var(v)) if v != "_" else nest(level + 1, src)
        return Sum(keys[level], v, src, Single(Var(keys[level]), inner))

    return nest(0, x)

"""The typed AST of SDQLite: Logical SDQLite (Fig. fig:langs) plus the Physical constructs.

One frozen dataclass per construct of the grammar; ``Expr`` is their closed union.
Source spans are excluded from equality.  Fields marked *elaboration* are filled in
by the type checker (``sdqlite.check.typecheck``) with the type the interpreter needs to
build a zero (an empty sum, a false conditional, a missing key); they are not syntax
and do not take part in equality either.

Derived forms (dictionary literals, tupled ``let``, ``_``, ``-``, ``zero[T]``,
``tensor n``) do not appear here: the parser expands them into these nodes
(see ``sdqlite.syntax.sugar``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any, assert_never, get_args

from sdqlite.errors import Span
from sdqlite.syntax.types import Type


def _span() -> Span | None:
    return field(default=None, compare=False, repr=False)


def _elab() -> Type | None:
    return field(default=None, compare=False, repr=False)


# ---- Logical SDQLite ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Var:
    """``x``"""

    name: str
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class IntConst:
    """``n`` (an integer; checked against ``real`` it elaborates to a RealConst)"""

    value: int
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class RealConst:
    """``r`` (a real literal such as ``1.5`` or ``2e-3``)"""

    value: float
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class BoolConst:
    """``true`` / ``false``"""

    value: bool
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Sum:
    """``sum(<key, val> in dom) body`` — dictionary aggregation"""

    key: str
    val: str
    dom: Expr
    body: Expr
    span: Span | None = _span()
    ty: Type | None = _elab()  # elaboration: the type of the result


@dataclass(frozen=True, slots=True)
class Single:
    """``{ key -> val }`` — a singleton dictionary"""

    key: Expr
    val: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Empty:
    """``{}``, or ``zero[T]`` for a dictionary type when ``ty`` is given.

    The annotation is part of the syntax (it is how ``zero[T]`` is written)."""

    ty: Type | None = None
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Lookup:
    """``dict(key)``"""

    dict: Expr
    key: Expr
    span: Span | None = _span()
    ty: Type | None = _elab()  # elaboration: the value type (zero on a missing key)


@dataclass(frozen=True, slots=True)
class Let:
    """``let name = rhs in body``"""

    name: str
    rhs: Expr
    body: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Not:
    """``not e``"""

    arg: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class If:
    """``if cond then body`` (no else: ``zero[T]`` when the condition is false)"""

    cond: Expr
    body: Expr
    span: Span | None = _span()
    ty: Type | None = _elab()  # elaboration: the type of the body


@dataclass(frozen=True, slots=True)
class Add:
    """``left + right``"""

    left: Expr
    right: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Mul:
    """``left * right`` — the tensor (outer) product"""

    left: Expr
    right: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Eq:
    """``left = right`` on discrete types (int, bool)"""

    left: Expr
    right: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class UnOp:
    """``op(arg)`` for a real unary operation of ``sdqlite.syntax.ops.UNARY_OPS``"""

    op: str
    arg: Expr
    span: Span | None = _span()


# ---- Physical SDQLite --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Range:
    """``(lo:hi)`` — the dense array ``{p -> p | lo <= p < hi}``"""

    lo: Expr
    hi: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class SubArray:
    """``arr(lo:hi)`` — ``{p -> arr(p) | lo <= p < hi}`` (positions kept as keys)"""

    arr: Expr
    lo: Expr
    hi: Expr
    span: Span | None = _span()
    ty: Type | None = _elab()  # elaboration: the element type (zero outside ``arr``)


@dataclass(frozen=True, slots=True)
class Unique:
    """``unique(e)`` — the identity, with a promise used by rewrites and codegen"""

    arg: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class ArrayLit:
    """``[e0, e1, ...]`` — a dense array literal (how dense values are printed)"""

    elems: tuple[Expr, ...]
    span: Span | None = _span()
    ty: Type | None = _elab()  # elaboration: the element type (needed for ``[]``)


# ---- the gradient API ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gradient:
    """``gradient e x`` (Fig. fig:api).  The checker types it from the types alone and
    keeps it; its expansion needs types too (the free variables of ``e`` and theirs), and
    is an AD step after checking (``sdqlite.ad.gradient.expand``)."""

    expr: Expr
    var: str
    span: Span | None = _span()


Expr = (
    Var | IntConst | RealConst | BoolConst | Sum | Single | Empty | Lookup | Let | Not | If
    | Add | Mul | Eq | UnOp | Range | SubArray | Unique | ArrayLit | Gradient
)


_EXPR_TYPES = frozenset(get_args(Expr))


def children(e: Expr) -> Iterator[Expr]:
    """The immediate sub-expressions of ``e``, left to right."""
    match e:
        case Var() | IntConst() | RealConst() | BoolConst() | Empty():
            return
        case Sum(_, _, dom, body):
            yield dom
            yield body
        case Single(a, b) | Add(a, b) | Mul(a, b) | Eq(a, b) | Range(a, b):
            yield a
            yield b
        case Lookup(d, k):
            yield d
            yield k
        case Let(_, rhs, body):
            yield rhs
            yield body
        case If(c, body):
            yield c
            yield body
        case Not(a) | UnOp(_, a) | Unique(a) | Gradient(a):
            yield a
        case SubArray(arr, lo, hi):
            yield arr
            yield lo
            yield hi
        case ArrayLit(elems):
            yield from elems
        case _:
            assert_never(e)


def map_children(e: Expr, f: Callable[[Expr], Expr]) -> Expr:
    """``e`` with ``f`` applied to each immediate sub-expression (annotations kept).
    Binders are not renamed: callers that cross a binder handle ``Sum``/``Let`` first."""
    changes: dict[str, Any] = {}
    for fld in fields(e):
        val = getattr(e, fld.name)
        if isinstance(val, tuple):
            changes[fld.name] = tuple(f(x) for x in val)
        elif fld.name not in ("span", "ty") and _is_expr(val):
            changes[fld.name] = f(val)
    return replace(e, **changes) if changes else e


def _is_expr(x: object) -> bool:
    return type(x) in _EXPR_TYPES


def subterms(e: Expr) -> Iterator[Expr]:
    """``e`` and all its sub-expressions, pre-order (a stack, not nested generators:
    those cost the depth at every node)."""
    todo = [e]
    while todo:
        x = todo.pop()
        yield x
        todo.extend(reversed(list(children(x))))


def free_vars(e: Expr) -> frozenset[str]:
    """FVS(e): the variables of ``e`` not bound by a ``sum`` or ``let`` around them."""
    match e:
        case Var(name):
            return frozenset({name})
        case Sum(k, v, dom, body):
            return free_vars(dom) | (free_vars(body) - {k, v})
        case Let(x, rhs, body):
            return free_vars(rhs) | (free_vars(body) - {x})
        case Gradient(a, x):
            return free_vars(a) | {x}
        case _:
            out: frozenset[str] = frozenset()
            for c in children(e):
                out |= free_vars(c)
            return out

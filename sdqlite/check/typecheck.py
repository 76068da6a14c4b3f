"""The bidirectional type checker (Fig. fig:langs, plus the Physical constructs).

``synth(Γ, e)`` infers a type; ``check(Γ, e, T)`` checks against a known one.  Both
return the *elaborated* expression: integer literals checked against ``real`` become
real constants, ``{}`` and ``[]`` learn their type, and the nodes whose meaning needs a
zero (``sum``, ``if``, lookup, array literals) are annotated with their type for the
interpreter.  Errors name the expected and the found type and point at the span.

``gradient e x`` is typed ``T ⊗ τ`` from the types alone and stays in the elaborated
program; its expansion is an AD step after checking (``sdqlite.ad.gradient.expand``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import TypeVar, assert_never, cast

from immutables import Map

from sdqlite.errors import SDQLTypeError, Span
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
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.types import (
    BOOL,
    INT,
    REAL,
    DictT,
    RealT,
    Type,
    erase,
    is_discrete,
    is_semiring,
    otimes,
    scalar_of,
    sparse,
    tangent_type,
)

Ctx = Mapping[str, Type]
F = TypeVar("F", bound=Callable[..., object])
T = TypeVar("T")


def bind(ctx: Mapping[str, T], **binds: T) -> Mapping[str, T]:
    """Γ, x : T (a persistent map: a chain of binders does not copy Γ at each one)."""
    scope = ctx if isinstance(ctx, Map) else Map(ctx)
    return scope.update({x: t for x, t in binds.items() if x != "_"})


def _locate(fn: F) -> F:
    """Give an error raised below a node without a span the span of that node."""

    @wraps(fn)
    def wrapper(ctx: Ctx, e: Expr, *rest: object) -> object:
        try:
            out = fn(ctx, e, *rest)
            if _RECORDERS:  # check's type is its third argument, synth's its result's second
                t = rest[0] if rest else cast(tuple[Expr, Type], out)[1]
                _RECORDERS[-1].record(e, cast(Type, t))
            return out
        except SDQLTypeError as err:
            if err.span is None:
                err.span = e.span
            raise
        except RecursionError:
            raise SDQLTypeError("program is nested too deeply to check", e.span) from None

    return wrapper  # type: ignore[return-value]


class NodeTypes:
    """The type the checker gives each node of an elaborated program ``ctx ⊢ e``, found
    in one pass.  A pass that asks for the type at every node (FAD) would otherwise check
    each subtree again at every node above it: quadratic in the depth.  Asking about a
    node it did not see, or saw twice with different types (a sub-tree shared by two
    scopes), checks that node again."""

    def __init__(self, ctx: Ctx, e: Expr) -> None:
        self._types: dict[int, tuple[Expr, Type | None]] = {}
        _RECORDERS.append(self)
        try:
            synth(ctx, e)
        finally:
            _RECORDERS.pop()

    def record(self, e: Expr, t: Type) -> None:
        seen = self._types.get(id(e))
        self._types[id(e)] = (e, t if seen is None or seen[1] == t else None)

    def __call__(self, ctx: Ctx, e: Expr) -> Type:
        seen = self._types.get(id(e))
        if seen is not None and seen[0] is e and seen[1] is not None:
            return seen[1]
        return synth(ctx, e)[1]


_RECORDERS: list[NodeTypes] = []


def _need_semiring(t: Type, what: str, span: Span | None) -> None:
    if not is_semiring(t):
        raise SDQLTypeError(f"{what} must have a semiring type (real, int or a dictionary), "
                            f"found {t}", span)


def _need_dict(t: Type, what: str, span: Span | None) -> DictT:
    if not isinstance(t, DictT):
        raise SDQLTypeError(f"expected a dictionary or dense array for {what}, found {t}", span)
    return t


def _flexible(e: Expr) -> bool:
    """Expressions whose type is best learnt from the other operand."""
    return isinstance(e, IntConst | ArrayLit) or (isinstance(e, Empty) and e.ty is None)


def _as_real_literal(e: Expr, t: Type) -> Expr:
    """An integer literal next to a real operand is a real (``2 * x``, ``-1 * x``)."""
    if isinstance(e, IntConst) and scalar_of(t) == REAL:
        return _real_literal(e)
    return e


def _real_literal(e: IntConst) -> RealConst:
    """An integer literal read as a real (it must be a finite double)."""
    try:
        return RealConst(float(e.value), span=e.span)
    except OverflowError:
        raise SDQLTypeError(f"integer literal {str(e.value)[:20]}... is too large for a "
                            "real", e.span) from None


@_locate
def synth(ctx: Ctx, e: Expr) -> tuple[Expr, Type]:
    """Γ ⊢ e ⇒ T : infer the type of ``e`` and elaborate it.

    >>> from sdqlite import parse_expr, parse_type, synth
    >>> print(synth({"V": parse_type("{int -> real}")}, parse_expr("V(0) + 1.0"))[1])
    real
    """
    match e:
        case Var(x):  # [var]
            if x not in ctx:
                known = ", ".join(sorted(ctx)) or "none"
                raise SDQLTypeError(f"unbound variable {x} (in scope: {known})", e.span)
            return e, erase(ctx[x])  # extents are facts for rewrites, not types
        case IntConst():  # [int]
            return e, INT
        case RealConst():  # [real]
            return e, REAL
        case BoolConst():  # [bool]
            return e, BOOL
        case Sum(k, v, dom, body):  # Fig. langs, [sum]
            dom2, dt = synth(ctx, dom)
            d = _need_dict(dt, "the domain of sum", dom.span)
            body2, bt = synth(bind(ctx, **{k: INT, v: d.val}), body)
            _need_semiring(bt, "the body of sum", body.span)
            return Sum(k, v, dom2, body2, span=e.span, ty=bt), bt
        case Single(k, v):  # Fig. langs, [singleton]
            k2 = check(ctx, k, INT)
            v2, vt = synth(ctx, v)
            _need_semiring(vt, "a dictionary value", v.span)
            return Single(k2, v2, span=e.span), DictT(vt)
        case Empty(t):  # [empty]: zero[T], or {} where the context gives its type
            if t is None:
                raise SDQLTypeError(
                    "cannot infer the type of {}; write zero[T] or use it where its type "
                    "is known", e.span)
            return e, t
        case Lookup(d, k):  # Fig. langs, [lookup]
            d2, dt = synth(ctx, d)
            dd = _need_dict(dt, "a lookup", d.span)
            k2 = check(ctx, k, INT)
            return Lookup(d2, k2, span=e.span, ty=dd.val), dd.val
        case Let(x, rhs, body):  # [let]
            rhs2, rt = synth(ctx, rhs)
            body2, bt = synth(bind(ctx, **{x: rt}), body)
            return Let(x, rhs2, body2, span=e.span), bt
        case Not(a):  # [not]
            return Not(check(ctx, a, BOOL), span=e.span), BOOL
        case If(c, body):  # [if]
            c2 = check(ctx, c, BOOL)
            body2, bt = synth(ctx, body)
            _need_semiring(bt, "the body of if (it is zero when the condition is false)",
                           body.span)
            return If(c2, body2, span=e.span, ty=bt), bt
        case Add(a, b):  # [add]: both sides of one semiring type
            if _flexible(a) and not _flexible(b):
                b2, t = synth(ctx, b)
                a2 = check(ctx, a, t)
            else:
                a2, t = synth(ctx, a)
                b2 = check(ctx, b, t)
            _need_semiring(t, "an operand of +", e.span)
            return Add(a2, b2, span=e.span), t
        case Mul(a, b):  # Fig. langs, [mult]: D1 * D2 : D1 ⊗ D2
            a2, ta = synth(ctx, a)
            b2, tb = synth(ctx, b)
            if ta == INT and isinstance(a, IntConst) and scalar_of(tb) == REAL:
                a2, ta = _as_real_literal(a, tb), REAL
            elif tb == INT and isinstance(b, IntConst) and scalar_of(ta) == REAL:
                b2, tb = _as_real_literal(b, ta), REAL
            t = otimes(ta, tb)
            if t is None:
                raise SDQLTypeError(f"cannot multiply {ta} by {tb}: ⊗ is defined on "
                                    "semiring types with the same scalar (real or int)", e.span)
            return Mul(a2, b2, span=e.span), t
        case Eq(a, b):  # [eq]: equality of discrete types
            if _flexible(a) and not _flexible(b):
                b2, t = synth(ctx, b)
                a2 = check(ctx, a, t)
            else:
                a2, t = synth(ctx, a)
                b2 = check(ctx, b, t)
            if t not in (INT, BOOL):
                raise SDQLTypeError(f"= compares int or bool values, found {t}", e.span)
            return Eq(a2, b2, span=e.span), BOOL
        case UnOp(name, a):  # [op]: real -> real
            if name not in UNARY_OPS:
                raise SDQLTypeError(f"unknown operation {name}", e.span)
            return UnOp(name, check(ctx, a, REAL), span=e.span), REAL
        case Range(lo, hi):  # Physical, [range]
            return Range(check(ctx, lo, INT), check(ctx, hi, INT), span=e.span), DictT(
                INT, dense=True)
        case SubArray(arr, lo, hi):  # Physical, [sub-array]
            arr2, at = synth(ctx, arr)
            if not (isinstance(at, DictT) and at.dense):
                raise SDQLTypeError(f"expected a dense array {{dense_int -> ...}} to take a "
                                    f"sub-array of, found {at}", arr.span)
            return SubArray(arr2, check(ctx, lo, INT), check(ctx, hi, INT), span=e.span,
                            ty=at.val), at
        case Unique(a):  # Physical, [unique]: the identity
            a2, t = synth(ctx, a)
            return Unique(a2, span=e.span), t
        case Gradient(body, x):  # Fig. api: T ⊗ τ, from the types alone
            body2, bt = synth(ctx, body)  # (sdqlite.ad.gradient.expand builds it, after checking)
            return Gradient(body2, x, span=e.span), tangent_type(bt, wrt_type(ctx, x, e.span))
        case ArrayLit(elems):  # Physical, [array]
            if not elems:
                if e.ty is not None:  # elaborated where its type was known
                    return e, DictT(e.ty, dense=True)
                raise SDQLTypeError("cannot infer the type of []; use it where its type "
                                    "is known", e.span)
            first = next((x for x in elems if not _flexible(x)), elems[0])
            first2, t = synth(ctx, first)
            _need_semiring(t, "an array element", first.span)
            elems2 = tuple(first2 if x is first else check(ctx, x, t) for x in elems)
            return ArrayLit(elems2, span=e.span, ty=t), DictT(t, dense=True)
        case _:
            assert_never(e)


@_locate
def check(ctx: Ctx, e: Expr, want: Type) -> Expr:
    """Γ ⊢ e ⇐ T : check ``e`` against ``want`` and elaborate it.

    >>> from sdqlite import check, parse_expr, parse_type, show
    >>> show(check({"x": parse_type("real")}, parse_expr("x * 2"), parse_type("real")))
    'x * 2.0'
    """
    match e:
        case IntConst() if isinstance(want, RealT):  # a numeric literal checked against real
            return _real_literal(e)
        case Empty(None) if isinstance(want, DictT):  # {} learns its type
            return Empty(want, span=e.span)
        case ArrayLit(elems) if isinstance(want, DictT) and want.dense:
            _need_semiring(want.val, "an array element", e.span)
            return ArrayLit(tuple(check(ctx, x, want.val) for x in elems), span=e.span,
                            ty=want.val)
        case Single(k, v) if isinstance(want, DictT) and not want.dense:
            return Single(check(ctx, k, INT), check(ctx, v, want.val), span=e.span)
        case If(c, body) if is_semiring(want):
            return If(check(ctx, c, BOOL), check(ctx, body, want), span=e.span, ty=want)
        case Let(x, rhs, body):
            rhs2, rt = synth(ctx, rhs)
            return Let(x, rhs2, check(bind(ctx, **{x: rt}), body, want), span=e.span)
        case Sum(k, v, dom, body) if is_semiring(want):
            dom2, dt = synth(ctx, dom)
            d = _need_dict(dt, "the domain of sum", dom.span)
            body2 = check(bind(ctx, **{k: INT, v: d.val}), body, want)
            return Sum(k, v, dom2, body2, span=e.span, ty=want)
        case Add(a, b) if is_semiring(want):
            return Add(check(ctx, a, want), check(ctx, b, want), span=e.span)
        case Mul(a, b) if want in (REAL, INT):
            return Mul(check(ctx, a, want), check(ctx, b, want), span=e.span)
        case _:  # [sub]: switch to synthesis and compare
            e2, got = synth(ctx, e)
            if got != want:
                raise SDQLTypeError(f"expected {want}, found {got}", e.span)
            return e2


def wrt_type(ctx: Ctx, x: str, span: Span | None = None) -> Type:
    """τ for ``gradient e x``: the type of ``x`` with its dense layers made sparse."""
    if x not in ctx:
        raise SDQLTypeError(f"cannot differentiate with respect to {x}: it is not an input "
                            f"(inputs: {', '.join(sorted(ctx)) or 'none'})", span)
    if is_discrete(ctx[x]):
        raise SDQLTypeError(f"cannot differentiate with respect to {x} : {ctx[x]}: it is "
                            "discrete", span)
    return sparse(erase(ctx[x]))


def typecheck(e: Expr, ctx: Ctx) -> tuple[Expr, Type]:
    """Type ``e`` in the context ``ctx``; returns the elaborated program and its type.

    >>> from sdqlite import parse_expr, parse_type, typecheck
    >>> e, t = typecheck(parse_expr("sum(<i, a> in V) {i -> a * a}"),
    ...                  {"V": parse_type("{int -> real}")})
    >>> print(t)
    {int -> real}
    """
    return synth(ctx, e)

"""Forward-mode AD: tensorized FAD ``D_τ[e]`` (Fig. fig:diffrules) and scalar FAD
``F[e] = D_real[e]`` (Fig. fig:forward_diffrules).

There are no pairs: the tangent of a variable ``x`` is the variable ``x'`` next to it
(or ``x''``, ... when the program already uses ``x'``), and ``D_τ[e]`` refers to the
primal variables of the program for primal values.  Types:

    D_τ[D] = D ⊗ τ,   D_τ[int] = D_τ[bool] = real,   D_τ[Γ, x : T] = D_τ[Γ], x : T, x' : D_τ[T]

The input is an elaborated program (from the type checker).  Every expression of a
discrete type has tangent ``0``; discrete means a scalar field of int or bool, so index
arrays such as ``{dense_int -> int}`` (Physical SDQLite) are discrete too.  The Physical
constructs on reals differentiate structurally, into sparse tangents (``tangent_type``):
``D[arr(lo:hi)] = sum(<p,_> in (lo:hi)) {p -> D[arr](p)}``,
``D[[e0, ...]] = {0 -> D[e0], ...}``, ``D[unique(e)] = unique(D[e])``.  Run ANF first to share
primal work (``sdqlite.ad.anf``); the rules are correct on any program.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import assert_never

from sdqlite.check.typecheck import Ctx, NodeTypes, bind
from sdqlite.errors import NOT_EXPANDED, DiffError, Span
from sdqlite.syntax import sugar
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
    free_vars,
    map_children,
)
from sdqlite.syntax.names import NameSupply, names_in
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.types import (
    INT,
    REAL,
    DictT,
    Type,
    is_discrete,
    order,
    scalar_of,
    sparse,
    tangent_type,
)


def sparsify(e: Expr, t: Type, fresh: Callable[[str], str]) -> Expr:
    """A program for the value of ``e : t`` as ``sparse(t)``:
    ``sum(<k,v> in e) {k -> v}`` at each layer that has a dense layer at or below it."""
    if sparse(t) == t:
        return e
    assert isinstance(t, DictT)
    k, v = fresh("k"), fresh("v")
    return Sum(k, v, e, Single(Var(k), sparsify(Var(v), t.val, fresh)))


def tangent_context(ctx: Ctx, tau: Type, tangents: Mapping[str, str]) -> dict[str, Type]:
    """D_τ[Γ]: each input next to its tangent."""
    out = dict(ctx)
    for x, t in ctx.items():
        out[tangents[x]] = tangent_type(t, tau)
    return out


class Differentiator:
    """D_τ[-] for one program: a name supply and the primal context for types."""

    def __init__(self, tau: Type, names: NameSupply, types: NodeTypes) -> None:
        if not (tau == REAL or (isinstance(tau, DictT) and scalar_of(tau) == REAL)):
            raise DiffError(f"τ must be a real tensor type, found {tau}")
        self.tau = tau
        self.names = names
        self.types = types  # the primal's types, found once

    def d(self, e: Expr, ctx: Ctx, tan: Mapping[str, str]) -> Expr:
        """D_τ[e] where ctx ⊢ e and ``tan`` names the tangent of each variable."""
        t = self.types(ctx, e)
        if is_discrete(t):  # Fig. forward_diffrules: discrete types have tangent 0
            return RealConst(0.0)
        match e:
            case Sum(k, v, dom, body):  # [sum]: let <k', v'> = <0, D[e1](k)> in D[e2]
                dt = self.types(ctx, dom)
                assert isinstance(dt, DictT)
                if k == "_" and v != "_" and not is_discrete(dt.val):  # D[e1](k) needs k
                    k = self.names.fresh("k")
                inner_ctx = bind(ctx, **{k: INT, v: dt.val})
                inner_tan = bind(tan, **{x: self.names.prime(x) for x in (v, k) if x != "_"})
                out: Expr
                out = self.d(body, inner_ctx, inner_tan)
                hoisted: tuple[str, Expr] | None = None
                if v != "_":
                    dv: Expr = RealConst(0.0)
                    if not is_discrete(dt.val):
                        ddom = self.d(dom, ctx, tan)
                        if free_vars(ddom) & {k, v}:  # D[e1] reads what k or v shadows:
                            hoisted = (self.names.fresh("d"), ddom)  # bound outside
                            ddom = Var(hoisted[0])
                        dv = Lookup(ddom, Var(k))
                    out = Let(inner_tan[v], dv, out)
                if k != "_":
                    out = Let(inner_tan[k], RealConst(0.0), out)
                summed = Sum(k, v, dom, out)
                return summed if hoisted is None else Let(hoisted[0], hoisted[1], summed)
            case Let(x, rhs, body):  # [let]: let <x, x'> = <e1, D[e1]> in D[e2]
                rt = self.types(ctx, rhs)
                xt = self.names.prime(x)
                drhs = self.d(rhs, ctx, tan)
                dbody = self.d(body, bind(ctx, **{x: rt}), bind(tan, **{x: xt}))
                # x and x' bound at once: as the paper prints it, unless e1 reads the x it
                # shadows, where D[e1] must come before x is rebound
                if x in free_vars(rhs):
                    return Let(xt, drhs, Let(x, rhs, dbody))
                return Let(x, rhs, Let(xt, drhs, dbody))
            case If(c, body):  # [if]
                return If(c, self.d(body, ctx, tan))
            case Lookup(dd, k):  # [lookup]: D[e1](e2)
                return Lookup(self.d(dd, ctx, tan), k)
            case Single(k, v):  # [singleton]: {e1 -> D[e2]}
                return Single(k, self.d(v, ctx, tan))
            case Mul(a, b):  # [mult]: e1 * D[e2] + D[e1] *^T[τ] e2
                ta, tb = self.types(ctx, a), self.types(ctx, b)
                a_s, b_s = (sparsify(a, ta, self.names.fresh),
                            sparsify(b, tb, self.names.fresh))  # primal meets tangent
                return Add(Mul(a_s, self.d(b, ctx, tan)),
                           self.times_t(self.d(a, ctx, tan), b_s, order(ta), order(tb)))
            case Add(a, b):  # [add]
                return Add(self.d(a, ctx, tan), self.d(b, ctx, tan))
            case UnOp(op, a):  # [op]: op'(e) * D[e]
                return Mul(_located(UNARY_OPS[op].derivative(a), e.span, a),
                           self.d(a, ctx, tan))
            case Var(x):  # [var]
                return Var(tan[x])
            case RealConst():  # [real]: zero[τ]
                return sugar.zero(self.tau)
            case Empty(ty):  # zero[D] is a constant: zero[D ⊗ τ]
                assert ty is not None, "FAD needs an elaborated program"
                return sugar.zero(tangent_type(ty, self.tau))
            case Unique(a):  # Physical: the identity
                return Unique(self.d(a, ctx, tan))
            case IntConst() | BoolConst() | Not() | Eq():  # discrete, above
                raise AssertionError("unreachable: discrete constructs have tangent 0")
            case Gradient():
                raise DiffError(NOT_EXPANDED, e.span)
            case SubArray(arr, lo, hi):  # Physical: sum(<p,_> in (lo:hi)) {p -> D[arr](p)}
                p = self.names.fresh("p")
                return Sum(p, "_", Range(lo, hi),
                           Single(Var(p), Lookup(self.d(arr, ctx, tan), Var(p))))
            case ArrayLit(elems):  # Physical: {0 -> D[e0], 1 -> D[e1], ...}
                if not elems:
                    return sugar.zero(tangent_type(t, self.tau))
                return sugar.dict_literal(
                    [(IntConst(i), self.d(x, ctx, tan)) for i, x in enumerate(elems)])
            case Range():  # an int array: discrete, above
                raise AssertionError("unreachable: discrete constructs have tangent 0")
            case _:
                assert_never(e)

    def times_t(self, da: Expr, b: Expr, m: int, mb: int) -> Expr:
        """``da *^T[τ] b`` (Fig. fig:diffrules) for ``da : tensor (m + n)``, ``τ = tensor n``
        and ``b : tensor mb``: the product with τ's indices moved last.  ``*^T[real]`` is
        ``*``, and so is a product by a scalar ``b``."""
        if self.tau == REAL or mb == 0:
            return Mul(da, b)
        if m == 0:
            return Mul(b, da)
        keys = [self.names.fresh("i") for _ in range(m)]
        ones: Expr = RealConst(1.0)
        for i in reversed(keys):
            ones = Single(Var(i), ones)

        def nest(level: int, src: Expr) -> Expr:
            if level == m:  # src is the τ-part of da
                return Mul(Mul(ones, b), src)
            r = self.names.fresh("r")
            return Sum(keys[level], r, src, nest(level + 1, Var(r)))

        return nest(0, da)


def _located(e: Expr, span: Span | None, arg: Expr) -> Expr:
    """The unary operations ``op'(arg)`` adds, located at ``op(arg)`` in the source (those
    of ``arg`` keep theirs): a failure in a derivative (``inv(0.0)`` for ``log'(0.0)``)
    is reported where the operation is."""
    if e is arg:
        return e
    match e:
        case UnOp(name, x):
            return UnOp(name, _located(x, span, arg), span=span)
    return map_children(e, lambda c: _located(c, span, arg))


def fad(e: Expr, ctx: Ctx, tau: Type = REAL, tangents: Mapping[str, str] | None = None,
        names: NameSupply | None = None) -> tuple[Expr, dict[str, str]]:
    """D_τ[e] for an elaborated ``ctx ⊢ e``; returns it with the tangent name of each input
    (``x'`` unless taken).  ``F[e]`` is ``fad(e, ctx)`` (τ = real)."""
    names = names or NameSupply(names_in(e) | set(ctx))
    tan = dict(tangents) if tangents is not None else {x: names.prime(x) for x in sorted(ctx)}
    return Differentiator(tau, names, NodeTypes(ctx, e)).d(e, ctx, tan), tan

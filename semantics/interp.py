"""The denotational interpreter ⟦Γ ⊢ e : T⟧ over dict-of-dict semirings.

One ``match`` arm per construct, reading like the semantics: no fast paths (speed
belongs to ``codegen/``).  It runs on a program elaborated by the type checker (the
annotations tell it which zero to build) and is generic over the scalar field: the same
code computes with floats, ``Fraction``s and sympy expressions.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import assert_never

from immutables import Map

from sdqlite.errors import NOT_EXPANDED, DataError, EvalError, Span
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
from sdqlite.syntax.types import Type
from semantics import values as V
from semantics.values import FLOAT, Field, Value

Env = Mapping[str, Value]
MAX_DENSE = 10_000_000  # the largest range or sub-array the reference interpreter builds


def _ty(t: Type | None, e: Expr) -> Type:
    if t is None:
        raise EvalError("internal: the program was not elaborated by the type checker "
                        "(call sdqlite.check.typecheck first)", e.span)
    return t


def _finite(x: Value, span: Span | None) -> Value:
    if isinstance(x, float) and not math.isfinite(x):
        raise EvalError("real overflow: the result is not a finite number", span)
    return x


def _int(x: Value, what: str, span: Span | None) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise EvalError(f"{what} must be an int, found {x!r}", span)
    return x


def evaluate(e: Expr, env: Env, field: Field = FLOAT) -> Value:
    """⟦e⟧(env) for an elaborated, well-typed ``e``; real literals are read in ``field``."""
    for name, v in env.items():
        if (why := V.not_a_value(name, v)) is not None:
            raise DataError(why)
    try:
        result = _eval(e, Map(env), field)
    except RecursionError:
        raise EvalError("program is nested too deeply to evaluate", e.span) from None
    if not _all_finite(result):
        raise EvalError("real overflow: the result holds a number that is not finite", e.span)
    return result


def _all_finite(v: Value) -> bool:
    if isinstance(v, dict):
        return all(_all_finite(x) for x in v.values())
    if isinstance(v, V.DenseArray):
        return all(_all_finite(x) for x in v)
    return not isinstance(v, float) or math.isfinite(v)


def _eval(e: Expr, env: Map[str, Value], field: Field) -> Value:
    # env is a persistent map: a binder extends it without copying (env.set)
    match e:  # arms from the most to the least often run: a match tries them in turn
        case Var(x):
            try:
                return env[x]
            except KeyError:
                raise EvalError(f"no value for variable {x}", e.span) from None
        case Let(x, rhs, body):
            return _eval(body, env.set(x, _eval(rhs, env, field)), field)
        case Mul(a, b):  # the tensor product
            return _finite(V.mul(_eval(a, env, field), _eval(b, env, field)), e.span)
        case Add(a, b):
            return _finite(V.add(_eval(a, env, field), _eval(b, env, field)), e.span)
        case Single(k, v):  # ⟦{k -> v}⟧, with {k -> 0} = {}
            return V.single(_int(_eval(k, env, field), "a dictionary key", k.span),
                            _eval(v, env, field))
        case Lookup(d, k, _, ty):  # ⟦d(k)⟧ = the entry, or zero[T] when missing
            key = _int(_eval(k, env, field), "a lookup key", k.span)
            return V.lookup(_eval(d, env, field), key, V.zero_of(_ty(ty, e), field))
        case Sum(k, v, dom, body, _, ty):  # ⟦sum(<k,v> in d) b⟧ = Σ_{(k,v) ∈ d} ⟦b⟧
            acc = V.Accumulator(V.zero_of(_ty(ty, e), field))
            for key, val in V.entries(_eval(dom, env, field)):
                acc.add(_eval(body, env.set(k, key).set(v, val), field))
            return acc.value
        case RealConst(r):
            return field.literal(r)
        case IntConst(n):
            return n
        case BoolConst(b):
            return b
        case Empty(ty):  # zero[T]
            return V.zero_of(_ty(ty, e), field)
        case Not(a):
            return not _eval(a, env, field)
        case If(c, body, _, ty):  # no else branch: zero[T] when false
            if _eval(c, env, field):
                return _eval(body, env, field)
            return V.zero_of(_ty(ty, e), field)
        case Eq(a, b):
            return bool(_eval(a, env, field) == _eval(b, env, field))
        case UnOp(name, a):
            return unop(name, _eval(a, env, field), e.span)
        case Range(lo, hi):  # (st:en) = {p -> p | st <= p < en}
            st = _int(_eval(lo, env, field), "a range start", lo.span)
            en = _int(_eval(hi, env, field), "a range end", hi.span)
            _size(en - st, e.span)
            return V.dense(list(range(st, en)), st)
        case SubArray(arr, lo, hi, _, ty):  # arr(st:en) = {p -> arr(p) | st <= p < en}
            a, z = _eval(arr, env, field), V.zero_of(_ty(ty, e), field)
            st = _int(_eval(lo, env, field), "a sub-array start", lo.span)
            en = _int(_eval(hi, env, field), "a sub-array end", hi.span)
            _size(en - st, e.span)
            return V.dense([V.lookup(a, p, z) for p in range(st, en)], st)
        case Unique(a):  # the identity (a promise for rewrites and codegen)
            return _eval(a, env, field)
        case ArrayLit(elems):
            return V.dense([_eval(x, env, field) for x in elems])
        case Gradient():  # an AD step after checking expands it (Fig. fig:api)
            raise EvalError(NOT_EXPANDED, e.span)
        case _:
            assert_never(e)


def _size(n: int, span: Span | None) -> None:
    if n > MAX_DENSE:
        raise EvalError(f"dense array of {n} positions is larger than the reference "
                        f"interpreter builds ({MAX_DENSE})", span)


def unop(name: str, x: Value, span: Span | None) -> Value:
    """``op(x)``, or the EvalError of an argument outside the domain or a result that is
    not finite (the C++ backend reports its failures through this too)."""
    op = UNARY_OPS[name]
    symbolic = V.is_sympy(x) and not getattr(x, "is_number", False)
    if not symbolic and not op.domain(x):
        raise EvalError(f"{name}({x}) is outside the domain of {name} ({op.domain_text})", span)
    try:
        if V.is_sympy(x) and op.sympy_name:
            import sympy

            return getattr(sympy, op.sympy_name)(x)
        return _finite(op.numeric(x), span)
    except (OverflowError, ValueError, ZeroDivisionError) as err:
        raise EvalError(f"{name}({x}): {err}", span) from None


sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

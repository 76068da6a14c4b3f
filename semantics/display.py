"""Values in the paper's notation, as programs that denote them.

``show_value(v)`` prints ``{0 -> 1.5, 3 -> 2.0}``, ``[1.0, 0.0, 2.0]``, ``2.5``; reading
the text back with ``read_value`` gives the same value.  A dense array that starts at a
position ``s > 0`` (a sub-array) prints as ``[0, ..., x_s, ...](s:e)``.  ``summary(v,
n)`` prints at most n numbers, and where it stops a layer says how long it is:
``{ 0 -> 1.0, 1 -> 2.0, … (4,000 entries) }`` (the REPL's view of a large value).
"""

from __future__ import annotations

from fractions import Fraction

from sdqlite.errors import DataError
from sdqlite.syntax.ast import ArrayLit, BoolConst, Empty, Expr, IntConst, RealConst, SubArray
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.printer import real_text, show
from sdqlite.syntax.sugar import dict_literal
from sdqlite.syntax.types import Type
from semantics.values import FLOAT, DenseArray, Field, Value, is_sympy, zero_like


def value_to_expr(v: Value) -> Expr:
    """A closed program denoting ``v``."""
    if isinstance(v, bool):
        return BoolConst(v)
    if isinstance(v, int):
        return IntConst(v)
    if isinstance(v, float):
        return RealConst(v)
    if isinstance(v, Fraction):
        return RealConst(float(v))
    if isinstance(v, dict):
        if not v:
            return Empty()
        return dict_literal([(IntConst(k), value_to_expr(v[k])) for k in sorted(v)])
    if isinstance(v, DenseArray):
        if v.start < 0:
            raise DataError("a dense array starting at a negative position has no literal")
        pad = [zero_like(v.items[0])] * v.start if v.items else []
        lit = ArrayLit(tuple(value_to_expr(x) for x in [*pad, *v.items]))
        return lit if v.start == 0 else SubArray(lit, IntConst(v.start), IntConst(v.end))
    if is_sympy(v):
        raise DataError("a symbolic value has no SDQLite literal")
    raise DataError(f"not an SDQLite value: {v!r}")


def show_value(v: Value) -> str:
    """The paper's notation for ``v`` (symbolic entries print as sympy expressions)."""
    if not _has_sympy(v):
        return _text(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} -> {show_value(v[k])}" for k in sorted(v)) + " }"
    if isinstance(v, DenseArray):
        return "[" + ", ".join(show_value(x) for x in v) + "]"
    return str(v)


def summary(v: Value, limit: int) -> str:
    """``show_value(v)`` when ``v`` holds at most ``limit`` numbers; otherwise its first
    ``limit`` numbers in key order, each layer cut short ending in ``… (N entries)``."""
    budget = [limit]

    def go(v: Value) -> str:
        if isinstance(v, dict):
            opening, closing, items = "{ ", " }", [(f"{k} -> ", v[k]) for k in sorted(v)]
        elif isinstance(v, DenseArray) and v.start == 0:
            opening, closing, items = "[", "]", [("", x) for x in v.items]
        else:  # a number (or a sub-array, printed whole)
            budget[0] -= 1
            return show_value(v)
        if not items:
            return show_value(v)
        parts = []
        for key, x in items:
            if budget[0] <= 0:
                parts.append(f"… ({len(items):,} entries)")
                break
            parts.append(key + go(x))
        return opening + ", ".join(parts) + closing

    return go(v)


def _text(v: Value) -> str:
    """``show(value_to_expr(v))``, written directly (a value prints on one line); making
    the program first took ten times as long (properties/test_roundtrip.py)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float | Fraction):
        return real_text(float(v))
    if isinstance(v, dict):
        if not v:
            return "{}"
        return "{ " + ", ".join(f"{k} -> {_text(v[k])}" for k in sorted(v)) + " }"
    if isinstance(v, DenseArray):
        if v.start < 0:
            raise DataError("a dense array starting at a negative position has no literal")
        pad = [zero_like(v.items[0])] * v.start if v.items else []
        lit = "[" + ", ".join(_text(x) for x in [*pad, *v.items]) + "]"
        return lit if v.start == 0 else f"{lit}({v.start}:{v.end})"
    return show(value_to_expr(v))  # not a value: value_to_expr says why


def _has_sympy(v: Value) -> bool:
    if isinstance(v, dict):
        return any(_has_sympy(x) for x in v.values())
    if isinstance(v, DenseArray):
        return any(_has_sympy(x) for x in v)
    return is_sympy(v)


def read_value(text: str, want: Type | None = None, field: Field = FLOAT) -> tuple[Value, Type]:
    """Read a closed expression (such as a printed value) and evaluate it."""
    from sdqlite.check.typecheck import check, synth
    from semantics.interp import evaluate

    e = parse_expr(text)
    if want is None:
        e2, t = synth({}, e)
    else:
        e2, t = check({}, e, want), want
    return evaluate(e2, {}, field), t

"""The table of real unary operations ``op(e)`` (DESIGN.md, "Unary real operations").

Each entry gives the name, the sympy function (by name, for the symbolic oracle), the
numeric function, the derivative ``op'`` as an SDQLite expression of the argument (used
by forward mode: ``F[op(e)] = op'(e) * F[e]``), the domain, and the C++ expression and
domain test the backend generates (``codegen/emit.py``).  There is no division in
SDQLite, so ``inv`` (1/x) is an operation: ``log' = inv`` needs it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sdqlite.syntax.ast import Add, Expr, Mul, RealConst, UnOp, subterms


@dataclass(frozen=True)
class UnaryOp:
    name: str
    sympy_name: str
    numeric: Callable[[Any], Any]
    derivative: Callable[[Expr], Expr]
    domain: Callable[[Any], bool]
    domain_text: str
    cpp: str  # a C++ expression of the double x
    cpp_domain: str = "true"  # a C++ test of x
    #: it fails on no real: defined everywhere and never overflowing (exp overflows);
    #: the optimizer moves only total terms to where they are evaluated more, or less
    total: bool = False


def _u(name: str) -> Callable[[Expr], Expr]:
    return lambda x: UnOp(name, x)


def _neg(e: Expr) -> Expr:
    return Mul(RealConst(-1.0), e)


def _always(_: Any) -> bool:
    return True


UNARY_OPS: dict[str, UnaryOp] = {
    op.name: op
    for op in [
        #       name    sympy    numeric           op'(x)                                domain
        UnaryOp("sin", "sin", math.sin, _u("cos"), _always, "every real", "std::sin(x)",
                total=True),
        UnaryOp("cos", "cos", math.cos, lambda x: _neg(UnOp("sin", x)), _always, "every real",
                "std::cos(x)", total=True),
        UnaryOp("exp", "exp", math.exp, _u("exp"), _always, "every real", "std::exp(x)"),
        UnaryOp("log", "log", math.log, _u("inv"), lambda x: x > 0, "x > 0", "std::log(x)",
                "x > 0"),
        UnaryOp(
            "sqrt", "sqrt", math.sqrt,
            lambda x: Mul(RealConst(0.5), UnOp("inv", UnOp("sqrt", x))),
            lambda x: x >= 0, "x >= 0", "std::sqrt(x)", "x >= 0",
        ),
        UnaryOp(
            "tanh", "tanh", math.tanh,
            lambda x: Add(RealConst(1.0), _neg(Mul(UnOp("tanh", x), UnOp("tanh", x)))),
            _always, "every real", "std::tanh(x)", total=True,
        ),
        UnaryOp(
            "inv", "", lambda x: 1 / x,
            lambda x: _neg(Mul(UnOp("inv", x), UnOp("inv", x))),
            lambda x: x != 0, "x != 0", "1.0 / x", "x != 0",
        ),
    ]
}


def total(e: Expr) -> bool:
    """No operation of ``e`` can fail, whatever its variables hold: each unary operation
    in it is total.  (A real or integer overflow of + or * aside: DESIGN.md.)"""
    return not any(isinstance(t, UnOp) and not UNARY_OPS[t.op].total for t in subterms(e))

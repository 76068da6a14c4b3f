"""The interpreter over other fields (sympy, rationals) and semantic equality."""

from fractions import Fraction

import pytest
import sympy

from sdqlite.check.typecheck import typecheck
from sdqlite.errors import EvalError
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.types import REAL, tensor
from semantics.interp import evaluate
from semantics.values import FRACTION, dense, sympy_field, values_equal


def _run(text: str, ctx: dict[str, object], env: dict[str, object], field: object) -> object:
    elab, _ = typecheck(parse_expr(text), ctx)  # type: ignore[arg-type]
    return evaluate(elab, env, field)  # type: ignore[arg-type]


def test_dot_product_over_sympy_symbols() -> None:
    a0, a2, b2 = sympy.symbols("a0 a2 b2")
    value = _run("sum(<i, a> in V1) a * V2(i)", {"V1": tensor(1), "V2": tensor(1)},
                 {"V1": {0: a0, 2: a2}, "V2": {2: b2}}, sympy_field())
    assert sympy.expand(value - a2 * b2) == 0  # V2(0) is missing: a0 * 0 drops out


def test_symbolic_ops_and_literals_are_exact() -> None:
    x = sympy.Symbol("x")
    value = _run("0.1 * log(x) + sin(x)", {"x": REAL}, {"x": x}, sympy_field())
    assert sympy.simplify(value - (sympy.Rational(1, 10) * sympy.log(x) + sympy.sin(x))) == 0


def test_rational_literals_read_their_decimal_text() -> None:
    assert _run("0.1 + 0.2", {}, {}, FRACTION) == Fraction(3, 10)


def test_symbolic_domain_errors_are_still_caught_on_numbers() -> None:
    with pytest.raises(EvalError, match="outside the domain of log"):
        _run("log(-2.0)", {}, {}, sympy_field())


def test_values_equal_tolerance() -> None:
    assert values_equal({0: 1.0}, {0: 1.0 + 1e-12}, rel_tol=1e-9)
    assert not values_equal({0: 1.0}, {0: 1.0 + 1e-12})
    assert values_equal({0: 1.0, 1: 1e-15}, {0: 1.0}, rel_tol=1e-9, abs_tol=1e-12)
    assert not values_equal({0: 1.0, 1: 1e-3}, {0: 1.0}, rel_tol=1e-9, abs_tol=1e-12)
    assert not values_equal(dense([1.0]), dense([1.0, 0.0]), rel_tol=1e-9)

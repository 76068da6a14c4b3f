"""Equality, zero and typing of values mean what they say (``semantics.values``), for
the oracle's comparisons rest on them:

* ``values_equal`` is exact over the rationals (two different fractions are different,
  however close their floats); a relative tolerance alone is one; with tolerances, an
  entry on one side only counts as zero when it is within ``abs_tol`` of it, the bound
  included, and neither side is changed by the comparison; values of different
  kinds (a number, a dictionary, a dense array) are never equal, and comparing them
  raises nothing; dense arrays are equal entry by entry at the same positions; a sympy
  expression equals the number it simplifies to, on either side.
* ``is_zero`` holds of a sympy expression that expands to zero, and not of one that
  does not; of a number of any kind (int, float, Fraction, bool, a numpy scalar) exactly
  when it equals 0.
* ``has_type`` holds of a scalar for its own type only (a bool is no int, a real no int),
  of a dictionary only if its keys are ints (not bools, reals or strings), and of a
  dense array only in its one canonical form: an array (not the dictionary of its
  entries, nor an empty dictionary), starting at 0 when it is empty.
* A bool equals only a bool (``True == 1`` in Python), whichever side it is on.
* ``inner_extents_forgotten`` keeps arrays outside dictionaries as they are and reads
  those stored under a key as the dictionary of their non-zero positions.
* ``stored_zero`` finds no zero entry in a canonical value, and in a value with one
  stored zero finds exactly its keys; the error for such data names where it is when
  the data are otherwise of the declared type, and the two types when they are not.
* The interpreter refuses a range or sub-array of more than ``MAX_DENSE`` positions
  before building it, with an error that names the size, and builds one of exactly
  ``MAX_DENSE``; it evaluates a program nested 2,000 deep (past Python's default
  recursion limit).
* An argument outside a unary operation's domain is an EvalError naming the domain, in
  every field (a float, a Fraction, a sympy number); a sympy symbol is not tested
  against it (its value is not known).
* ``evaluate`` called directly with data that do not fit their types (its callers
  check data first) still fails cleanly: a key or bound that is not an int (a bool, a
  real) is an EvalError naming what it is, and a result holding a number that is not
  finite (inf or nan passed through) is a real overflow, never returned; and so is a
  step that overflows, even where a later one would make the result finite again; and a
  program the checker has not elaborated is an EvalError that says to type-check it.
"""

import re
from fractions import Fraction
from unittest.mock import patch

import numpy as np
import pytest
import sympy
from hypothesis import example, given
from hypothesis import strategies as st

from properties.generators import values
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import EvalError
from sdqlite.syntax.ast import Add, Expr, RealConst
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type
from semantics.interp import MAX_DENSE, evaluate
from semantics.values import (
    FLOAT,
    FRACTION,
    DenseArray,
    Value,
    data_mismatch,
    dense,
    has_type,
    inner_extents_forgotten,
    is_zero,
    stored_zero,
    sympy_field,
    values_equal,
    zero_of,
)

fractions = st.fractions(max_denominator=10**6)


@given(fractions, fractions)
def test_values_equal_is_exact_over_the_rationals(a: Fraction, b: Fraction) -> None:
    assert values_equal(a, b) == (a == b)
    tiny = a + Fraction(1, 10**30)  # the same float as a, another rational
    assert not values_equal(a, tiny)
    assert values_equal(a, tiny, rel_tol=1e-12, abs_tol=1e-12)
    if a:  # a relative tolerance alone: within it, a nearby number is equal
        assert values_equal(a, a * (1 + Fraction(1, 10**15)), rel_tol=1e-12)
        assert not values_equal(a, a * (1 + Fraction(1, 10**9)), rel_tol=1e-12)
    # an absolute tolerance alone: within it, a number near zero is zero
    assert values_equal(Fraction(1, 10**15), Fraction(0), abs_tol=1e-12)
    assert not values_equal(Fraction(1, 10**9), Fraction(0), abs_tol=1e-12)


@given(fractions.filter(bool))
def test_an_entry_on_one_side_is_zero_within_abs_tol_bound_included(a: Fraction) -> None:
    tol = abs(float(a))
    left, right = {0: {2: a}}, {0: {1: a, 2: a}}  # (issue 30: a lookup that inserts)
    assert values_equal(left, right, abs_tol=tol)
    assert left == {0: {2: a}} and right == {0: {1: a, 2: a}}, "the comparison changed them"
    assert values_equal({0: a}, {}, abs_tol=tol)
    assert values_equal({}, {0: {1: a}}, abs_tol=tol)
    assert not values_equal({0: a}, {}, abs_tol=tol / 2)
    assert values_equal({0: dense([a, 0.0])}, {}, abs_tol=tol)  # an array: every position
    assert not values_equal({}, {0: dense([0.0, a])}, abs_tol=tol / 2)


@given(fractions, st.sampled_from([0.0, 1e-9]))
def test_values_of_different_kinds_are_not_equal(a: Fraction, tol: float) -> None:
    kinds = [a, {0: a} if a else {}, dense([a])]
    for i, x in enumerate(kinds):
        for j, y in enumerate(kinds):
            if i != j:
                assert not values_equal(x, y, rel_tol=tol, abs_tol=tol), (x, y)


@given(st.booleans(), st.sampled_from([0, 1, 0.0, 1.0, Fraction(1)]),
       st.sampled_from([0.0, 1e-9]))
def test_a_bool_equals_only_a_bool(b: bool, n: Value, tol: float) -> None:
    for x, y in [(b, n), (n, b)]:
        assert not values_equal(x, y, rel_tol=tol, abs_tol=tol), (x, y)
    assert values_equal(b, b, rel_tol=tol, abs_tol=tol)
    assert not values_equal(b, not b, rel_tol=tol, abs_tol=tol)


@given(fractions, st.integers(-3, 3))
def test_dense_arrays_are_equal_entry_by_entry_at_the_same_positions(
        a: Fraction, start: int) -> None:
    x = DenseArray((a, a + 1), start)
    assert values_equal(x, DenseArray((a, a + 1), start))
    assert not values_equal(x, DenseArray((a, a + 1), start + 1), rel_tol=1e-9, abs_tol=1e-9)
    assert not values_equal(x, DenseArray((a, a + 2), start))  # entry by entry
    assert not values_equal(x, DenseArray((a,), start))  # and nothing raised
    assert not values_equal(DenseArray((a, a + 1, a), start), x)


@given(st.integers(-5, 5).filter(bool))
def test_a_sympy_expression_equals_the_number_it_simplifies_to_either_way(c: int) -> None:
    x = sympy.Symbol("x")
    e = (x + c) ** 2 - x**2 - 2 * c * x  # c**2, not written so
    assert values_equal(e, Fraction(c * c)) and values_equal(Fraction(c * c), e)
    assert not values_equal(e, Fraction(c * c + 1)) and not values_equal(Fraction(c * c + 1), e)


@given(st.integers(-5, 5).filter(bool))
def test_is_zero_expands_sympy_expressions(c: int) -> None:
    x = sympy.Symbol("x")
    assert is_zero((x + c) ** 2 - x**2 - 2 * c * x - c**2)
    assert not is_zero((x + c) ** 2 - x**2)


@given(st.sampled_from([int, float, Fraction, bool, np.int64, np.float32, np.float64]),
       st.sampled_from([0, 1, -2]))
def test_is_zero_is_equal_to_zero_for_a_number_of_any_kind(kind: type, n: int) -> None:
    x = kind(n)
    assert is_zero(x) == (n == 0), (kind, x)


SCALARS: list[Type] = [REAL, INT, BOOL]


@given(st.sampled_from(SCALARS).flatmap(lambda t: st.tuples(st.just(t), values(t, exact=True))))
def test_a_scalar_has_its_own_type_only(case: tuple[Type, Value]) -> None:
    t, v = case
    for other in SCALARS:
        assert has_type(v, other) == (other == t), (v, other)


ENTRY_TYPES: list[Type] = [REAL, INT, DictT(REAL)]


@given(st.sampled_from(ENTRY_TYPES).flatmap(
    lambda t: st.tuples(st.just(t), values(DictT(t), exact=True).filter(bool))),
    st.data(), st.sampled_from([True, False, 1.0, Fraction(1, 2), "0", None]))
def test_a_dictionary_has_int_keys_only(case: tuple[Type, Value], data: st.DataObject,
                                        key: object) -> None:
    """A canonical dictionary has its type; with one key replaced by a bool, a real, a
    string or None it has none (the data check rests on it)."""
    t, v = case
    assert isinstance(v, dict) and has_type(v, DictT(t))
    old = data.draw(st.sampled_from(sorted(v)))
    bad = {**{k: x for k, x in v.items() if k not in (old, key)}, key: v[old]}  # True == 1
    assert not has_type(bad, DictT(t)), bad


@given(st.sampled_from(ENTRY_TYPES).flatmap(
    lambda t: st.tuples(st.just(t), values(DictT(t, dense=True), exact=True))),
    st.integers(-3, 3).filter(bool))
def test_a_dense_array_has_one_canonical_form(case: tuple[Type, Value], start: int) -> None:
    """A canonical dense array has its type; the same entries as a dictionary, an empty
    dictionary and an empty array starting elsewhere than 0 do not (they denote what
    an array does, but are not its canonical form)."""
    t, v = case
    dt = DictT(t, dense=True)
    assert isinstance(v, DenseArray) and has_type(v, dt)
    entries = {p: x for p, x in enumerate(v.items, v.start) if not is_zero(x)}
    for other in [entries, {}, DenseArray((), start)]:
        assert not has_type(other, dt), other
    assert not has_type(v, DictT(t)), "an array is no sparse dictionary"


DENSE2 = DictT(DictT(REAL, dense=True), dense=True)


@example(dense([dense([0.0, 5.0], 2), dense([0.0], 1)], 3))  # views: starts past 0
@given(values(DENSE2, exact=True))
def test_only_arrays_under_a_dictionary_forget_their_extents(v: Value) -> None:
    """``inner_extents_forgotten`` keeps a top-level array and the arrays in it (their
    positions are the value's shape), and reads an array stored under a dictionary key
    as the dictionary of its non-zero positions."""
    assert isinstance(v, DenseArray)
    assert inner_extents_forgotten(v) == v
    assert inner_extents_forgotten({3: v}) == {3: {
        p: {q: x for q, x in enumerate(row, row.start) if x}
        for p, row in enumerate(v, v.start) if any(row)}}


@given(st.integers(0, 3), st.sampled_from(["({lo}:{hi})", "[1.0, 2.0]({lo}:{hi})"]))
def test_a_dense_array_too_large_to_build_is_refused(lo: int, form: str) -> None:
    hi = lo + MAX_DENSE + 1
    e, _ = typecheck(parse_expr(form.format(lo=lo, hi=hi)), {})
    with pytest.raises(EvalError, match=f"{MAX_DENSE + 1} positions"):
        evaluate(e, {})


@pytest.mark.parametrize("form", ["(0:{n})", "[1.0, 2.0]({lo}:{n})"])
def test_a_dense_array_of_the_largest_size_is_built(form: str) -> None:
    """The bound is inclusive (checked with a small bound: the real one, 10^7 positions,
    is built the same way)."""
    small = 6
    with patch("semantics.interp.MAX_DENSE", small):
        built = evaluate(typecheck(parse_expr(form.format(n=small, lo=0)), {})[0], {})
        assert isinstance(built, DenseArray) and len(built) == small
        with pytest.raises(EvalError, match=f"{small + 1} positions"):
            evaluate(typecheck(parse_expr(form.format(n=small + 1, lo=0)), {})[0], {})


def test_a_program_nested_past_pythons_default_recursion_limit_evaluates() -> None:
    depth = 2_000  # Python's default limit is 1,000 frames
    e: Expr = RealConst(1.0)
    for _ in range(depth):
        e = Add(e, RealConst(1.0))
    assert evaluate(typecheck(e, {})[0], {}, FRACTION) == depth + 1


OUTSIDE = [("log", 0), ("log", -1), ("sqrt", -1), ("inv", 0)]


@given(st.sampled_from(OUTSIDE), st.sampled_from([float, Fraction, sympy.Integer]))
def test_an_argument_outside_the_domain_is_an_error_in_every_field(
        case: tuple[str, int], number: type) -> None:
    name, x = case
    field = {float: FLOAT, Fraction: FRACTION, sympy.Integer: sympy_field()}[number]
    e = typecheck(parse_expr(f"{name}(x)"), {"x": REAL})[0]
    domain = re.escape(UNARY_OPS[name].domain_text)
    with pytest.raises(EvalError, match=rf"outside the domain of {name} \({domain}\)"):
        evaluate(e, {"x": number(x)}, field)
    symbol = evaluate(e, {"x": sympy.Symbol("x")}, sympy_field())  # not tested: symbolic
    assert symbol.has(sympy.Symbol("x")), symbol


@st.composite
def with_a_stored_zero(draw: st.DrawFn) -> tuple[Type, Value, Value, tuple[int, ...]]:
    """A canonical value of a type with a sparse layer, and the value with a zero stored
    at the keys of one new entry of one of its dictionaries."""
    scalars: list[Type] = [REAL, INT]
    t = draw(st.sampled_from(scalars))
    layers = draw(st.lists(st.booleans(), min_size=1, max_size=3).filter(
        lambda ds: not all(ds)))  # dense or not, from the leaf up; one sparse at least
    for d in layers:
        t = DictT(t, dense=d)
    v = draw(values(t))

    def plant(x: Value, xt: Type) -> tuple[Value, tuple[int, ...]] | None:
        """x with a zero planted in some dictionary of it (None: x has no dictionary)."""
        if not isinstance(xt, DictT):
            return None
        if isinstance(x, DenseArray):
            spots = [i for i, y in enumerate(x.items) if plant(y, xt.val) is not None]
            if not spots:
                return None
            i = draw(st.sampled_from(spots))
            done = plant(x.items[i], xt.val)
            assert done is not None
            items = list(x.items)
            items[i] = done[0]
            return dense(items, x.start), (x.start + i, *done[1])
        assert isinstance(x, dict)
        deeper = [k for k in x if plant(x[k], xt.val) is not None]
        if draw(st.booleans()) and deeper:
            k = draw(st.sampled_from(deeper))
            done = plant(x[k], xt.val)
            assert done is not None
            return {**x, k: done[0]}, (k, *done[1])
        k = draw(st.integers(0, 6).filter(lambda k: k not in x))
        return {**x, k: zero_of(xt.val, FLOAT)}, (k,)

    planted = plant(v, t)
    assert planted is not None or isinstance(v, DenseArray)
    if planted is None:  # a dense array with no dictionary inside: plant in a new one
        return draw(with_a_stored_zero())
    return t, v, planted[0], planted[1]


@example((DictT(DictT(REAL), dense=True), dense([{}, {1: 2.0}], 2), dense([{}, {1: 0.0}], 2),
          (3, 1)))  # an array starting at 2: the zero is at position 3
@given(with_a_stored_zero())
def test_stored_zero_finds_the_one_zero_entry_of_a_value(
        case: tuple[Type, Value, Value, tuple[int, ...]]) -> None:
    t, canonical, planted, keys = case
    assert has_type(canonical, t) and stored_zero(canonical) is None
    assert not has_type(planted, t) and stored_zero(planted) == keys
    at = "".join(f"({k})" for k in keys)
    assert f"stores a zero at x{at}" in data_mismatch("x", planted, t, t)
    assert data_mismatch("x", planted, REAL, t) == f"input x is declared real but its data is {t}"


#: str(e) of an error in a program starts with its location (source text: <program>)
AT = r"<program>:\d+:\d+: "

INT_PLACES = {  # a program with an int in each place an int is needed: what the error names
    "{n -> 1.0}": "a dictionary key", "V(n)": "a lookup key", "(n:3)": "a range start",
    "(0:n)": "a range end", "A(n:3)": "a sub-array start", "A(0:n)": "a sub-array end"}


@given(st.sampled_from(sorted(INT_PLACES)), st.sampled_from([True, False, 1.0, 2.5,
                                                            Fraction(1, 2)]))
def test_evaluate_refuses_a_key_or_bound_that_is_not_an_int(source: str, bad: Value) -> None:
    ctx: dict[str, Type] = {"n": INT, "V": DictT(REAL), "A": DictT(REAL, dense=True)}
    e = typecheck(parse_expr(source), ctx)[0]
    env = {"n": bad, "V": {1: 2.0}, "A": dense([1.0, 2.0])}
    with pytest.raises(EvalError, match=f"^{AT}{INT_PLACES[source]} must be an int, found "):
        evaluate(e, env)
    assert evaluate(e, {**env, "n": 1}) is not None  # an int in its place is fine


@given(st.sampled_from([float("inf"), float("-inf"), float("nan")]),
       st.sampled_from(["x", "V", "W"]))
def test_evaluate_never_returns_a_number_that_is_not_finite(bad: float, name: str) -> None:
    ctx: dict[str, Type] = {"x": REAL, "V": DictT(REAL), "W": DictT(DictT(REAL, dense=True))}
    env: dict[str, Value] = {"x": bad, "V": {0: 1.0, 3: bad},
                             "W": {2: dense([1.0, bad])}}
    with pytest.raises(EvalError, match="^" + AT + r"real overflow: the result holds a number that "
                                        r"is not finite"):
        evaluate(typecheck(parse_expr(name), ctx)[0], env)


@given(st.sampled_from(["inv(x * x)", "tanh(x * x)", "exp(-1.0 * (x * x))",
                        "(x * x) * 0.0", "sum(<i, v> in V) inv(v * x)"]),
       st.sampled_from([1e200, -1e200, 1e300]))
def test_a_step_that_overflows_is_an_error_even_if_the_result_is_finite(
        source: str, x: float) -> None:
    ctx: dict[str, Type] = {"x": REAL, "V": DictT(REAL)}
    e = typecheck(parse_expr(source), ctx)[0]
    with pytest.raises(EvalError, match=f"^{AT}real overflow"):
        evaluate(e, {"x": x, "V": {0: x}})
    assert evaluate(e, {"x": 0.5, "V": {0: 0.5}}) is not None  # no overflow: a value


@given(st.sampled_from(["{0 -> 1.0} + {}", "sum(<k, v> in {0 -> 1.0}) v", "{0 -> 1.0}(3)",
                        "if false then {0 -> 1.0}", "[1.0, 2.0](1:2)"]))
def test_evaluate_asks_for_an_elaborated_program(source: str) -> None:
    with pytest.raises(EvalError, match=r"not elaborated by the type checker \(call "
                                        r"sdqlite.check.typecheck first\)"):
        evaluate(parse_expr(source), {"x": 1.0})
    ctx: dict[str, Type] = {"x": REAL}
    assert evaluate(typecheck(parse_expr(source), ctx)[0], {"x": 1.0}) is not None

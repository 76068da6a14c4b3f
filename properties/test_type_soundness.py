"""Type soundness of the interpreter (Fig. fig:langs, §6.2 non-smooth semantics):
if Γ ⊢ e : T and ρ ∈ ⟦Γ⟧, then ⟦e⟧(ρ) is a value of type T — and a canonical one
(dictionaries store no zeros, dense arrays are well formed), whose reals are in the
field the interpreter computes in (floats; Fractions, or floats where a unary operation
computed; sympy numbers: a literal is read into the field).  Checked in the float
field, exactly in the field of rationals, and in sympy's, the oracle's.  Elaboration is idempotent.

A value's data tell its type where they determine it (``values.type_of``, used when an
input is given without a declaration): for a generated value v of type T, type_of(v) is
T, or None exactly when no path through v reaches a scalar (an empty dictionary or
array at every branch).
"""

from fractions import Fraction

import sympy
from hypothesis import example, given
from hypothesis import strategies as st

from properties.generators import INPUT_TYPES, Generated, programs, programs_with_env, values
from sdqlite.ad.gradient import checked
from sdqlite.check.typecheck import typecheck
from sdqlite.syntax.ast import IntConst, Mul, Range, SubArray
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type
from semantics.interp import evaluate
from semantics.values import (
    FLOAT,
    FRACTION,
    DenseArray,
    Field,
    Value,
    has_type,
    is_sympy,
    sympy_field,
    type_of,
)

Case = tuple[Generated, dict[str, Value]]

# Shrunk counterexample: a sub-array of an *empty* int array was padded with a real zero.
EMPTY_SUBARRAY: Case = (
    Generated({"x": REAL},
              Mul(IntConst(0), SubArray(Range(IntConst(0), IntConst(0)), IntConst(0),
                                        IntConst(1))),
              DictT(INT, dense=True)),
    {"x": Fraction(1)},
)


def _reals(v: Value) -> list[Value]:
    if isinstance(v, dict):
        return [r for x in v.values() for r in _reals(x)]
    if isinstance(v, DenseArray):
        return [r for x in v.items for r in _reals(x)]
    return [] if isinstance(v, bool | int) else [v]


# over the rationals a unary operation (exp, sin, ...) computes in floats
IN_FIELD = {"float": lambda r: isinstance(r, float),
            "fraction": lambda r: isinstance(r, Fraction | float), "sympy": is_sympy}


def _sound(case: Case, field: Field) -> None:
    g, env = case
    elab, t = checked(g.expr, g.ctx)
    value = evaluate(elab, env, field)
    assert has_type(value, t), (value, t)
    assert all(IN_FIELD[field.name](r) for r in _reals(value)), (value, field.name)


@given(programs_with_env())
def test_well_typed_programs_evaluate_to_their_type(case: Case) -> None:
    _sound(case, FLOAT)


@given(programs_with_env(exact=True))
@example(EMPTY_SUBARRAY)
def test_soundness_over_the_rationals(case: Case) -> None:
    _sound(case, FRACTION)


@given(programs_with_env(exact=True))
def test_soundness_over_sympy(case: Case) -> None:
    g, env = case
    _sound((g, {x: _symbolic(v) for x, v in env.items()}), sympy_field())


@given(programs())
def test_elaboration_is_idempotent(g: Generated) -> None:
    """Checking an elaborated program again changes nothing (and keeps its type)."""
    elab, t = checked(g.expr, g.ctx)
    again, t2 = typecheck(elab, g.ctx)
    assert again == elab and t2 == t


TYPES = [*INPUT_TYPES, BOOL, DictT(INT), DictT(BOOL, dense=True), DictT(DictT(INT))]


@given(st.sampled_from(TYPES).flatmap(lambda t: st.tuples(st.just(t), st.booleans()).flatmap(
    lambda tb: st.tuples(st.just(tb[0]), values(tb[0], exact=tb[1])))))
def test_the_data_of_a_value_tell_its_type(tv: tuple[Type, Value]) -> None:
    t, v = tv

    def determined(x: Value) -> bool:
        if isinstance(x, dict):
            return any(determined(y) for y in x.values())
        if isinstance(x, DenseArray):
            return any(determined(y) for y in x.items)
        return True

    assert type_of(v) == (t if determined(v) else None)
    assert type_of(_symbolic(v)) == type_of(v)  # the oracle's reals are sympy numbers


def _symbolic(x: Value) -> Value:
    if isinstance(x, dict):
        return {k: _symbolic(y) for k, y in x.items()}
    if isinstance(x, DenseArray):
        return DenseArray(tuple(_symbolic(y) for y in x.items), x.start)
    if isinstance(x, float | Fraction):
        return sympy.Rational(str(x))
    return x

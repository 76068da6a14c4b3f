"""Type soundness of the interpreter (Fig. fig:langs, §6.2 non-smooth semantics):
if Γ ⊢ e : T and ρ ∈ ⟦Γ⟧, then ⟦e⟧(ρ) is a value of type T — and a canonical one
(dictionaries store no zeros, dense arrays are well formed).  Checked in the float
field and, exactly, in the field of rationals.  Elaboration is idempotent.
"""

from fractions import Fraction

from hypothesis import example, given

from properties.generators import Generated, programs, programs_with_env
from sdqlite.ast import IntConst, Mul, Range, SubArray
from sdqlite.typecheck import typecheck
from sdqlite.types import INT, REAL, DictT
from semantics.interp import evaluate
from semantics.values import FLOAT, FRACTION, Field, Value, has_type

Case = tuple[Generated, dict[str, Value]]

# Shrunk counterexample: a sub-array of an *empty* int array was padded with a real zero.
EMPTY_SUBARRAY: Case = (
    Generated({"x": REAL},
              Mul(IntConst(0), SubArray(Range(IntConst(0), IntConst(0)), IntConst(0),
                                        IntConst(1))),
              DictT(INT, dense=True)),
    {"x": Fraction(1)},
)


def _sound(case: Case, field: Field) -> None:
    g, env = case
    elab, t = typecheck(g.expr, g.ctx)
    value = evaluate(elab, env, field)
    assert has_type(value, t), (value, t)


@given(programs_with_env())
def test_well_typed_programs_evaluate_to_their_type(case: Case) -> None:
    _sound(case, FLOAT)


@given(programs_with_env(exact=True))
@example(EMPTY_SUBARRAY)
def test_soundness_over_the_rationals(case: Case) -> None:
    _sound(case, FRACTION)


@given(programs())
def test_elaboration_is_idempotent(g: Generated) -> None:
    """Checking an elaborated program again changes nothing (and keeps its type)."""
    elab, t = typecheck(g.expr, g.ctx)
    again, t2 = typecheck(elab, g.ctx)
    assert again == elab and t2 == t

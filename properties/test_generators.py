"""The generators are sound and complete enough to test the paper's statements.

* Soundness: every generated program is well typed, with the intended type:
  Γ ⊢ e ⇒ T by our checker for the (Γ, e, T) the generator drew; every generated value
  of type T is a canonical value of T.
* Coverage: every construct of the AST (the closed union ``Expr``) is generated; a
  construct that is never generated fails this file, so no theorem silently skips it.
"""

from typing import get_args

from hypothesis import given, settings
from hypothesis import strategies as st

from properties.generators import INPUT_TYPES, RESULT_TYPES, Generated, programs, values
from sdqlite.ad.gradient import checked
from sdqlite.syntax.ast import Expr, subterms
from sdqlite.syntax.types import Type
from semantics.values import Value, has_type


@given(programs())
def test_generated_programs_have_their_type(g: Generated) -> None:
    _, t = checked(g.expr, g.ctx)
    assert t == g.type


@given(st.sampled_from(INPUT_TYPES + RESULT_TYPES).flatmap(
    lambda t: st.tuples(st.just(t), values(t))))
def test_generated_values_have_their_type(tv: tuple[Type, Value]) -> None:
    t, v = tv
    assert has_type(v, t)


def test_every_construct_is_generated() -> None:
    seen: set[type] = set()

    @settings(max_examples=400, derandomize=True, database=None)
    @given(programs())
    def collect(g: Generated) -> None:
        seen.update(type(s) for s in subterms(g.expr))

    collect()
    missing = {c.__name__ for c in get_args(Expr)} - {c.__name__ for c in seen}
    assert not missing, f"constructs never generated: {sorted(missing)}"

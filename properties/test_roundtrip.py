"""Printer and parser are inverse: ``parse(show(e)) == e`` for every AST, and a printed
value reads back as a program denoting the same value (``read(show_value(v)) == v``),
and is the program ``value_to_expr`` gives for it, printed.  A dense array starting past
0, of reals, ints or bools, prints as a literal padded with its scalar's zero then
sliced: ``[0.0, 0.0, 1.5](2:3)`` (and reads back, but for bools: an array literal holds
semiring values).  The REPL's summary of a value is its printed text when nothing is cut,
and otherwise a prefix of it, each cut layer followed by its length.
"""

from fractions import Fraction

from hypothesis import example, given
from hypothesis import strategies as st

from properties.generators import (
    DENSE_REAL,
    INPUT_TYPES,
    RESULT_TYPES,
    Generated,
    programs,
    values,
)
from sdqlite.syntax.ast import Add, ArrayLit, Expr, IntConst, Mul, RealConst, Single, SubArray, Var
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type
from semantics.display import read_value, show_value, summary, value_to_expr
from semantics.values import Value, dense, values_equal


@given(programs())
def test_parse_show_roundtrip(g: Generated) -> None:
    assert parse_expr(show(g.expr)) == g.expr


@given(programs())
def test_show_is_stable(g: Generated) -> None:
    text = show(g.expr)
    assert show(parse_expr(text)) == text


def test_roundtrip_negative_literals_and_dict_literals() -> None:
    cases: list[Expr] = [
        Mul(RealConst(-2.0), Var("x")),
        Add(Var("x"), RealConst(-0.25)),
        Add(Add(Single(IntConst(1), RealConst(1.0)), Single(IntConst(2), Var("y"))),
            Single(IntConst(3), RealConst(-1.0))),
        Add(Single(IntConst(1), RealConst(1.0)), Add(Single(IntConst(2), Var("y")),
                                                     Single(IntConst(3), RealConst(1.0)))),
    ]
    for e in cases:
        assert parse_expr(show(e)) == e, show(e)


@given(st.sampled_from(INPUT_TYPES + RESULT_TYPES).flatmap(
    lambda t: st.tuples(st.just(t), values(t))))
@example((INPUT_TYPES[0], -0.0))
@example((DENSE_REAL, dense([1.5, -2.0], 2)))  # a sub-array: [0.0, 0.0, 1.5, -2.0](2:4)
@example((DictT(DENSE_REAL), {-3: dense([0.0, 1e300]), 7: dense([Fraction(1, 4)])}))
def test_printed_values_read_back(tv: tuple[Type, Value]) -> None:
    t, v = tv
    back, back_t = read_value(show_value(v), t)
    assert back_t == t
    assert values_equal(back, v)
    assert show_value(v) == show(value_to_expr(v))  # the program it denotes, printed


@given(st.sampled_from(INPUT_TYPES + RESULT_TYPES).flatmap(
    lambda t: st.tuples(values(t), st.integers(0, 12))))
@example(({0: {1: 1.5, 2: 2.5}, 3: {}}, 1))  # cut inside the first row
def test_a_summary_is_the_printed_value_cut_short(vn: tuple[Value, int]) -> None:
    v, n = vn
    text, whole = summary(v, n), show_value(v)
    if "…" not in text:
        assert text == whole
        return
    assert whole.startswith(text.split("… (")[0])  # up to the first cut, the same text
    assert summary(v, 10**9) == whole


SCALARS: list[Type] = [REAL, INT, BOOL]


@given(st.sampled_from(SCALARS).flatmap(lambda s: st.tuples(
    st.just(s), st.lists(values(s, nonzero=False), min_size=1, max_size=3),
    st.integers(1, 3))))
def test_a_sub_array_prints_as_its_scalars_zeros_then_its_entries(
        case: tuple[Type, list[Value], int]) -> None:
    scalar, items, start = case
    v = dense(items, start)
    if scalar != BOOL:  # an array literal holds semiring values: bools print only
        back, _ = read_value(show_value(v), DictT(scalar, dense=True))
        assert values_equal(back, v)
    lit = parse_expr(show_value(v))
    assert isinstance(lit, SubArray) and isinstance(lit.arr, ArrayLit), lit
    assert [show(x) for x in lit.arr.elems[:start]] == [{REAL: "0.0", INT: "0",
                                                          BOOL: "false"}[scalar]] * start

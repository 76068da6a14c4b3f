"""The derived forms mean their definitions (``sdqlite/syntax/sugar.py``; Figs. fig:langs and
fig:api).

1. ``{k1 -> v1, ..., kn -> vn}`` ≜ ``{k1 -> v1} + ... + {kn -> vn}``: its value is the sum
   of its singletons (a repeated key adds up); the tree of ``+`` is balanced, at most
   ⌈log₂ n⌉ deep, and up to three entries it is the left-nested sum of the definition.
2. ``onehot[tensor n] x`` is defined exactly for real tensor types; its value is 1 at
   ``(i₁, …, iₙ, i₁, …, iₙ)`` for each entry ``(i₁, …, iₙ)`` that x stores, and nothing
   else (an independent walk of x); it is one sum per layer of x, the innermost binding
   no value (``_``): it reads where x stores, never what.
3. ``zero[T]`` is T's zero (a canonical value of T that ``is_zero``); ``zero[bool]`` is
   not defined.
4. ``-e`` ≜ ``-1 * e`` (a literal's negation is the negative literal) and ``a - b`` ≜
   ``a + -1 * b``; ``let <v1,...,vn> = <e1,...,en> in e`` is the nested lets, and a
   tuple of another length is an error.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from properties.generators import values
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import ParseError
from sdqlite.syntax import sugar
from sdqlite.syntax.ast import Add, Expr, IntConst, Let, Mul, RealConst, Single, Sum, Var
from sdqlite.syntax.names import NameSupply
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, RealT, Type
from semantics import values as V
from semantics.interp import evaluate
from semantics.values import FRACTION, DenseArray, Value

entries = st.lists(st.tuples(st.integers(0, 4), st.integers(-3, 3).filter(bool)),
                   min_size=1, max_size=40)


def depth(e: Expr) -> int:
    return 1 + max(depth(e.left), depth(e.right)) if isinstance(e, Add) else 0


@given(entries)
@example([(0, 1), (1, 2), (2, 3)]).via("three entries: the left-nested sum")
@example([(0, 1), (0, -1)]).via("a key that cancels")
def test_a_dictionary_literal_is_the_balanced_sum_of_its_singletons(
        pairs: list[tuple[int, int]]) -> None:
    lit = sugar.dict_literal([(IntConst(k), RealConst(float(x))) for k, x in pairs])
    want: Value = {}
    for k, x in pairs:
        want = V.add(want, {k: Fraction(x)})
    assert evaluate(typecheck(lit, {})[0], {}, FRACTION) == want
    n = len(pairs)
    assert depth(lit) <= math.ceil(math.log2(n))
    if n <= 3:
        singles = [Single(IntConst(k), RealConst(float(x))) for k, x in pairs]
        left: Expr = singles[0]
        for s in singles[1:]:
            left = Add(left, s)
        assert lit == left


def tensor_types(leaves: list[Type]) -> st.SearchStrategy[Type]:
    def wrap(t: Type, dense: list[bool]) -> Type:
        for d in dense:
            t = DictT(t, dense=d)
        return t

    return st.builds(wrap, st.sampled_from(leaves), st.lists(st.booleans(), max_size=3))


def stored(x: Value, path: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """The key paths of the entries x stores (a dense array stores every position)."""
    if isinstance(x, DenseArray):
        return [p for i, y in enumerate(x.items, x.start) for p in stored(y, (*path, i))]
    if isinstance(x, dict):
        return [p for k, y in x.items() for p in stored(y, (*path, k))]
    return [path]


@given(st.data(), tensor_types([REAL, INT, BOOL]))
def test_onehot_is_one_on_the_diagonal_of_the_stored_entries(
        data: st.DataObject, t: Type) -> None:
    names = NameSupply({"x"})
    leaf = t
    while isinstance(leaf, DictT):
        leaf = leaf.val
    if not isinstance(leaf, RealT):
        with pytest.raises(ParseError, match=r"onehot needs a real tensor type"):
            sugar.onehot(t, Var("x"), names.fresh)
        return
    x = data.draw(values(t, exact=True))
    raw = sugar.onehot(t, Var("x"), names.fresh)
    # one sum per layer, each iterating the value the one outside it binds, and the
    # innermost binding none (`_`): x's values are never read, only where it stores
    binders, node = [], raw
    while isinstance(node, Sum):
        binders.append(node.val)
        assert isinstance(node.body, Single)
        node = node.body.val
    layers = 0
    leaf_t: Type = t
    while isinstance(leaf_t, DictT):
        leaf_t, layers = leaf_t.val, layers + 1
    assert len(binders) == layers, binders
    if layers:
        assert binders[-1] == "_" and "_" not in binders[:-1], binders
    e = typecheck(raw, {"x": t})[0]
    want: Value = Fraction(1)
    if isinstance(t, DictT):
        want = {}
        for path in stored(x):
            one: Value = Fraction(1)
            for k in reversed((*path, *path)):
                one = {k: one}
            want = V.add(want, one)
    assert evaluate(e, {"x": x}, FRACTION) == want


@given(tensor_types([REAL, INT]))
def test_zero_is_the_zero_of_its_type(t: Type) -> None:
    z = evaluate(typecheck(sugar.zero(t), {})[0], {})
    assert V.is_zero(z) and V.has_type(z, t)
    with pytest.raises(ParseError, match=r"zero\[bool\] is not defined"):
        sugar.zero(BOOL)


@given(st.integers(-5, 5), st.integers(-5, 5), st.booleans())
def test_negation_and_subtraction_are_their_definitions(a: int, b: int, literal: bool
                                                        ) -> None:
    env: dict[str, Any] = {"a": Fraction(a), "b": Fraction(b)}
    ctx: dict[str, Type] = {"a": REAL, "b": REAL}
    operand: Expr = RealConst(float(b)) if literal else Var("b")
    neg = sugar.negate(operand)
    if literal:
        assert neg == RealConst(float(-b))
        assert sugar.negate(IntConst(b)) == IntConst(-b)
    else:
        assert neg == Mul(IntConst(-1), operand)
    got = evaluate(typecheck(sugar.subtract(Var("a"), operand), ctx)[0], env, FRACTION)
    assert got == Fraction(a - b)


@given(st.lists(st.integers(-3, 3), min_size=1, max_size=4), st.integers(0, 5))
def test_a_tupled_let_is_the_nested_lets(xs: list[int], other: int) -> None:
    names = [f"v{i}" for i in range(len(xs))]
    body: Expr = Var(names[-1])
    e = sugar.tuple_let(names, [IntConst(x) for x in xs], body)
    for name, x in zip(names, xs, strict=True):
        assert isinstance(e, Let) and e.name == name and e.rhs == IntConst(x)
        e = e.body
    assert e == body
    if other != len(xs):
        with pytest.raises(ParseError, match=f"binds {other} names but gives {len(xs)}"):
            sugar.tuple_let([f"w{i}" for i in range(other)], [IntConst(x) for x in xs], body)

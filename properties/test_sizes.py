"""The sizes of a result's layers bound its keys (``sdqlite/check/sizes.py``).

For generated programs Γ ⊢ e : T over inputs with declared sizes (a dense x of size n, a
dense m×n X2, V1's keys and M's columns below n, M's rows below m) and data ρ obeying
them: wherever ``result_sizes(e, Γ)`` names a size s for layer l of T, every key stored
in layer l of ⟦e⟧ρ lies in 0 .. N-1, where N is the number the data give s — fixed by a
dense input, else the largest key of the layers declared with s, plus one
(``semantics.extents.size_bounds``).  The same holds of ``gradient e x`` (T ⊗ τ) with the
sizes of e's layers followed by x's declared ones, as ``codegen/api.py`` reads them.
This is what lets the compiled code accumulate such a layer in an array of N positions
(a dense destination).
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction as Q

from hypothesis import event, example, given
from hypothesis import strategies as st

from properties.generators import SIZED_CTX, sized_environments, sized_programs
from sdqlite.ad.gradient import gradient
from sdqlite.check.sizes import NO_KEYS, declared, result_sizes
from sdqlite.check.typecheck import typecheck
from sdqlite.syntax.ast import Add, Expr, IntConst, Lookup, Mul, RealConst, Single, Sum, Var
from sdqlite.syntax.parser import parse_expr
from semantics.extents import check_extents, facts, size_bounds
from semantics.interp import evaluate
from semantics.values import DenseArray, Value, dense


def keys_by_layer(v: Value, level: int = 0) -> Iterator[tuple[int, int]]:
    """(layer, key) for every key stored in every layer of ``v``."""
    if isinstance(v, dict):
        for k, x in v.items():
            yield level, k
            yield from keys_by_layer(x, level + 1)
    elif isinstance(v, DenseArray):
        for k, x in enumerate(v.items, v.start):
            yield level, k
            yield from keys_by_layer(x, level + 1)


@st.composite
def sized_tensors(draw: st.DrawFn, order: int = 1, depth: int = 3) -> Expr:
    """A vector (order 1) or matrix (order 2) built from the sized inputs so that its
    layers have named sizes: the inputs themselves, maps keyed by a sum's key, rows of M,
    outer products, sums and scalings of tensors, lookups of a matrix."""
    n = draw(st.integers(0, 10**6))  # a name supply for binders

    def bind(stem: str) -> str:
        return f"{stem}{n}_{depth}"

    sub = depth - 1
    if order == 1:
        options = ["V1", "M(c)", "x as a dictionary"] + (
            ["map", "add", "scale", "row of", "row sums"] if depth > 0 else [])
        match draw(st.sampled_from(options)):
            case "V1":
                return Var("V1")
            case "M(c)":
                return Lookup(Var("M"), IntConst(draw(st.integers(0, 2))))
            case "x as a dictionary":
                k, v = bind("k"), bind("v")
                return Sum(k, v, Var("x"), Single(Var(k), Var(v)))
            case "map":
                k, v = bind("k"), bind("v")
                return Sum(k, v, draw(sized_tensors(1, sub)),
                           Single(Var(k), Mul(Var(v), RealConst(2.0))))
            case "add":
                return Add(draw(sized_tensors(1, sub)), draw(sized_tensors(1, sub)))
            case "scale":
                return Mul(RealConst(1.5), draw(sized_tensors(1, sub)))
            case "row of":
                return Lookup(draw(sized_tensors(2, sub)), IntConst(draw(st.integers(0, 2))))
            case _:  # { i -> sum of row i }
                i, r, k, v = bind("i"), bind("r"), bind("k"), bind("v")
                return Sum(i, r, Var("M"), Single(Var(i), Sum(k, v, Var(r), Var(v))))
    options = ["M", "X2 as a dictionary"] + (["outer", "add", "rows mapped"] if depth > 0 else [])
    match draw(st.sampled_from(options)):
        case "M":
            return Var("M")
        case "X2 as a dictionary":
            i, r, j, w = bind("i"), bind("r"), bind("j"), bind("w")
            return Sum(i, r, Var("X2"), Single(Var(i), Sum(j, w, Var(r), Single(Var(j), Var(w)))))
        case "outer":
            return Mul(draw(sized_tensors(1, sub)), draw(sized_tensors(1, sub)))
        case "add":
            return Add(draw(sized_tensors(2, sub)), draw(sized_tensors(2, sub)))
        case _:
            i, r, k, v = bind("i"), bind("r"), bind("k"), bind("v")
            return Sum(i, r, Var("M"), Single(Var(i), Sum(k, v, Var(r), Single(Var(k), Var(v)))))


def _dictionary_programs() -> st.SearchStrategy[tuple[Expr, str]]:
    """Programs whose result's layers have named sizes, and an input to differentiate by."""
    return st.tuples(st.sampled_from([1, 2]).flatmap(lambda o: sized_tensors(o)),
                     st.sampled_from(["x", "X2"]))


# + of an n-sized and an m-sized vector: its keys lie below neither alone (m = 3 > n = 2)
@example((parse_expr("V1 + sum(<i, r> in M) {i -> sum(<k, v> in r) v}"), "x"),
         {"x": dense([Q(1), Q(0)]), "V1": {0: Q(1)}, "M": {2: {1: Q(3)}}, "s'": Q(1),
          "X2": dense([dense([Q(1), Q(1)])] * 3)})
@given(st.one_of(sized_programs(), _dictionary_programs()),
       st.one_of(sized_environments(), sized_environments(nonempty=True)))
def test_declared_sizes_bound_the_results_keys(case: tuple[Expr, str],
                                               env: dict[str, Value]) -> None:
    e, wrt = case
    elab, _ = typecheck(e, SIZED_CTX)
    sizes = result_sizes(elab, SIZED_CTX)
    grad, _ = typecheck(gradient(elab, wrt, SIZED_CTX), SIZED_CTX)
    fixed = check_extents({x: (t, env[x], None) for x, t in SIZED_CTX.items()})
    bounds = size_bounds((f for x, t in SIZED_CTX.items() for f in facts(t, env[x], x)),
                         fixed)
    for what, value, named in [("the program", evaluate(elab, env), sizes),
                               ("its gradient", evaluate(grad, env),
                                sizes + declared(SIZED_CTX[wrt]))]:
        checked = 0
        for level, k in keys_by_layer(value):
            s = named[level] if level < len(named) else None
            if s is not None and s != NO_KEYS:
                assert 0 <= k < bounds.get(s, 0), (what, level, k, s, bounds)
                checked += 1
        event(f"{what}: {'keys checked against a named size' if checked else 'none checked'}")

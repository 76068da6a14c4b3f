"""The passes preserve meaning and type (§5.2, Fig. fig:trans, and the lookup at an
iterated key).

For generated Γ ⊢ e : T — of Logical and of Physical SDQLite, and differentiated
(``gradient e x``) — sparsity propagation and multiplication normalization return a
program of type T with ⟦pass(e)⟧ρ = ⟦e⟧ρ for generated ρ (exactly over the rationals,
to 1e-9 where a unary operation computes in floats).  Each pass reaches a normal form:
after normalization no normalization rule applies anywhere (every product of a sparse
tensor has become a sum of scalar products), and after sparsity propagation no sparsity
rule applies (in particular no ``let x = zero[D]`` is left).

The lookup at an iterated key keeps the meaning of generated programs and gradients,
of programs whose binders shadow inputs, each other and the variables of the domains they
iterate (``lookup_shapes``), and on inputs that obey their declared sizes, of gradients
that read x at keys iterated from sized layers: of x's size n (where the declared-extent
reason applies and fires) and of another size (M's row keys, of size m: where it must
not fire).

The lookup fires however a path is written: row i of M as ``M(i)``, as the value
iterated from M at i, or through let-bound names of either; and a let whose right side
reads the name it binds is no alias (``let V = shift(V)``: V is not what it reads).

Row views (``row_views``, after the last saturation): a ``let``-bound row of a stored
input, iterated after, iterated in place keeps the meaning wherever its index array is
unique within the row's segment, the formats' promise; a binder that hides a name the row
reads keeps that loop over the row as it is.  The promise is needed: a segment with a
repeated key, viewed as if promised, changes the value under a non-linear body.  Neither
the row view nor the lookup in place drops a term that can fail (``DROPPING``: without
the guard, a program that fails gets a value).

Each pass reports what it did: a positive count per rule that fired, none when the
program is unchanged (one round), at least two rounds when something fired (the last
changed nothing), and a deadline that does not pass changes nothing.
"""

import itertools
import time
from collections import Counter
from fractions import Fraction
from unittest.mock import patch

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from properties.generators import (
    BINDER_FREE,
    FAMILY_CTX,
    SHAPE_CTX,
    SIZED_CTX,
    Draw,
    Generated,
    environments,
    lookup_family,
    lookup_shapes,
    sized_environments,
    sized_lookup_family,
    sized_programs,
)
from properties.test_rules import assert_same_meaning, places, rewrite_sites
from sdqlite.ad.gradient import checked, expand, gradient
from sdqlite.check.typecheck import Ctx, typecheck
from sdqlite.errors import DataError, EvalError, SDQLiteError
from sdqlite.opt.passes import (
    iterated_key_lookup,
    normalize_multiplication,
    row_views,
    sparsity_propagation,
)
from sdqlite.opt.rules import NORMALIZATION, SPARSITY, family
from sdqlite.syntax.ast import Expr, Let, subterms
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import INT as INT_T
from sdqlite.syntax.types import REAL as REAL_T
from sdqlite.syntax.types import DictT, erase, tensor
from semantics.extents import check_extents
from semantics.interp import evaluate
from semantics.values import FRACTION, Value, dense, values_equal


@given(rewrite_sites(), st.data())
def test_sparsity_propagation_is_sound(site: tuple[Generated, Expr],
                                       data: st.DataObject) -> None:
    g, elab = site
    out = sparsity_propagation(elab, g.ctx).program
    assert_same_meaning(site, out, data)
    _assert_normal_form(out, g.ctx, SPARSITY)


@given(rewrite_sites(), st.data())
def test_normalization_is_sound_and_leaves_scalar_products(site: tuple[Generated, Expr],
                                                          data: st.DataObject) -> None:
    g, elab = site
    out = normalize_multiplication(elab, g.ctx).program
    assert_same_meaning(site, out, data)
    _assert_normal_form(out, g.ctx, NORMALIZATION)


@given(rewrite_sites())
def test_a_pass_reports_what_it_did(site: tuple[Generated, Expr]) -> None:
    """``fired`` counts the rewrites: a positive count per rule that fired, none when
    the program comes back as it went in; a pass stops at the first round that changes
    nothing (one round on its own output); a deadline that does not pass changes
    nothing, and one that has passed keeps the input, with ``stop: time limit`` (the
    pipeline's report and its ``--time-limit`` rest on these).  A round of a pass of
    Fig. fig:trans rewrites bottom-up and walks each result again, so the second round
    changes nothing: the passes never come near ``MAX_ROUNDS``.  The iterated-key lookup
    stops at its first round that fires nothing, and fires nothing on its own output."""
    g, elab = site
    for run in (sparsity_propagation, normalize_multiplication):
        r = run(elab, g.ctx)
        assert all(n > 0 for n in r.fired.values()), r.fired
        if not r.fired:
            assert show(r.program) == show(elab) and r.rounds == 1
        else:  # the last round is the one that changed nothing
            assert r.rounds == 2, r
        again = run(r.program, g.ctx)
        assert (again.rounds, again.fired) == (1, Counter())
        late = run(elab, g.ctx, time.perf_counter() + 3600)
        assert (late.program, late.fired, late.stop) == (r.program, r.fired, "done")
        gone = run(elab, g.ctx, time.perf_counter() - 1)
        assert (show(gone.program), gone.fired, gone.stop) == (show(elab), Counter(),
                                                                "time limit")
    r = iterated_key_lookup(elab, g.ctx)
    assert all(n > 0 for n in r.fired.values()), r.fired
    if not r.fired:
        assert show(r.program) == show(elab) and r.rounds == 1
    again = iterated_key_lookup(r.program, g.ctx)
    assert (again.rounds, again.fired) == (1, Counter())


def _assert_normal_form(e: Expr, ctx: Ctx, name: str) -> None:
    for sub_e, scope in places(e, ctx):
        for rule in family(name):
            assert rule.match(sub_e, scope) is None, f"{rule.name} still applies to {sub_e}"


@given(rewrite_sites(), st.data())
def test_iterated_key_lookup_is_sound(site: tuple[Generated, Expr], data: st.DataObject) -> None:
    g, elab = site
    assert_same_meaning(site, iterated_key_lookup(elab, g.ctx).program, data)


def test_iterated_key_lookup_fires_on_generated_gradients() -> None:
    fired: Counter[str] = Counter()

    @settings(max_examples=500, derandomize=True, database=None)
    @given(rewrite_sites(fresh=True))
    def collect(site: tuple[Generated, Expr]) -> None:
        g, elab = site
        fired.update(iterated_key_lookup(elab, g.ctx).fired)

    collect()
    assert fired["iterated-key-lookup (same-dictionary)"] > 0


def _shape(src: str) -> Generated:
    e, t = typecheck(parse_expr(src), SHAPE_CTX)
    return Generated(SHAPE_CTX, e, t)


@given(lookup_shapes(), environments(SHAPE_CTX, exact=True))
# the let's own name in its one-hot's body: M(i) is the input there, the let after it
@example(_shape("sum(<j, V> in M) let M = sum(<i, d> in V) {i -> sum(<k, w> in M(i)) d} in "
                "sum(<k7, u> in V) {n -> M(k7)}"),
         {"V": {0: Fraction(2)}, "M": {0: {1: Fraction(3)}}, "a": dense([Fraction(1)]),
          "s": Fraction(1), "n": 0}).via("found by lookup_shapes")
# the one-hot's value binder named as the key looked up: b[k := i][i := V(i)] is wrong
@example(_shape("sum(<i, u> in V) {n -> (sum(<k, i> in V) {k -> sum(<j, w> in V) i * V(k)})(i)}"),
         {"V": {0: Fraction(2), 1: Fraction(3)}, "M": {}, "a": dense([]), "s": Fraction(1),
          "n": 0}).via("found by lookup_shapes (thorough)")
def test_iterated_key_lookup_is_sound_with_shadowed_binders(g: Generated,
                                                            env: dict[str, Value]) -> None:
    elab = checked(g.expr, g.ctx)[0]
    out, t = typecheck(iterated_key_lookup(elab, g.ctx).program, g.ctx)
    assert t == g.type
    assert values_equal(evaluate(elab, env, FRACTION), evaluate(out, env, FRACTION))


def _lets(e: Expr) -> int:
    return sum(isinstance(t, Let) for t in subterms(e))


def test_iterated_key_lookup_is_sound_on_every_program_of_a_small_family() -> None:
    """Bounded-exhaustive: every well-typed program of ``lookup_family`` keeps its
    meaning on data with keys both stored and not (M's column 5 is no row of M), and
    the pass leaves nothing for a second run; where the one-hot's body has no binder of
    its own (nothing can capture the key), the entry is substituted: no let is added."""
    env: dict[str, Value] = {
        "V": {0: Fraction(2), 5: Fraction(3)}, "a": dense([]), "s": Fraction(1), "n": 0,
        "M": {0: {0: Fraction(1), 5: Fraction(4)}, 1: {1: Fraction(3)}}}
    checked, fired = 0, Counter[str]()
    for body, text in lookup_family():
        try:
            e, t = typecheck(parse_expr(text), SHAPE_CTX)
        except SDQLiteError:
            continue
        result = iterated_key_lookup(e, SHAPE_CTX)
        out, t2 = typecheck(result.program, SHAPE_CTX)
        assert t2 == t, text
        assert values_equal(evaluate(e, env, FRACTION), evaluate(out, env, FRACTION)), text
        assert not iterated_key_lookup(out, SHAPE_CTX).fired, text  # it went to the end
        if body < BINDER_FREE:  # nothing to capture: the entry is substituted, no let
            assert _lets(out) <= _lets(e), (text, show(out))
        checked, fired = checked + 1, fired + result.fired
    assert checked > 1000 and fired["iterated-key-lookup (same-dictionary)"] > 200, fired


def test_iterated_key_lookup_fires_on_lookup_shapes() -> None:
    """The shadowing programs are ones the pass rewrites, not ones it leaves alone."""
    fired: Counter[str] = Counter()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(lookup_shapes())
    def collect(g: Generated) -> None:
        fired.update(iterated_key_lookup(checked(g.expr, g.ctx)[0], g.ctx).fired)

    collect()
    assert fired["iterated-key-lookup (same-dictionary)"] >= 30, fired


#: gradients w.r.t. a matrix: rewriting ``M'(i)`` exposes the row's one-hot looked up
#: at j, for the next round
LAYERED = [(SHAPE_CTX, "M", "sum(<i, r> in M) sum(<j, w> in r) M(i)(j) * w"),
           (SIZED_CTX, "X2", "sum(<i, r> in X2) sum(<j, w> in r) X2(i)(j) * w"),
           (SHAPE_CTX, "M", "sum(<i, r> in M) sum(<j, w> in M(i)) M(i)(j) * 2.0")]


def test_the_iterated_key_lookup_goes_on_while_a_round_exposes_a_layer() -> None:
    for ctx, wrt, text in LAYERED:
        e = typecheck(gradient(typecheck(parse_expr(text), ctx)[0], wrt, ctx), ctx)[0]
        r = iterated_key_lookup(e, ctx)
        assert r.rounds > 2, (text, r.rounds)  # two that fire, and the idle one
        assert not iterated_key_lookup(r.program, ctx).fired, text


#: (Γ, what to differentiate w.r.t., a program reading row i of M at LET/A/B)
ALIASED = [
    (SHAPE_CTX, None,
     "sum(<i, r> in M) LET sum(<j, a> in A) {n -> (sum(<k, b> in B) {k -> b * 1.5})(j)}"),
    (SIZED_CTX, "x", "sum(<i, r> in M) LET sum(<j, a> in A) x(j) * a"),
    (SIZED_CTX, "X2", "sum(<i, r> in M) LET sum(<j, a> in A) X2(i)(j) * a"),
]


def test_the_iterated_key_lookup_sees_a_path_however_it_is_written() -> None:
    """Row i of M written ``M(i)``, as the value r iterated from M at i, through let-
    bound names of either, or as ``y(i)`` with y bound to M: the pass fires the same
    rewrites (by the same reason) on every way of writing it, and at least one (a path
    it does not follow is a lookup it leaves)."""
    for ctx, wrt, template in ALIASED:
        seen: set[tuple[tuple[str, int], ...]] = set()
        for let in ("", "let y = M(i) in", "let y = r in", "let y = r in let z = y in",
                    "let y = M in"):
            paths = ["M(i)", "r", *[x for x in ("y", "z") if f"let {x}" in let]]
            if let == "let y = M in":  # the matrix aliased: its row is y(i)
                paths = ["M(i)", "r", "y(i)"]
            for a, b in itertools.product(paths, paths):
                text = template.replace("LET", let).replace("A", a).replace("B", b)
                e = typecheck(parse_expr(text), ctx)[0]
                if wrt is not None:
                    e = typecheck(gradient(e, wrt, ctx), ctx)[0]
                seen.add(tuple(sorted(iterated_key_lookup(e, ctx).fired.items())))
        assert len(seen) == 1 and () not in seen, (template, seen)


def test_a_key_iterated_from_a_computed_dictionary_is_not_known_stored() -> None:
    """The pass's scope: X is a path and i iterates X (written as a path, however: the
    test above).  A dictionary computed by an expression, ``(A + B)(i)``, is no path,
    even where it equals one (r, iterated from ``A + B`` at i): the pass does not
    compare expressions, so it knows nothing of its keys and leaves h(j) a lookup, while
    over r itself it fires (recording the sum's domain as a path when it is none fired
    here too)."""
    ctx: Ctx = {"A": tensor(2), "B": tensor(2)}
    fired: dict[str, dict[str, int]] = {}
    for dom in ("r", "(A + B)(i)"):
        text = (f"sum(<i, r> in A + B) let h = sum(<k, x> in r) {{k -> x * x}} in "
                f"sum(<j, y> in {dom}) h(j)")
        e = typecheck(parse_expr(text), ctx)[0]
        result = iterated_key_lookup(e, ctx)
        fired[dom] = dict(result.fired)
        env: dict[str, Value] = {"A": {0: {0: Fraction(2), 1: Fraction(1)}},
                                 "B": {0: {1: Fraction(3)}, 2: {0: Fraction(5)}}}
        # by hand: A + B = {0 -> {0 -> 2, 1 -> 4}, 2 -> {0 -> 5}}; squares 4 + 16 + 25
        assert evaluate(e, env, FRACTION) == evaluate(result.program, env, FRACTION) == 45
    assert fired == {"r": {"iterated-key-lookup (same-dictionary)": 1}, "(A + B)(i)": {}}


SHIFT = "sum(<k, v> in V) {k + 1 -> v}"  # V's keys moved up by one


def test_a_let_reading_the_name_it_binds_is_no_alias() -> None:
    """``let V = SHIFT in let y = SHIFT in``: the two right sides are written alike, but
    the first reads the outer V and the second the new one, so y is V shifted twice and
    a key iterated from V is no key of y (either way round): the pass must not take the
    lookup of y's one-hot at it for the entry (the let recording a path for a right side
    that reads its own name rewrote both, to 3.0 where the value is 0)."""
    env: dict[str, Value] = {"V": {0: Fraction(2), 5: Fraction(3)}, "n": 0, "M": {},
                             "a": dense([]), "s": Fraction(1)}
    for outer, inner in [("V", "y"), ("y", "V")]:
        text = (f"let V = {SHIFT} in let y = {SHIFT} in "
                f"sum(<i, a> in {outer}) {{n -> (sum(<j, w> in {inner}) {{j -> 1.5}})(i)}}")
        e = typecheck(parse_expr(text), SHAPE_CTX)[0]
        out = typecheck(iterated_key_lookup(e, SHAPE_CTX).program, SHAPE_CTX)[0]
        assert evaluate(e, env, FRACTION) == {}, text
        assert values_equal(evaluate(out, env, FRACTION), {}), (text, show(out))


# ---- declared extents ---------------------------------------------------------------------

@st.composite
def sized_gradients(draw: Draw) -> Expr:
    """A program over SIZED_CTX differentiated w.r.t. a dense input (x or X2)."""
    elab, wrt = draw(sized_programs())
    return typecheck(gradient(elab, wrt, SIZED_CTX), SIZED_CTX)[0]


@given(sized_gradients(), sized_environments())
def test_lookup_at_a_key_within_a_declared_extent_is_sound(e: Expr,
                                                             env: dict[str, Value]) -> None:
    out = iterated_key_lookup(e, SIZED_CTX).program
    assert typecheck(out, SIZED_CTX)[1] == typecheck(e, SIZED_CTX)[1]
    assert values_equal(evaluate(e, env, FRACTION), evaluate(out, env, FRACTION),
                        rel_tol=1e-9, abs_tol=1e-12)


def test_lookup_within_a_declared_extent_fires_on_generated_gradients() -> None:
    fired: Counter[str] = Counter()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(sized_gradients())
    def collect(e: Expr) -> None:
        fired.update(iterated_key_lookup(e, SIZED_CTX).fired)

    collect()
    assert fired["iterated-key-lookup (declared-extent)"] >= 10, fired


def _sized(n: int, m: int) -> dict[str, Value]:
    """ρ obeying FAMILY_CTX with sizes n and m: V1 misses a key of x, M a row, and W has
    a key past y's end."""
    row = [Fraction(i + 1) for i in range(n)]
    return {"x": dense(row), "V1": {n - 1: Fraction(2)}, "s'": Fraction(1),
            "M": {0: {n - 1: Fraction(4)}, m - 1: {0: Fraction(5)}},
            "X2": dense([dense([x * (i + 1) for x in row]) for i in range(m)]),
            "y": dense([Fraction(7)]), "W": {0: Fraction(3), 2: Fraction(1)}}


def test_lookup_within_a_declared_extent_is_sound_on_every_program_of_a_small_family(
        ) -> None:
    """Bounded-exhaustive: every well-typed program of ``sized_lookup_family`` keeps its
    meaning on inputs that obey their sizes, with n above m and below it (so a key of
    size n is past the last row of X2, or a row key past the end of x); and the
    declared-extent reason fires on one-hots over x and over a row of X2 at a key (a row
    is whole when its key is stored; ``X2(0)`` is no path: m may be 0), and over x at
    the keys of a let-bound row of M (least squares' ``let r = A(i)``)."""
    envs = [_sized(3, 2), _sized(2, 3)]
    for env in envs:
        check_extents({x: (t, env[x], None) for x, t in FAMILY_CTX.items()})
    checked, fired = 0, {q: Counter[str]() for q in ("x", "X2(k1)", "let-bound row")}
    for q, text in sized_lookup_family():
        e, t = typecheck(parse_expr(text), FAMILY_CTX)
        result = iterated_key_lookup(e, FAMILY_CTX)
        out, t2 = typecheck(result.program, FAMILY_CTX)
        assert t2 == t, text
        for env in envs:
            assert values_equal(evaluate(e, env, FRACTION), evaluate(out, env, FRACTION)), \
                (text, show(out))
        checked += 1
        if q in fired:
            fired[q] += result.fired
        if q == "x" and text.startswith("sum(<k1, v1> in x) ") and \
                "let r = M(k1) in sum(<k3, v3> in r) {0 -> d(k3)}" in text:  # M(k1): no row
            fired["let-bound row"] += result.fired  # least squares' x'(j), j in A(i)
    assert checked > 1000, checked
    assert all(fired[q]["iterated-key-lookup (declared-extent)"] > 0
               for q in ("x", "X2(k1)", "let-bound row")), fired


def test_the_declared_extent_is_needed() -> None:
    """With V1's key outside x's extent (data the declaration forbids), the rewritten
    gradient differs from the original: the sizes are what make the rewrite sound."""
    e = expand(typecheck(parse_expr("gradient (sum(<i, a> in V1) x(i) * a) x"), SIZED_CTX)[0],
               SIZED_CTX)
    result = iterated_key_lookup(e, SIZED_CTX)
    assert result.fired["iterated-key-lookup (declared-extent)"] == 1
    env: dict[str, Value] = {"x": dense([Fraction(1), Fraction(2)]), "V1": {5: Fraction(3)}}
    with pytest.raises(DataError, match="outside int"):
        check_extents({x: (SIZED_CTX[x], env[x], None) for x in env})
    assert not values_equal(evaluate(e, env, FRACTION), evaluate(result.program, env, FRACTION))
    unsized = {x: erase(t) for x, t in SIZED_CTX.items()}
    assert not iterated_key_lookup(e, unsized).fired  # without sizes, nothing to go on


ROW_CTX: Ctx = {
    "idx": DictT(INT_T, dense=True), "pos": DictT(INT_T, dense=True),
    "val": DictT(REAL_T, dense=True), "r": INT_T}
_ROW = "let x = sum(<p, j> in idx(pos(r):pos(r + 1))) { j -> val(p) } in\n"
#: a row bound by a let (as normalization binds BATAX's) and loops over it: the program,
#: the promise, how many loops are viewed, and whether the let stays (a loop under a
#: binder that hides x or a name the row reads, r, is not viewed); bodies not linear in
#: the row's values
ROWS = [
    (_ROW + "sum(<i, w> in x) { i -> sum(<i2, w2> in x) exp(w) * w2 }", "pos", 2, False),
    (_ROW + "sum(<i, w> in x) sum(<r, z> in val) { i -> sum(<i2, w2> in x) exp(w) * w2 * z }",
     "pos", 1, True),
    (_ROW + "sum(<r, w> in x) { r -> sum(<i2, w2> in x) exp(w) * w2 }", "pos", 1, True),
    (_ROW + "sum(<i, r> in x) { i -> sum(<i2, w2> in x) exp(r) * w2 }", "pos", 1, True),
    (_ROW + "sum(<i, w> in x) let r = 0 in { i -> sum(<i2, w2> in x) exp(w) * w2 }", "pos", 1,
     True),
    (_ROW + "sum(<k, z> in val) sum(<i, w> in x) { i -> z * exp(w) }", "pos", 1, False),
    (_ROW + "sum(<k, r> in val) sum(<i, w> in x) { i -> r * exp(w) }", "pos", 0, True),
    (_ROW + "let c = 2.0 in sum(<i, w> in x) { i -> c * exp(w) }", "pos", 1, False),
    (_ROW + "sum(<i, w> in x) { i -> exp(w) }", None, 1, False),  # unique throughout
    # not a row: keyed by position, a value reading its key, two segments
    ("let x = sum(<p, j> in idx(pos(r):pos(r + 1))) { p -> val(p) } in "
     "sum(<i, w> in x) { i -> exp(w) }", "pos", 0, True),
    ("let x = sum(<p, j> in idx(pos(r):pos(r + 1))) { j -> val(j) } in "
     "sum(<i, w> in x) { i -> exp(w) }", "pos", 0, True),
    ("let x = sum(<p, j> in idx(pos(0):pos(r + 1))) { j -> val(p) } in "
     "sum(<i, w> in x) { i -> exp(w) }", "pos", 0, True),
]


@st.composite
def segments(draw: Draw, repeated: bool = False) -> dict[str, Value]:
    """Rows of keys unique within each (or, ``repeated``, one row with a key twice) and
    their values, zeros among them."""
    rows = draw(st.lists(st.lists(st.integers(0, 5), max_size=4, unique=True), min_size=1,
                         max_size=3))
    if repeated:  # the last row: key 0 twice
        rows[-1] = [0, 0]
    pos = [0, *itertools.accumulate(len(row) for row in rows)]
    vals = draw(st.lists(st.sampled_from([0.0, 0.5, -1.0, 2.0]), min_size=pos[-1],
                         max_size=pos[-1]))
    return {"idx": dense([k for row in rows for k in row]), "pos": dense(pos),
            "val": dense(vals),
            "r": len(rows) - 1 if repeated else draw(st.integers(-1, len(rows)))}


@given(st.sampled_from(ROWS), segments())
def test_a_row_is_iterated_in_place_where_its_keys_are_unique(
        case: tuple[str, str | None, int, bool], env: dict[str, Value]) -> None:
    source, pos, views, kept = case
    e, _ = typecheck(parse_expr(source), ROW_CTX)
    viewed = row_views(e, ROW_CTX, {"idx": pos})
    assert viewed.fired["row-view"] == views and viewed.rounds == 1, show(viewed.program)
    assert ("let x" in show(viewed.program)) == kept, show(viewed.program)
    assert typecheck(viewed.program, ROW_CTX)[1] == typecheck(e, ROW_CTX)[1]
    assert values_equal(evaluate(viewed.program, env), evaluate(e, env), rel_tol=1e-9)
    assert not row_views(e, ROW_CTX, {}).fired  # no promise, no view
    assert not row_views(e, ROW_CTX, {"idx": "val"}).fired  # another array's segments


@given(segments(repeated=True))
def test_a_row_view_needs_the_unique_promise(env: dict[str, Value]) -> None:
    """Viewed as if promised, a row whose key 0 repeats is iterated twice, once per
    entry, where the dictionary holds it once with the sum: (exp(1) + exp(2)) * 3 against
    exp(3) * 3 for the values 1 and 2 at the repeated key."""
    e, _ = typecheck(parse_expr(ROWS[0][0]), ROW_CTX)
    n = len(env["idx"].items)
    env = {**env, "val": dense([*env["val"].items[:n - 2], 1.0, 2.0])}
    viewed = row_views(e, ROW_CTX, {"idx": "pos"}).program
    assert not values_equal(evaluate(viewed, env), evaluate(e, env), rel_tol=1e-9)


#: a pass that drops evaluations of a term that fails: the row's values, read in place
#: only where the program loops over the row (at r = 0 the branch takes none), and the
#: one-hot's other entries (log(a - v + 1) fails at a = 0, v = 5), looked up at i alone
DROPPING: list[tuple[object, Ctx, str, dict[str, object]]] = [
    (row_views, ROW_CTX,
     "let x = sum(<p, j> in idx(pos(r):pos(r + 1))) {j -> log(val(p))} in "
     "if r = 5 then sum(<i, w> in x) w",
     {"idx": dense([0, 1]), "pos": dense([0, 2]), "val": dense([1.0, -1.0]), "r": 0}),
    (iterated_key_lookup, {"x": DictT(REAL_T)},
     "sum(<i, a> in x) (sum(<k, v> in x) {k -> log(a - v + 1.0)})(i)",
     {"x": {0: 0.0, 1: 5.0}}),
]


@pytest.mark.parametrize("n", range(len(DROPPING)))
def test_a_pass_keeps_a_failure_and_its_guard_is_needed(n: int) -> None:
    """The row view and the lookup in place stop short of a term that can fail: the
    program fails, and so does the pass's; without the guard (every term taken as
    total), the pass's program has a value."""
    pass_, ctx, source, env = DROPPING[n]
    e, _ = typecheck(parse_expr(source), ctx)

    def run(e: Expr) -> Expr:
        return (row_views(e, ctx, {"idx": "pos"}) if pass_ is row_views
                else iterated_key_lookup(e, ctx)).program

    with pytest.raises(EvalError):
        evaluate(e, env)
    with pytest.raises(EvalError):
        evaluate(run(e), env)
    with patch("sdqlite.opt.passes.total", lambda _: True):
        unguarded = run(e)
    assert evaluate(unguarded, env) == 0.0, show(unguarded)

"""Destination-passing style keeps meaning (§6, "Destination-Passing Style & C++ Code
Generation"; ``codegen/dps.py``).

For generated Γ ⊢ e : T (Physical SDQLite: every construct, gradients included, at
generic points and where entries cancel, zeros are written and keys missed; loops
around nested singletons, whose destinations are keyed paths; singletons whose value
is a sum or a let, entered by reference; conditionals around loops; programs shaped
around the rules' guards; bool and int results, assigned) and ρ ∈ ⟦Γ⟧, the statements
of ``lower(e)`` add exactly ⟦e⟧(ρ) into the destination, with DPS (``dest[k] += v``
pushed into the innermost loop) and without it, computed over the rationals.  DPS sums
in another order than the interpreter, so where dense arrays are stored inside
dictionaries the two agree pointwise (``inner_extents_forgotten``: an all-zero array
entry is dropped with its extent); everywhere else exactly, but for the floats unary
operations make (to 1e-9).  The
statements' expressions are pure (no ``sum``/``let``), so the emitter can print each as
one C++ expression.  Lowering asks for an elaborated program (a lookup, a sum, a
conditional or an array the checker has not typed is a CodegenError that says so), and
the emitter for a lowered one (a sum, let, unique or gradient left in an expression is
a CodegenError naming it).

Without DPS (the baseline), each value is built, then added whole into its destination
(never at a path of it, entered or multiplied into it), and adding a zero emits no
statement. With DPS, loops around singletons, sums of them, conditionals, zeros, unique
and lets of numbers build nothing on the way (the paper's blue listing): no accumulator
is declared, no entry is entered by reference (the destination's path grows instead:
``res[i][j] += a``), what is added at a path is a number and no product built to add
it, a loop over a range is counted (no range built), and adding a zero emits no
statement; a singleton whose value is a loop is entered once, before that loop. Either
way, only sparse dictionaries are pruned (nothing else stores zeros).
"""

from fractions import Fraction

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from codegen.dps import (
    RESULT,
    AddInto,
    Assign,
    Bind,
    Decl,
    Dest,
    Enter,
    Loop,
    Lowered,
    MulAddInto,
    Prune,
    Stmt,
    When,
    lower,
)
from codegen.emit import emit_kernel
from codegen.execute import execute
from properties.generators import (
    NONGENERIC,
    PHYSICAL,
    SHAPE_CTX,
    Draw,
    Generated,
    Names,
    environments,
    gen,
    guard_shapes,
    programs,
    programs_with_env,
)
from sdqlite.ad.gradient import checked
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import CodegenError
from sdqlite.syntax.ast import (
    Add,
    Empty,
    Eq,
    Expr,
    If,
    IntConst,
    Let,
    Mul,
    Range,
    RealConst,
    Single,
    Sum,
    Unique,
    Var,
    free_vars,
    subterms,
)
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type
from semantics import values as V
from semantics.interp import evaluate
from semantics.values import FRACTION, Value, inner_extents_forgotten


def _exprs(stmts: tuple[Stmt, ...]) -> list[object]:
    out: list[object] = []
    for s in stmts:
        out += [getattr(s, f) for f in ("value", "cond", "dom", "left", "right")
                if hasattr(s, f)]
        out += [k for d in (getattr(s, "dest", None),) if d is not None for k in d.keys]
        if isinstance(s, Loop | When):
            out += _exprs(s.body)
    return out


def _pure(low: Lowered) -> bool:
    return not any(isinstance(t, Sum | Let) for e in _exprs(low.body)
                   for t in subterms(e))  # type: ignore[arg-type]


@st.composite
def keyed_sums(draw: Draw) -> Generated:
    """One or two loops (over M and its rows, or over V or a range, perhaps marked
    unique) around nested singletons, sums of them, conditionals, zeros and unique,
    keyed by the binders or constants, perhaps in a let naming a number: what DPS turns
    into adds at keyed paths (``res[i][j] += a``), which random programs seldom have."""
    names = Names()

    def body(scope: dict[str, Type], keys: list[Expr], depth: int, budget: int) -> Expr:
        key = draw(st.sampled_from([*keys, IntConst(draw(st.integers(0, 2)))]))
        if depth == 0:  # leaves and products of them (exact, as unary operations are
            # not), the right factor perhaps a conditional: if k == c then leaf
            leaf = gen(draw, scope, REAL, 0, names, PHYSICAL)
            if not draw(st.booleans()):
                return leaf
            right = gen(draw, scope, REAL, 0, names, PHYSICAL)
            if draw(st.booleans()):
                right = If(Eq(key, IntConst(draw(st.integers(0, 2)))), right)
            return Mul(leaf, right)
        match draw(st.sampled_from(["single", "single", "add", "if", "zero", "unique"])
                   if budget else st.just("single")):
            case "single":
                return Single(key, body(scope, keys, depth - 1, budget))
            case "unique":  # the identity: the body into the destination
                return Unique(body(scope, keys, depth, budget - 1))
            case "zero":
                t: Type = REAL
                for _ in range(depth):
                    t = DictT(t)
                return Empty(t)
            case "add":
                return Add(body(scope, keys, depth, budget - 1),
                           body(scope, keys, depth, budget - 1))
            case _:
                return If(Eq(key, IntConst(draw(st.integers(0, 2)))),
                          body(scope, keys, depth, budget - 1))

    def named(scope: dict[str, Type], keys: list[Expr]) -> Expr:
        """The loop's body, perhaps in a let naming a number (the body still goes into
        the destination)."""
        if draw(st.booleans()):
            return body(scope, keys, depth, 2)
        x = names.fresh(draw, "l")
        rhs = gen(draw, scope, REAL, 0, names, PHYSICAL)
        return Let(x, rhs, body({**scope, x: REAL}, keys, depth, 2))

    depth = draw(st.integers(1, 3))
    if draw(st.booleans()):
        scope = {**SHAPE_CTX, "i": INT, "r": DictT(REAL), "j": INT, "a": REAL}
        e: Expr = Sum("i", "r", Var("M"), Sum("j", "a", Var("r"),
                                               named(scope, [Var("i"), Var("j")])))
    else:  # over V, or a range, perhaps marked unique (a counted loop either way)
        dom: Expr = draw(st.sampled_from([Var("V"), Range(IntConst(0), IntConst(3))]))
        scope = {**SHAPE_CTX, "k": INT, "v": REAL if dom == Var("V") else INT}
        if draw(st.booleans()):
            dom = Unique(dom)
        e = Sum("k", "v", dom, named(scope, [Var("k")]))
    return Generated(SHAPE_CTX, e, typecheck(e, SHAPE_CTX)[1])


#: str(e) of an error in a program starts with its location (source text: <program>)
AT = r"<program>:\d+:\d+: "

#: singletons whose value needs statements (a sum, a let): DPS enters the entry by
#: reference and lowers the value into it; random programs of the ``mutation`` profile's
#: size had none
ENTERED = [Generated(SHAPE_CTX, e, typecheck(e, SHAPE_CTX)[1]) for e in (
    parse_expr(f"sum(<k, v> in V) {body}") for body in (
        "{k -> sum(<j, b> in V) b * v}",
        "{k -> let w = v * v in w + s}",
        "{k -> {k -> sum(<j, b> in V) b}}",
        "{0 -> sum(<j, b> in V) {j -> b * v}}",
        "{k -> sum(<j, b> in V) {j -> b}} + {k -> {k -> v}}"))]

#: conditionals whose branch needs statements (a loop, an entry): DPS guards them with
#: ``When``, which random programs of the ``mutation`` profile's size seldom reach; and a
#: domain marked unique
CONDITIONAL = [Generated(SHAPE_CTX, e, typecheck(e, SHAPE_CTX)[1]) for e in map(parse_expr, (
    "sum(<k, v> in V) if k = 1 then {k -> v}",
    "sum(<k, v> in V) if not(k = 0) then {k -> sum(<j, b> in V) b * v}",
    "sum(<i, r> in M) if i = 1 then {i -> sum(<j, a> in r) {j -> a}}",
    "sum(<k, v> in unique(V)) if k = 0 then v * 2.0"))]
SCALAR_RESULTS: list[Type] = [BOOL, INT]
#: generated programs, loops around nested singletons, whose DPS adds at keyed paths,
#: singletons entered by reference, conditionals around statements, programs shaped around
#: the rules' guards (conditionals on the key, unique keys, ranges), and programs of a bool
#: or int result (assigned, not added)
def _with_env(g: st.SearchStrategy[Generated]) -> st.SearchStrategy[
        tuple[Generated, dict[str, Value]]]:
    return g.flatmap(lambda g: st.tuples(st.just(g), environments(g.ctx, exact=True)))


CASES = st.one_of(programs_with_env(exact=True), _with_env(st.one_of(
    keyed_sums(), guard_shapes(), programs(lang=NONGENERIC))))  # (entries that cancel, ...)
#: each shape of these lists, and bool and int results: a strategy of its own each, as
#: one branch among many they went unrun at the ``mutation`` profile's 100 examples
FIXED = _with_env(st.sampled_from(ENTERED + CONDITIONAL))
SCALAR = _with_env(st.sampled_from(SCALAR_RESULTS).flatmap(lambda t: programs(type=t)))


# adds that cancel at a keyed path: the entry must be dropped, as + drops a zero
_CANCEL = Sum("k", "v", Var("V"), Add(Single(Var("k"), Var("v")),
                                      Single(Var("k"), Mul(RealConst(-1.0), Var("v")))))


@given(CASES, st.booleans())
@example((Generated(SHAPE_CTX, _CANCEL, DictT(REAL)),
          {**{x: V.zero_of(t, FRACTION) for x, t in SHAPE_CTX.items()},
           "V": {0: Fraction(2), 3: Fraction(1, 2)}}), True).via("adds that cancel")
@example((Generated(SHAPE_CTX, parse_expr("sum(<k, v> in V) { k -> V(let k = 0 in k) }"),
                    DictT(REAL)),
          {**{x: V.zero_of(t, FRACTION) for x, t in SHAPE_CTX.items()},
           "V": {0: Fraction(2), 3: Fraction(1, 2)}}), True).via(
    "a let in a value's place (a key) shadows the sum's key: its body reads the let's")
def test_lowered_statements_add_the_programs_value(case: tuple[Generated, dict[str, Value]],
                                                   dps: bool) -> None:
    _assert_lowered_adds_the_value(case, dps)


@given(FIXED, st.booleans())
def test_lowered_statements_add_the_value_of_entered_and_guarded_shapes(
        case: tuple[Generated, dict[str, Value]], dps: bool) -> None:
    _assert_lowered_adds_the_value(case, dps)


@given(SCALAR, st.booleans())
def test_lowered_statements_assign_a_scalar_result(case: tuple[Generated, dict[str, Value]],
                                                   dps: bool) -> None:
    _assert_lowered_adds_the_value(case, dps)


def _assert_lowered_adds_the_value(case: tuple[Generated, dict[str, Value]], dps: bool
                                   ) -> None:
    g, env = case
    elab, t = checked(g.expr, g.ctx)
    low = lower(elab, g.ctx, t, dps=dps)
    assert _pure(low)
    # zeros are pruned where a dictionary can store them: a sparse one written in place
    stmts = _statements(low.body)
    declared = {RESULT: t} | {s.name: s.type for s in stmts if isinstance(s, Decl)}
    assert all(_sparse(declared[s.name]) for s in stmts if isinstance(s, Prune)), low
    want = inner_extents_forgotten(evaluate(elab, env, FRACTION))
    got = inner_extents_forgotten(execute(low, env, FRACTION))
    # exactly, but for the floats of unary operations (exp(x) is no rational), which DPS
    # adds in another order
    assert got == want or (_has_float(want) and V.values_equal(got, want, rel_tol=1e-9,
                                                               abs_tol=1e-12)), (got, want)


def _sparse(t: Type) -> bool:
    return isinstance(t, DictT) and not t.dense


def _has_float(v: Value) -> bool:
    if isinstance(v, dict):
        return any(_has_float(x) for x in v.values())
    if isinstance(v, V.DenseArray):
        return any(_has_float(x) for x in v.items)
    return isinstance(v, float)


def _statements(stmts: tuple[Stmt, ...] | list[Stmt]) -> list[Stmt]:
    out: list[Stmt] = []
    for st_ in stmts:
        out.append(st_)
        if isinstance(st_, Loop | When):
            out += _statements(st_.body)
    return out


@given(keyed_sums())
def test_dps_builds_nothing_on_the_way_to_the_destination(g: Generated) -> None:
    elab, t = checked(g.expr, g.ctx)
    stmts = _statements(lower(elab, g.ctx, t, dps=True).body)
    assert not [s for s in stmts if isinstance(s, Decl | Enter)]
    assert not [s for s in stmts if isinstance(s, AddInto) and isinstance(s.value, Empty)]
    assert all(isinstance(s, Loop | When | AddInto | MulAddInto | Prune | Bind) for s in stmts)
    # a let names a number (its body goes into the destination); a loop over a range is
    # counted (no range built, named and iterated)
    assert all(s.type == REAL for s in stmts if isinstance(s, Bind))
    assert all(isinstance(s.dom, Range | Var) for s in stmts if isinstance(s, Loop))
    # what is added at a path is a number: no singleton, sum, addition or product built
    # to add it (a product is multiplied into its destination)
    assert all(s.type == REAL and not isinstance(s.value, Mul) for s in stmts
               if isinstance(s, AddInto))
    assert all((s.left_type, s.right_type) == (REAL, REAL) for s in stmts
               if isinstance(s, MulAddInto))


def _walks(stmts: tuple[Stmt, ...], loops: tuple[set[str], ...] = ()
           ) -> list[tuple[Dest, tuple[set[str], ...]]]:
    """Each keyed destination a statement walks, with the binders of the loops around it."""
    out: list[tuple[Dest, tuple[set[str], ...]]] = []
    for s in stmts:
        if isinstance(s, AddInto | MulAddInto | Enter) and s.dest.keys:
            out.append((s.dest, loops))
        if isinstance(s, Loop):
            out += _walks(s.body, (*loops, {s.key, s.val}))
        elif isinstance(s, When):
            out += _walks(s.body, loops)
    return out


@pytest.mark.parametrize("g", ENTERED, ids=lambda g: str(g.expr))
def test_dps_enters_a_singleton_whose_value_is_a_loop_once(g: Generated) -> None:
    """``{k -> sum(<j, b> in V) ...}`` in a loop over k: ``res[k]`` is entered once per k,
    before the loop over j, not walked again in each of its iterations: a path inside an
    inner loop has a key of that loop."""
    elab, t = checked(g.expr, g.ctx)
    for dest, loops in _walks(lower(elab, g.ctx, t, dps=True).body):
        if len(loops) > 1:
            assert any(free_vars(k) & loops[-1] for k in dest.keys), dest


def _let_s(body: str) -> Expr:
    """``let y = s in body``: into reaches the body (a let is lowered the same way with
    DPS and without)."""
    return parse_expr(f"let y = s in {body}")


@given(st.one_of(keyed_sums(), programs(lang=PHYSICAL), programs(lang=NONGENERIC)))
@example(Generated({"x": REAL}, Add(Var("x"), RealConst(2.0)), REAL))  # added in parts
@example(Generated(SHAPE_CTX, _let_s("{0 -> y}"), DictT(REAL)))  # at a path
@example(Generated(SHAPE_CTX, _let_s("{0 -> y} + {1 -> y}"), DictT(REAL)))  # in parts
@example(Generated(SHAPE_CTX, _let_s("{0 -> y} * 2.0"), DictT(REAL)))  # multiplied in
def test_without_dps_each_value_is_built_then_added_whole(g: Generated) -> None:
    """The baseline (``dps=False``, the paper's first listing): a value is built, then
    added whole into the destination itself, never at a path of it, entered or
    multiplied into it, nor in parts."""
    elab, t = checked(g.expr, g.ctx)
    stmts = _statements(lower(elab, g.ctx, t, dps=False).body)
    assert not [s for s in stmts if isinstance(s, Enter | MulAddInto)]
    assert all(s.dest.keys == () for s in stmts if isinstance(s, AddInto))
    assert not [s for s in stmts if isinstance(s, AddInto) and isinstance(s.value, Empty)]
    # the program's value is added by one statement (in a loop for a sum), not in parts
    assert len([s for s in stmts if isinstance(s, AddInto) and s.dest.root == RESULT]) <= 1


@given(st.sampled_from(["{0 -> 1.0}(3)", "[1.0, 2.0](1:2)", "[1.0](0) * x",
                        "let y = sum(<k, v> in {0 -> 1.0}) v in y",
                        "let y = (if false then 1.0) in y", "let y = [1.0, 2.0] in y(0)"]))
def test_lowering_asks_for_an_elaborated_program(source: str) -> None:
    ctx: dict[str, Type] = {"x": REAL}
    e = parse_expr(source)
    t = typecheck(e, ctx)[1]
    with pytest.raises(CodegenError, match="not elaborated by the type checker"):
        lower(e, ctx, t, dps=True)
    assert lower(typecheck(e, ctx)[0], ctx, t, dps=True).body  # elaborated, it lowers


@given(st.sampled_from(["sum", "let", "unique", "gradient"]))
def test_the_emitter_asks_for_a_lowered_program(construct: str) -> None:
    inner = parse_expr({"sum": "sum(<k, v> in {0 -> 1.0}) v", "let": "let y = 1.0 in y",
                        "unique": "unique(1.0)", "gradient": "gradient (x * x) x"}[construct])
    low = Lowered((Assign(Dest(RESULT), inner),), REAL, (("x", REAL),))
    with pytest.raises(CodegenError,
                       match=f"^{AT}{construct} reached the C\\+\\+ emitter"):
        emit_kernel("k", low)

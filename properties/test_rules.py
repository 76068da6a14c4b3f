"""Soundness of every rewrite rule of the table (Fig. fig:trans), read from the table.

* For every rule and every place in a generated program where its left side matches
  (with its conditions), the right side has the same type and the same value in every
  environment of the place's context: ⟦lhs⟧ρ = ⟦rhs⟧ρ.  Programs are drawn from both
  fragments and also differentiated (``gradient``), which fills them with zeros.
* Every rule fires on the generated programs (a rule never exercised fails this file).
* A rule that moves a factor past another's layers (``Rule.moves``) asserts that the
  factor is a scalar, the invariant that makes it an equality (issue 30, class 5): with
  its conditions gone, it stops on an instance where the factor is a tensor.
* Every *semantic* condition is needed: without it, the rule rewrites some instance to
  a program of another meaning or type, or one that fails where the instance has a
  value, or the other way round (the table in ``GUARD_COUNTEREXAMPLES``), and so
  is each part of one (``PART_COUNTEREXAMPLES``: a dense layer under a sparse one, a
  sum's key free in the factor).
* The matcher is complete and sound: a pattern cut from a generated program (some
  subterms made metavariables, equal subterms the same one, its binders renamed) matches
  the program, binds each metavariable to what it replaced, and instantiates back to the
  program; matched against another program, it instantiates back to that program.
  A pattern's literal array matches, element by element, exactly the arrays of its
  length whose elements its own match.  A zero metavariable (``Z1``) matches exactly
  the constants whose value is zero: ``zero[T]``, ``0.0`` and the integer ``0``; a
  metavariable that repeats matches equal subterms, and a binder used as a variable its
  own variable.
* A rule that moves a factor that can fail into the loops over the other factor's entries
  (``mul-normalize-left``/``-right``) names it first: the product fails where the
  factor does, even when the other factor is empty (issue 26's review).
* A pass's rules (``family``) are the table's rules of its family, in the table's
  order: sparsity propagation's and normalization's split the table.
* The table's listing (``Rule.show``, one line a rule) shows every rule
  with its left side, its right side (as the paper writes it when Python builds it)
  and every condition it has, and none it has not.
"""

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from properties.generators import (
    FRESH,
    LOGICAL,
    LOGICAL_FRESH,
    PHYSICAL,
    Draw,
    Generated,
    environments,
    guard_shapes,
    programs,
)
from sdqlite.ad.gradient import checked, gradient
from sdqlite.check.typecheck import Ctx, synth, typecheck
from sdqlite.errors import EvalError, SDQLiteError
from sdqlite.opt.rules import NORMALIZATION, RULES, RULES_BY_NAME, SPARSITY, Rule, family
from sdqlite.syntax.ast import (
    Add,
    BoolConst,
    Empty,
    Expr,
    IntConst,
    Let,
    Not,
    Range,
    RealConst,
    Single,
    Sum,
    Unique,
    Var,
    children,
    map_children,
)
from sdqlite.syntax.names import NameSupply, names_in
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type, is_discrete, tensor
from semantics.display import read_value
from semantics.interp import evaluate
from semantics.values import FRACTION, is_zero, values_equal


def places(e: Expr, ctx: Ctx) -> Iterator[tuple[Expr, Ctx]]:
    """Every sub-expression of an elaborated ``e`` with the context of its scope."""
    yield e, ctx
    match e:
        case Sum(k, v, dom, body):
            yield from places(dom, ctx)
            dt = synth(ctx, dom)[1]
            assert isinstance(dt, DictT)
            yield from places(body, {**ctx, **{x: t for x, t in ((k, INT), (v, dt.val))
                                               if x != "_"}})
        case Let(x, rhs, body):
            yield from places(rhs, ctx)
            yield from places(body, {**ctx, x: synth(ctx, rhs)[1]})
        case _:
            for c in children(e):
                yield from places(c, ctx)


@st.composite
def rewrite_sites(draw: Draw, fresh: bool = False) -> tuple[Generated, Expr]:
    """A generated program, elaborated, and half the time its gradient; a quarter of the
    programs are shaped around a guarded rule's left side (``guard_shapes``). Names
    collide (binders shadow) unless ``fresh``, which the coverage count uses."""
    if draw(st.integers(0, 3)) == 0:
        shaped = draw(guard_shapes(wider=not fresh))
        return shaped, checked(shaped.expr, shaped.ctx)[0]
    lang = draw(st.sampled_from([LOGICAL_FRESH, FRESH] if fresh else [LOGICAL, PHYSICAL]))
    g = draw(programs(lang=lang))
    elab, _ = checked(g.expr, g.ctx)
    real_inputs = sorted(x for x, t in g.ctx.items() if not is_discrete(t))
    if not lang.physical and real_inputs and draw(st.booleans()):
        x = draw(st.sampled_from(real_inputs))
        elab, _ = typecheck(gradient(elab, x, g.ctx), g.ctx)
    return g, elab


def assert_same_meaning(site: tuple[Generated, Expr], out: Expr, data: st.DataObject) -> None:
    """``out`` has the type and, on a generated environment, the value of the site's
    program (exactly over the rationals; to 1e-9 where unary operations use floats)."""
    g, elab = site
    _, t = typecheck(elab, g.ctx)
    out_elab, t2 = typecheck(out, g.ctx)
    assert t2 == t
    env = data.draw(environments(g.ctx, exact=True))
    assert _same(evaluate(elab, env, FRACTION), evaluate(out_elab, env, FRACTION))


def outcome(e: Expr, env: dict[str, object]) -> tuple[str, object]:
    """What evaluating ``e`` in ``env`` gives (over the rationals): its value, or the
    message of its failure."""
    try:
        return "value", evaluate(e, env, FRACTION)
    except EvalError as err:
        return "failure", err.message


def _same(a: object, b: object) -> bool:
    return values_equal(a, b, rel_tol=1e-9, abs_tol=1e-12)


FIRED: Counter[str] = Counter()


@given(rewrite_sites(), st.data())
def test_every_rule_is_sound_where_it_fires(site: tuple[Generated, Expr],
                                            data: st.DataObject) -> None:
    g, elab = site
    names = NameSupply(names_in(elab) | set(g.ctx))
    for e, ctx in places(elab, g.ctx):
        for rule in RULES:
            m = rule.match(e, ctx)
            if m is None:
                continue
            FIRED[rule.name] += 1
            lhs, t = typecheck(e, ctx)
            rhs, t2 = typecheck(rule.apply(m, names), ctx)
            assert t2 == t, (rule.name, t, t2)
            env = data.draw(environments(dict(ctx), exact=True))
            assert _same(evaluate(lhs, env, FRACTION), evaluate(rhs, env, FRACTION)), rule.name


def test_every_rule_fires() -> None:
    fired: Counter[str] = Counter()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(rewrite_sites(fresh=True))
    def collect(site: tuple[Generated, Expr]) -> None:
        g, elab = site
        for e, ctx in places(elab, g.ctx):
            for rule in RULES:
                if rule.match(e, ctx) is not None:
                    fired[rule.name] += 1

    collect()
    never = sorted(r.name for r in RULES if fired[r.name] == 0)
    assert not never, f"rules never fired on generated programs: {never}"


# (rule, semantic condition) -> (Γ, an instance failing just that condition, ρ)
A_DENSE: dict[str, Type] = {"a": DictT(REAL, dense=True)}
GUARD_COUNTEREXAMPLES: dict[tuple[str, str], tuple[dict[str, Type], str, str]] = {
    ("zero-mul-left", "no-dense-result"): (A_DENSE, "0.0 * a", "a = [1.5, 0.0]"),
    ("zero-mul-right", "no-dense-result"): (A_DENSE, "a * 0.0", "a = [1.5, 0.0]"),
    ("mul-normalize-left", "e1-tensor"): (A_DENSE, "a * 2.0", "a = [1.5, 0.0]"),
    ("mul-normalize-right", "e2-tensor"): (A_DENSE, "2.0 * a", "a = [1.5, 0.0]"),
    # a dictionary e1: the outer product's layers would come out swapped
    ("mul-normalize-right", "e1-real"): (
        {"d": DictT(REAL), "e": DictT(REAL)}, "d * e", "d = {0 -> 1.0}; e = {1 -> 2.0}"),
    # a dense factor keeps its position even when the sum is empty
    ("scale-into-sum", "no-dense-result"): (
        {"x": DictT(REAL)}, "[x] * sum(<k, v> in x) v", "x = {}"),
    ("scale-into-sum", "binders-fresh"): (
        {"b": REAL, "d": DictT(REAL)}, "b * sum(<k, b> in d) b", "b = 3.0; d = {0 -> 2.0}"),
    ("scale-into-sum-right", "no-dense-result"): (
        {"x": DictT(REAL)}, "(sum(<k, v> in x) v) * [x]", "x = {}"),
    ("scale-into-sum-right", "binders-fresh"): (
        {"b": REAL, "d": DictT(REAL)}, "(sum(<k, b> in d) b) * b", "b = 3.0; d = {0 -> 2.0}"),
    ("scale-into-let", "let-binder-fresh"): (
        {"x": REAL}, "x * let x = 2.0 in x", "x = 3.0"),
    # dictionaries: d * e and e * d nest their keys in opposite orders
    ("double-product", "e1-real"): (
        {"d": DictT(REAL), "e": DictT(REAL)}, "d * e + e * d", "d = {0 -> 1.0}; e = {1 -> 2.0}"),
    # a dictionary factor would become the inner layer
    ("scale-into-single", "e1-real"): (
        {"d": DictT(REAL)}, "d * {1 -> 2.0}", "d = {0 -> 1.0}"),
    # the factor dropped fails (exp overflows): the product fails, the zero does not
    ("zero-mul-left", "e2-total"): ({"c": REAL}, "0.0 * exp(c)", "c = 1000"),
    ("zero-mul-right", "e1-total"): ({"c": REAL}, "exp(c) * 0.0", "c = 1000"),
    ("zero-lookup", "e2-total"): (
        {"c": REAL}, "zero[{int -> real}]((sum(<i, u> in {0 -> log(c)}) 1))", "c = -1"),
}


def test_every_semantic_condition_has_a_counterexample() -> None:
    guarded = {(r.name, c.name) for r in RULES for c in r.conditions if c.kind == "semantic"}
    assert guarded == set(GUARD_COUNTEREXAMPLES)


#: more counterexamples, for each part of a guard: a dense layer under a sparse one (a
#: dense layer anywhere is no tensor); the sum's key free in the factor (not only its value)
PART_COUNTEREXAMPLES: list[tuple[tuple[str, str], tuple[dict[str, Type], str, str]]] = [
    (("mul-normalize-left", "e1-tensor"),
     ({"M": DictT(DictT(REAL, dense=True))}, "M * 2.0", "M = {0 -> [1.5]}")),
    (("mul-normalize-right", "e2-tensor"),
     ({"M": DictT(DictT(REAL, dense=True))}, "2.0 * M", "M = {0 -> [1.5]}")),
    # the key's name, not only the value's (a real k outside: in the sum it is an int)
    (("scale-into-sum", "binders-fresh"),
     ({"k": REAL, "d": DictT(REAL)}, "k * sum(<k, v> in d) v", "k = 3.0; d = {0 -> 1.0}")),
]


#: issue 30, class 5: the rules whose right side moves a factor past another's layers,
#: and an instance where it is not a scalar (the rule is wrong there)
MOVED_TENSORS = {"scale-into-single": "e1-real", "double-product": "e1-real",
                 "mul-normalize-right": "e1-real"}


def test_a_factor_a_rule_moves_is_a_scalar_or_the_rule_stops() -> None:
    """The invariant that makes these rewrites equalities (the factor that moves is a
    scalar) is asserted where a rule matches: a rule whose conditions drifted so as to
    admit a tensor there stops, rather than rewriting to the other layer order."""
    assert {r.name for r in RULES if r.moves} == set(MOVED_TENSORS)
    for name, cond in MOVED_TENSORS.items():
        ctx, text, _ = GUARD_COUNTEREXAMPLES[(name, cond)]
        e, _ = typecheck(parse_expr(text), ctx)
        drifted = replace(RULES_BY_NAME[name], conditions=())
        with pytest.raises(AssertionError, match="not a scalar"):
            drifted.match(e, ctx)


def test_a_factor_that_can_fail_is_named_before_the_loops_it_moves_into() -> None:
    """x * exp(c) over an empty x fails where exp(c) does (the interpreter evaluates
    both factors); normalized, exp(c) moved into the loop over x would be evaluated no
    time.  Named first, it is; a factor that cannot fail moves as the paper writes it."""
    ctx: dict[str, Type] = {"x": DictT(REAL), "c": REAL}
    for name, text in [("mul-normalize-left", "x * exp(c)"),
                       ("mul-normalize-right", "exp(c) * x")]:
        e, _ = typecheck(parse_expr(text), ctx)
        m = RULES_BY_NAME[name].match(e, ctx)
        assert m is not None, name
        out = typecheck(RULES_BY_NAME[name].apply(m, NameSupply(names_in(e))), ctx)[0]
        assert isinstance(out, Let), show(out)
        for env_text in ["x = {}; c = 1000", "x = {0 -> 2.0}; c = 1000",
                         "x = {0 -> 2.0}; c = 0.5"]:
            env = {x.strip(): read_value(v, ctx[x.strip()], FRACTION)[0]
                   for x, _, v in (b.partition("=") for b in env_text.split(";"))}
            (was, before), (now, after) = outcome(e, env), outcome(out, env)
            assert was == now and ((was == "failure" and before == after)
                                   or values_equal(before, after)), (name, env_text)
        total, _ = typecheck(parse_expr(text.replace("exp(c)", "c")), ctx)
        m = RULES_BY_NAME[name].match(total, ctx)
        assert m is not None and not isinstance(
            RULES_BY_NAME[name].apply(m, NameSupply(names_in(total))), Let), name


def test_semantic_conditions_are_needed() -> None:
    for (name, cond), (ctx, text, env_text) in [*GUARD_COUNTEREXAMPLES.items(),
                                                *PART_COUNTEREXAMPLES]:
        rule = RULES_BY_NAME[name]
        e, t = typecheck(parse_expr(text), ctx)
        m = rule.match(e, ctx, check=False)
        assert m is not None, name
        failing = [c.name for c in rule.conditions if not c.holds(m)]
        assert failing == [cond], f"{name}: {text} should fail just {cond}, fails {failing}"
        env = {x.strip(): read_value(v, ctx[x.strip()], FRACTION)[0]
               for x, _, v in (b.partition("=") for b in env_text.split(";"))}
        rewritten = rule.apply(m, NameSupply(names_in(e)))
        try:
            r_elab, rt = typecheck(rewritten, ctx)
        except SDQLiteError:
            continue  # ill-typed without the guard: needed
        (was, before), (now, after) = outcome(e, env), outcome(r_elab, env)
        assert rt != t or was != now or not values_equal(before, after), name


@st.composite
def cut_patterns(draw: Draw) -> tuple[Generated, Expr, dict[str, Expr]]:
    """A program, a pattern cut from it, and what each metavariable replaced (a pattern
    has no free names but metavariables: inputs are always cut)."""
    g = draw(st.sampled_from([LOGICAL, PHYSICAL]).flatmap(lambda lang: programs(lang=lang)))
    cut: dict[Expr, str] = {}

    def go(e: Expr, renamed: dict[str, str]) -> Expr:
        free_input = isinstance(e, Var) and e.name not in renamed  # a pattern names none
        if e in cut or free_input or draw(st.integers(0, 4)) == 0:
            return Var(cut.setdefault(e, f"mv{len(cut) + 1}"))
        match e:
            case Var(x):
                return Var(renamed.get(x, x))
            case Sum(k, v, dom, body):
                inner = renamed | {x: f"p{x}" for x in (k, v) if x != "_"}
                return Sum(inner.get(k, k), inner.get(v, v), go(dom, renamed),
                           go(body, inner))
            case Let(x, rhs, body):
                inner = renamed | {x: f"p{x}"}
                return Let(inner[x], go(rhs, renamed), go(body, inner))
        return map_children(e, lambda c: go(c, renamed))

    elab, t = checked(g.expr, g.ctx)  # gradient expanded
    pattern = go(elab, {})
    return Generated(g.ctx, elab, t), pattern, {name: e for e, name in cut.items()}


# Shrunk: a pattern's ``_`` matched the value binder v1' and bound it for the key too
_DOMAIN = Sum("k1'", "v2'", Range(IntConst(0), IntConst(0)),
              Single(Unique(Var("v2'")), RealConst(1.5)), ty=DictT(REAL))
WILDCARDS = (Generated({"x": REAL}, Sum("_", "_", _DOMAIN, Var("x"), ty=REAL), REAL),
             Sum("_", "_", Var("mv1"), Var("mv2")), {"mv1": _DOMAIN, "mv2": Var("x")})


# Shrunk (thorough): a pattern binding px twice, cut from lets that both bind x; px was
# bound to x, then to t1', and both lets were rewritten to t1'
SHADOWING_LETS = (
    Generated({}, Let("x", RealConst(1.5), Not(Let("x", RealConst(1.5), BoolConst(False)))),
              BOOL),
    Let("px", Var("mv1"), Not(Let("px", Var("mv2"), Var("mv3")))),
    {"mv1": RealConst(1.5), "mv2": RealConst(1.5), "mv3": BoolConst(False)})


def _sums(k2: str, v2: str) -> Generated:
    """``sum(<k, v> in V) sum(<k2, v2> in V) 1.5``, elaborated."""
    ctx: dict[str, Type] = {"V": DictT(REAL)}
    e = Sum("k", "v", Var("V"), Sum(k2, v2, Var("V"), RealConst(1.5)))
    return Generated(ctx, typecheck(e, ctx)[0], REAL)


def _shadowing_sums(pk2: str, pv2: str, k2: str, v2: str
                    ) -> tuple[tuple[Generated, Expr, dict[str, Expr]], Generated]:
    """Sums whose inner key or value binder rebinds the outer one, cut with a pattern that
    binds that name twice too; and sums whose binders differ, which it must not match
    (as SHADOWING_LETS, for a sum's binders)."""
    g = _sums(k2, v2)
    pattern: Expr = Sum("pk", "pv", Var("mv1"), Sum(pk2, pv2, Var("mv2"), Var("mv3")))
    replaced: dict[str, Expr] = {"mv1": Var("V"), "mv2": Var("V"), "mv3": RealConst(1.5)}
    return (g, pattern, replaced), _sums("j", "w")


@given(cut_patterns(), st.sampled_from([LOGICAL, PHYSICAL]).flatmap(
    lambda lang: programs(lang=lang)))
@example(SHADOWING_LETS, Generated({}, Let("x", RealConst(1.5), Not(
    Let("t1'", RealConst(1.5), BoolConst(False)))), BOOL))
@example((Generated({"x": REAL}, Empty(tensor(2)), tensor(2)), Empty(tensor(2)), {}),
         Generated({"x": REAL}, Empty(tensor(1)), tensor(1)))  # zero[T]: T is its syntax
@example(*_shadowing_sums("pk", "pw", "k", "w"))  # the key binder named twice
@example(*_shadowing_sums("pj", "pv", "j", "v"))  # the value binder named twice
@example(WILDCARDS, Generated({"x": REAL}, Sum("_", "v1'", Single(IntConst(0), RealConst(1.5)),
                                               RealConst(1.5)), REAL))
@example(WILDCARDS, Generated({"x": REAL}, Sum("k1", "_", Single(IntConst(0), RealConst(1.5)),
                                               RealConst(1.5)), REAL))
def test_the_matcher_is_complete_and_sound(cut: tuple[Generated, Expr, dict[str, Expr]],
                                           other: Generated) -> None:
    g, pattern, replaced = cut
    rule = Rule("cut", "a pattern cut from a program", "properties", show(pattern),
                show(pattern), tuple(replaced))
    elab = g.expr  # elaborated by cut_patterns
    names = NameSupply(names_in(elab))
    m = rule.match(elab, g.ctx, check=False)
    assert m is not None, (show(pattern), show(elab))
    assert {x: show(e) for x, e in m.exprs.items()} == {
        x: show(e) for x, e in replaced.items()}
    assert show(rule.apply(m, names)) == show(elab)
    other_elab, _ = checked(other.expr, other.ctx)
    near = _another_constant(elab)  # the program with one constant changed
    for e, ctx in ((other_elab, other.ctx), (near, g.ctx)):
        m2 = rule.match(e, ctx, check=False)
        if m2 is not None:
            assert show(rule.apply(m2, names)) == show(e)


_CONSTANTS: list[Expr] = [
    *(IntConst(n) for n in (-1, 0, 2)), *(RealConst(r) for r in (-0.0, 0.0, 0.5)),
    *(BoolConst(b) for b in (False, True)), Empty(DictT(REAL)), Empty(DictT(INT, dense=True)),
    Add(RealConst(0.0), RealConst(0.0)), Add(IntConst(0), IntConst(0))]


def test_a_zero_metavariable_matches_exactly_the_zero_constants() -> None:
    """``Z``, ``Z1``, ``Z12`` match zero constants only; ``Zx`` is a metavariable like
    any other."""
    for name in ("Z", "Z1", "Z12", "Zx"):
        rule = Rule("zero", "a zero metavariable", "properties", name, name, (name,))
        for c in _CONSTANTS:  # a constant (no sum of constants), no bool, valued zero
            zero = not isinstance(c, Add | BoolConst) and is_zero(evaluate(c, {}))
            assert (rule.match(c, {}, check=False) is not None) == (zero or name == "Zx"), \
                (name, c)


def test_a_repeated_metavariable_or_binder_matches_the_same_thing_twice() -> None:
    """A metavariable that repeats matches equal subterms only, and a pattern's binder
    used as a variable matches that binder's variable only."""
    ctx: dict[str, Type] = {"x": REAL, "y": REAL, "j": INT, "X": DictT(REAL)}
    twice = Rule("twice", "a repeated metavariable", "properties", "e1 + e1", "e1", ("e1",))
    onehot = Rule("one-hot", "a binder as a variable", "properties",
                  "sum(<k, v> in e1) {k -> e2}", "e1", ("e1", "e2"))
    for rule, text, matches in [(twice, "x + x", True), (twice, "x + y", False),
                                (onehot, "sum(<i, a> in X) {i -> a}", True),
                                (onehot, "sum(<i, a> in X) {j -> a}", False),
                                (onehot, "sum(<i, a> in X) {0 -> a}", False)]:
        e = typecheck(parse_expr(text), ctx)[0]
        assert (rule.match(e, ctx, check=False) is not None) == matches, text


def _another_constant(e: Expr) -> Expr:
    """``e`` with its first numeric or boolean constant changed (``e`` when it has none)."""
    done = False

    def go(x: Expr) -> Expr:
        nonlocal done
        match x:
            case IntConst(n) if not done:
                done = True
                return IntConst(n + 1)
            case RealConst(r) if not done:
                done = True
                return RealConst(r + 1)
            case BoolConst(b) if not done:
                done = True
                return BoolConst(not b)
        return map_children(x, go)

    return go(e)


@given(st.lists(st.one_of(st.none(), st.sampled_from([0.5, 1.0, 2.0])), min_size=1,
                max_size=3),
       st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=1, max_size=3))
def test_a_pattern_array_matches_element_by_element(pattern: list[float | None],
                                                    array: list[float]) -> None:
    metavars = tuple(f"e{i}" for i, p in enumerate(pattern) if p is None)
    text = "[" + ", ".join(f"e{i}" if p is None else str(p) for i, p in enumerate(pattern)) + "]"
    rule = Rule("array", "a literal array", "properties", text, text, metavars)
    e, _ = typecheck(parse_expr("[" + ", ".join(map(str, array)) + "]"), {})
    m = rule.match(e, {}, check=False)
    same = len(pattern) == len(array) and all(p is None or p == a
                                              for p, a in zip(pattern, array, strict=False))
    assert (m is not None) == same
    if m is not None:
        assert {x: show(v) for x, v in m.exprs.items()} == {
            f"e{i}": str(a) for i, (p, a) in enumerate(zip(pattern, array, strict=True))
            if p is None}


def test_the_listing_shows_each_rule_with_its_conditions() -> None:
    every = {c.text for r in RULES for c in r.conditions}
    for rule in RULES:
        line = rule.show()
        rhs = rule.rhs if isinstance(rule.rhs, str) else rule.rhs_text
        assert rhs and line.startswith(f"{rule.name}: {rule.lhs}  ~>  {rhs}"), line
        mine = {c.text for c in rule.conditions}
        assert all(f"{c.text} ({c.kind})" in line for c in rule.conditions), line
        assert not any(f"{t} (" in line for t in every - mine), line
        assert ("   if " in line) == bool(rule.conditions), line


def test_a_family_is_the_rules_of_the_table_that_name_it() -> None:
    for name in (SPARSITY, NORMALIZATION):
        assert family(name) and all(r.family == name for r in family(name)), name
    assert [*family(SPARSITY), *family(NORMALIZATION)] == sorted(RULES, key=lambda r: (
        r.family != SPARSITY, RULES.index(r)))

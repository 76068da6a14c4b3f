"""The optimizer keeps each failure (DESIGN.md: an operation outside its domain raises an
evaluation error): for a program e and inputs ρ, the program ``pipeline(e)`` ends with —
saturation, AD, sparsity propagation, normalization — fails on ρ exactly where e does,
and has e's value elsewhere; where one operation fails (one, printed, among those that
can), with its message (of two that fail, which comes first is the order of evaluation,
which rewrites may change).  The same of ``pipeline(e, wrt=y)``, which differentiates
e's ANF, against ``gradient e y``.

A rewrite may move a term to where the program does not evaluate it (out of a loop over
a dictionary that may be empty, out of a branch: ``exp(c) * sum(...)``), or drop one the
program evaluates (``0.0 * exp(c)``, an unread ``let``, the other entries of a singleton
looked up); on a term that can fail (``exp`` overflows, ``log``, ``sqrt`` and ``inv``
have domains) the failure then appears or goes.  The rules move and drop only terms
that cannot fail (``sdqlite.syntax.ops.total``; each guard shown needed in
``test_saturation.py`` and ``test_rules.py``).  The programs here put an operation that
fails on some of the drawn inputs in such places, nested; the inputs hold an empty
dictionary, or entries at keys the program tests, and values inside and outside each
operation's domain.  (Overflow of + and * is outside this law: saturation reassociates
products, and C++ checks a kernel's result, not each step.)

``gradient e x`` is the expansion's value (Fig. fig:api): it reads only what the
derivative needs, and an unread ``let`` that can fail is no part of it
(``sdqlite.ad.gradient.live``), for the interpreter as for the optimizer, whether ANF
named the program's steps (``wrt=``) or not (``gradient e x`` in the source).
"""

from hypothesis import example, given
from hypothesis import strategies as st

from properties.generators import Draw
from sdqlite.ad.gradient import expand
from sdqlite.check.typecheck import Ctx, typecheck
from sdqlite.errors import EvalError
from sdqlite.opt.pipeline import Limits, pipeline
from sdqlite.syntax.ast import Expr, Gradient, Let, UnOp, subterms
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.parser import parse_program
from sdqlite.syntax.printer import show
from semantics.interp import evaluate
from semantics.values import FLOAT, values_equal

HEADER = "x : {int -> real}\nc : real\ny : real\n"
LIMITS = Limits(iter_limit=6, node_limit=3000, time_limit=60.0)


@st.composite
def guarded(draw: Draw, depth: int = 2) -> str:
    """A real-valued term with an operation that can fail (of c, or of an entry a of x)
    where the program may not evaluate it, or where the program evaluates it and a
    rewrite could drop it."""
    if depth == 0:
        leaf: str = draw(st.sampled_from(["exp(c)", "log(c)", "sqrt(c)", "inv(c)", "y", "c"]))
        return leaf
    h = draw(guarded(depth - 1))
    key = draw(st.sampled_from(["0", "1", "5"]))
    term: str = draw(st.sampled_from([
        f"sum(<i, a> in x) {h} * a",             # out of a loop that may run no time
        f"sum(<i, a> in x) a * {h}",
        f"sum(<i, a> in x) if i = {key} then a * {h}",  # a lookup at a key x may not hold
        f"sum(<i, a> in x) if i = {key} then {h} * log(a)",
        f"0.0 * {h}", f"{h} * 0.0",              # a zero factor
        f"let t = {h} in y",                      # an unread let
        f"let t = {h} in t * y",
        f"{{{key} -> {h}}}(1)",                   # another key's entry
        f"{h} * (if false then y)",
        f"(sum(<i, a> in x) {{i -> a}})({key}) * {h}",
        f"sum(<j, b> in (sum(<i, a> in x) {{i -> a * 0.0}})) b * {h}",  # an empty sum
        f"{h} + y * {h}",
    ]))
    return term


@st.composite
def failing_somewhere(draw: Draw) -> tuple[str, dict[str, object]]:
    body = draw(guarded(draw(st.integers(1, 3))))
    if draw(st.integers(0, 3)) == 0:
        body = f"gradient ({body}) y"
    x = draw(st.sampled_from([{}, {0: 2.0}, {1: -1.0}, {0: 0.5, 5: 3.0}]))
    c = draw(st.sampled_from([1000.0, -1.0, 0.0, 0.5]))
    return HEADER + body, {"x": x, "c": c, "y": 1.5}


def _outcome(e: Expr, env: dict[str, object]) -> tuple[str, object]:
    try:
        return "value", evaluate(e, env, FLOAT)
    except EvalError as err:
        return "failure", err.message


def _agree(source: str, env: dict[str, object], want: Expr, got: Expr) -> None:
    (was, before), (now, after) = _outcome(want, env), _outcome(got, env)
    assert was == now, (source, env, before, after)
    failing = {show(t) for t in subterms(want)
               if isinstance(t, UnOp) and not UNARY_OPS[t.op].total}
    if was == "failure":
        assert len(failing) > 1 or after == before, (source, env, before, after)
    else:
        assert values_equal(after, before, rel_tol=1e-9, abs_tol=1e-12), (source, env)


def _typed(source: str) -> tuple[Expr, Ctx]:
    program = parse_program(source)
    assert program.expr is not None
    ctx = {d.name: d.type for d in program.decls}
    return typecheck(program.expr, ctx)[0], ctx


@given(failing_somewhere())
@example((HEADER + "sum(<i, a> in x) if i = 5 then a * exp(c)", {
    "x": {1: -1.0}, "c": 1000.0, "y": 1.5})).via(
    "sum-to-get read x(5) and evaluated exp(c) although x holds no key 5")
@example((HEADER + "sum(<i, a> in x) exp(c) * a", {"x": {}, "c": 1000.0, "y": 1.5})).via(
    "sum-fact-1 moved exp(c) out of a loop that runs no time")
@example((HEADER + "0.0 * exp(c)", {"x": {}, "c": 1000.0, "y": 1.5})).via(
    "mult-zero-left dropped the failing factor")
@example((HEADER + "let t = log(c) in y", {"x": {}, "c": -1.0, "y": 1.5})).via(
    "beta dropped an unread let that fails")
@example((HEADER + "{0 -> log(c)}(1)", {"x": {}, "c": -1.0, "y": 1.5})).via(
    "lookup-single skipped the singleton's value")
@example((HEADER + "gradient (sum(<i, a> in x) exp(c) * a) y", {
    "x": {0: 2.0}, "c": 1000.0, "y": 1.5})).via(
    "the expansion evaluates exp(c) for the tangent 0; the optimized program did not")
@example((HEADER + "exp(c) * x", {"x": {}, "c": 1000.0, "y": 1.5})).via(
    "mul-normalize-right moved exp(c) into the loop over an empty x")
def test_the_pipeline_keeps_each_failure(case: tuple[str, dict[str, object]]) -> None:
    source, env = case
    e, ctx = _typed(source)
    _agree(source, env, expand(e, ctx), pipeline(e, ctx, limits=LIMITS)[-1].program)


@given(failing_somewhere())
@example((HEADER + "y + log(c)", {"x": {}, "c": -1.0, "y": 1.5})).via(
    "ANF's let t2 = y + t1 read the unread log(c): it stayed, and failed")
@example((HEADER + "let t = log(c) in let u = t + 1.0 in y * y",
          {"x": {}, "c": -1.0, "y": 1.5})).via(
    "the unread u kept t: gradient failed, the pipeline's gradient did not")
def test_the_pipeline_s_gradient_fails_where_gradient_does(
        case: tuple[str, dict[str, object]]) -> None:
    source, env = case
    e, ctx = _typed(source)
    if isinstance(e, Gradient):
        e = e.expr
    want = expand(typecheck(Gradient(e, "y"), ctx)[0], ctx)
    _agree(source, env, want, pipeline(e, ctx, "y", limits=LIMITS)[-1].program)


def test_an_unread_let_that_can_fail_is_no_part_of_a_gradient() -> None:
    """``gradient e x`` reads what its derivative needs: an unread let that can fail is
    dropped from the expansion (and one that cannot stays, as the paper prints it)."""
    for body, want in [("let t = log(c) in y * y", 3.0), ("y + log(c)", 1.0)]:
        e, ctx = _typed(HEADER + f"gradient ({body}) y")
        env = {"x": {}, "c": -1.0, "y": 1.5}
        assert _outcome(pipeline(e, ctx, limits=LIMITS)[0].program, env) == ("value", want)
    e, ctx = _typed(HEADER + "gradient (let t = c in y * y) y")
    expanded = pipeline(e, ctx, limits=LIMITS)[0].program
    assert any(isinstance(t, Let) and t.name == "t" for t in subterms(expanded))

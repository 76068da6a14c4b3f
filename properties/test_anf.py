"""ANF conversion (§5.1) preserves meaning and types, and produces ANF.

For generated Γ ⊢ e : T (elaborated by the checker): Γ ⊢ anf(e) : T, ⟦anf(e)⟧ρ = ⟦e⟧ρ
for generated ρ ∈ ⟦Γ⟧ (exactly, over the rationals), and in anf(e) every operand of
every construct is an atom, a ``sum`` or ``if`` body is itself in ANF, and a let chain
ends in an atom.  Fresh names never capture the program's own names.

``gradient(e, x, share=True)`` (ANF first, as the pipeline and the CLI's ``grad`` do) is
linear in the program: on a chain of n unary operations its size at 2n is at most about
twice its size at n, and it means the same as Fig. fig:api's form, ``gradient``'s
default, which repeats each primal operand and so grows beyond that bound (issue 11's
``grad`` of sin nested 2,000 deep).
"""

from hypothesis import example, given
from hypothesis import strategies as st

from properties.generators import Generated, programs_with_env
from sdqlite.ad.anf import anf, is_atom
from sdqlite.ad.gradient import checked, gradient
from sdqlite.check.typecheck import typecheck
from sdqlite.syntax.ast import Add, Expr, If, Let, RealConst, Sum, UnOp, Var, children, subterms
from sdqlite.syntax.types import REAL
from semantics.interp import evaluate
from semantics.values import FRACTION, Value

Case = tuple[Generated, dict[str, Value]]

# A user's let in operand position must not capture the input x that follows it.
CAPTURE: Case = (Generated({"x": REAL}, Add(Let("x", RealConst(1.0), Var("x")), Var("x")),
                           REAL), {"x": 5})


def in_anf(e: Expr) -> bool:
    """Operands are atoms; sum/if bodies and let bodies are ANF; chains end in atoms."""
    match e:
        case Let(_, rhs, body):
            return _operands_atomic(rhs) and in_anf(body)
        case _:
            return is_atom(e)


def _operands_atomic(e: Expr) -> bool:
    match e:
        case Sum(_, _, dom, body):
            return is_atom(dom) and in_anf(body)
        case If(c, body):
            return is_atom(c) and in_anf(body)
        case _:
            return all(is_atom(c) for c in children(e))


@given(programs_with_env(exact=True))
@example(CAPTURE)
def test_anf_preserves_type_and_meaning(case: Case) -> None:
    g, env = case
    elab, t = checked(g.expr, g.ctx)
    converted = anf(elab)
    assert in_anf(converted)
    elab2, t2 = typecheck(converted, g.ctx)
    assert t2 == t
    assert evaluate(elab2, env, FRACTION) == evaluate(elab, env, FRACTION)


@given(st.lists(st.sampled_from(["sin", "cos", "tanh"]), min_size=5, max_size=40),
       st.data())
def test_gradient_with_sharing_is_linear_in_the_program(ops: list[str],
                                                        data: st.DataObject) -> None:
    def chain(n: int) -> Expr:
        e: Expr = Var("x")
        for op in (ops * 2)[:n]:
            e = UnOp(op, e)
        return typecheck(e, {"x": REAL})[0]

    def size(n: int, share: bool = True) -> int:
        return sum(1 for _ in subterms(gradient(chain(n), "x", {"x": REAL}, share=share)))

    def default_size(n: int) -> int:  # gradient as called without share
        return sum(1 for _ in subterms(gradient(chain(n), "x", {"x": REAL})))

    n = len(ops)
    assert size(2 * n) <= 2 * size(n) + 8
    # without share (the default), Fig. fig:api's form: beyond that bound
    assert default_size(2 * n) > 2 * default_size(n) + 8
    assert size(2 * n, share=False) == default_size(2 * n)
    env: dict[str, Value] = {"x": data.draw(st.sampled_from([0.5, -1.0, 2.0]))}
    shared = gradient(chain(n), "x", {"x": REAL}, share=True)
    plain = gradient(chain(n), "x", {"x": REAL})
    a, b = evaluate(shared, env), evaluate(plain, env)
    assert abs(a - b) <= 1e-9 * (1 + abs(b))

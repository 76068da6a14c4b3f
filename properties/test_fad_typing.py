"""Lemma lem:well_typedness_D (§6.1): if Γ ⊢ e : T then D_τ[Γ] ⊢ D_τ[e] : D_τ[T],
for generated programs of Logical SDQLite (and of Physical SDQLite, where tangents of
dense layers are sparse: D_τ[T] = sparse(T) ⊗ τ) and τ of order 0–2 — checked by our type
checker, on the program as generated and after ANF.  Scalar FAD is the case τ = real:
F[Γ] ⊢ F[e] : F[T].  The expansion of the gradient API is well typed too:
Γ ⊢ gradient e x : T ⊗ τ_x for every real input x, the type the checker gives the
unexpanded ``gradient e x`` from the types alone; for a discrete input (int, bool or
dictionaries of them) or a name that is not an input, ``gradient`` is refused with a
DiffError that names it; and D_τ itself is defined only for τ a real tensor type (real
or dictionaries of real): any other τ is a DiffError.  Scalar FAD multiplies as the
primal does (Fig. fig:diffrules: ``*^T[real]`` is ``*``): it moves no indices.  Rule
[let] binds x, then x' = D[e1], as the figure prints it (D[e1] first where e1 reads the
x it rebinds).  Every
unary operation of D_τ[e] is located at one of e's (rule [op]'s ``op'(e)`` at ``op(e)``):
a failure in a derivative, ``inv(0.0)`` for ``log'(0.0)``, is reported where the source
has the operation.
"""

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from properties.generators import LOGICAL, PHYSICAL, SPARSE1, SPARSE2, Generated, programs
from sdqlite.ad.anf import anf
from sdqlite.ad.fad import fad, tangent_context
from sdqlite.ad.gradient import checked, gradient
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import DiffError, Span
from sdqlite.syntax.ast import (
    Add,
    Empty,
    Gradient,
    IntConst,
    Let,
    Lookup,
    RealConst,
    Single,
    Sum,
    UnOp,
    Var,
    free_vars,
    subterms,
)
from sdqlite.syntax.names import names_in
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import (
    BOOL,
    INT,
    REAL,
    DictT,
    Type,
    is_discrete,
    sparse,
    tangent_type,
    tensor,
)

TAUS = [REAL, tensor(1), tensor(2)]


# Shrunk: ANF let-binds an {int -> int} value, which had no tangent type (it is discrete).
INT_DICT_BOUND = Generated(
    {"x": SPARSE1},
    Lookup(Empty(SPARSE1),
           Lookup(Let("t1'", RealConst(1.5),
                      Sum("_", "_", Empty(SPARSE2), Empty(DictT(INT)))), IntConst(0))),
    SPARSE1)


# Shrunk: a let rebinding the input it reads, to another type; D[e1] was bound after the
# rebinding, and read the real V1 as the dictionary it had summed.
SELF_SHADOWING = Generated(
    {"x": SPARSE1, "V1": SPARSE1},
    Add(Single(IntConst(0), RealConst(1.5)),
        Let("V1", Sum("k1'", "v2'", Var("V1"), Var("v2'")), Var("x"))),
    SPARSE1)


@given(programs(lang=LOGICAL), st.sampled_from(TAUS), st.booleans())
@example(SELF_SHADOWING, REAL, False)
@example(INT_DICT_BOUND, REAL, True)
@example(INT_DICT_BOUND, tensor(1), False)
def test_tangent_program_is_well_typed(g: Generated, tau: Type, use_anf: bool) -> None:
    _check_typing(g, tau, use_anf)


@given(programs(lang=PHYSICAL), st.sampled_from(TAUS), st.booleans())
def test_tangent_program_is_well_typed_on_physical_programs(
        g: Generated, tau: Type, use_anf: bool) -> None:
    _check_typing(g, tau, use_anf)


def _check_typing(g: Generated, tau: Type, use_anf: bool) -> None:
    elab, t = checked(g.expr, g.ctx)
    e = anf(elab) if use_anf else elab
    d, tangents = fad(e, g.ctx, tau)
    _, dt = typecheck(d, tangent_context(g.ctx, tau, tangents))
    assert dt == tangent_type(t, tau)


@given(programs(lang=LOGICAL), st.sampled_from(TAUS), st.booleans())
@example(SELF_SHADOWING, REAL, True)
def test_fad_of_a_let_binds_x_then_its_tangent(g: Generated, tau: Type, reads_x: bool
                                               ) -> None:
    """Rule [let] as Fig. fig:diffrules prints it, ``let <x, x'> = <e1, D[e1]> in D[e2]``:
    x is bound first, then x' = D[e1]; unless e1 reads the x it rebinds, where D[e1]
    must be bound first (it reads the x outside)."""
    elab, t = checked(g.expr, g.ctx)
    assume(not is_discrete(t))  # a discrete let's tangent is zero: no let is built
    x = next((y for y in sorted(g.ctx) if reads_x and y in free_vars(elab)), "y1")
    if x == "y1":
        assume(x not in names_in(elab))
    d, _ = fad(Let(x, elab, Var(x)), g.ctx, tau)
    assert isinstance(d, Let) and isinstance(d.body, Let), show(d)
    primal, tangent = (d.body, d) if x in free_vars(elab) else (d, d.body)
    assert (primal.name, primal.rhs) == (x, elab), show(d)
    assert tangent.name != x and d.body.body == Var(tangent.name), show(d)  # D[x] = x'


@given(st.sampled_from([LOGICAL, PHYSICAL]).flatmap(lambda lang: programs(lang=lang)),
       st.booleans())
def test_scalar_fad_multiplies_without_moving_indices(g: Generated, use_anf: bool) -> None:
    """Fig. fig:diffrules: ``*^T[real]`` is ``*``: with τ = real, D builds no one-hot
    ``{i -> 1.0}`` over a key of its own (the index moves of ``*^T`` for a tensor τ)."""
    elab, _ = checked(g.expr, g.ctx)
    e = anf(elab) if use_anf else elab
    d, tangents = fad(e, g.ctx, REAL)
    own = names_in(d) - names_in(e) - set(tangents.values())
    assert not [s for s in subterms(d) if isinstance(s, Single) and isinstance(s.key, Var)
                and s.key.name in own and s.val == RealConst(1.0)]


@given(st.sampled_from([LOGICAL, PHYSICAL]).flatmap(lambda lang: programs(lang=lang)),
       st.data())
def test_gradient_expansion_is_well_typed(g: Generated, data: st.DataObject) -> None:
    elab, t = checked(g.expr, g.ctx)
    real_inputs = sorted(x for x, s in g.ctx.items() if not is_discrete(s))
    assume(real_inputs)
    x = data.draw(st.sampled_from(real_inputs))
    _, gt = typecheck(gradient(elab, x, g.ctx), g.ctx)
    assert gt == tangent_type(t, sparse(g.ctx[x]))
    assert typecheck(Gradient(g.expr, x), g.ctx)[1] == gt  # the checker's, unexpanded


@given(st.sampled_from([LOGICAL, PHYSICAL]).flatmap(lambda lang: programs(lang=lang)),
       st.data())
def test_gradient_by_a_discrete_input_or_a_non_input_is_refused(
        g: Generated, data: st.DataObject) -> None:
    elab, _ = checked(g.expr, g.ctx)
    others = {"z9": "not an input"} | {x: "discrete" for x, s in g.ctx.items()
                                        if is_discrete(s)}
    x = data.draw(st.sampled_from(sorted(others)))
    with pytest.raises(DiffError, match=f"respect to {x}.*{others[x]}"):
        gradient(elab, x, g.ctx)


@given(st.sampled_from([INT, BOOL, REAL]), st.lists(st.booleans(), max_size=3))
def test_fad_is_defined_only_for_real_tensor_taus(leaf: Type, layers: list[bool]) -> None:
    tau = leaf
    for dense in layers:
        tau = DictT(tau, dense=dense)
    e, _ = typecheck(Var("s"), {"s": REAL})
    if leaf == REAL:
        fad(e, {"s": REAL}, tau)
    else:
        with pytest.raises(DiffError, match="τ must be a real tensor type"):
            fad(e, {"s": REAL}, tau)


#: the operations each op' introduces: op'(z)'s, z a variable
INTRODUCED = {op: {t.op for t in subterms(u.derivative(Var("z"))) if isinstance(t, UnOp)}
              for op, u in UNARY_OPS.items()}


@given(st.sampled_from([LOGICAL, PHYSICAL]).flatmap(lambda lang: programs(lang=lang)),
       st.sampled_from(TAUS), st.booleans())
@example(Generated({"x": REAL}, UnOp("log", UnOp("sqrt", Var("x"))), REAL), REAL, False)
def test_every_operation_of_a_derivative_is_located_in_the_source(
        g: Generated, tau: Type, use_anf: bool) -> None:
    """Rule [op]: op'(e) is located at op(e), and e's own operations keep theirs
    (printed and parsed again, every operation of the source has its span): each
    operation of D[e] is at an operation of e, the same one or one whose derivative
    introduces it; the interpreter and the C++ backend report a failing operation at
    its span, and one without a span has no location to report."""
    elab, _ = checked(parse_expr(show(g.expr)), g.ctx)
    e = anf(elab) if use_anf else elab
    d, _ = fad(e, g.ctx, tau)
    source: dict[Span | None, set[str]] = {}  # an expanded gradient's op'(e) shares op's
    for s in subterms(e):
        if isinstance(s, UnOp):
            source.setdefault(s.span, set()).add(s.op)
    assert None not in source
    for u in (s for s in subterms(d) if isinstance(s, UnOp)):
        assert u.span in source, u
        assert any(u.op == op or u.op in INTRODUCED[op] for op in source[u.span]), (u, source)

"""The gradient API of Fig. fig:api, expanded into core SDQLite.

    gradient e (x : τ) ≜ let <v1', ..., vn'> = <ingrad v1 x, ..., ingrad vn x> in D_τ[e]
                         where {v1, ..., vn} = FVS(e)
    ingrad (v : D) x ≜ zero[D ⊗ τ]       ingrad (x : D) x ≜ onehot[D] x

(The paper writes ``zero[D]`` for ``ingrad``; ``D ⊗ τ`` is the type that makes the
expansion well typed, and equals ``D`` for τ = real.)  The result has type ``T ⊗ τ``:
output indices first, then those of ``x``.  The checker gives ``gradient e x`` that type
without expanding it; ``expand`` replaces every ``gradient`` of a checked program by its
expansion, and is what the pipeline, the REPL and ``semantics.run`` call after checking.

Which entries a gradient covers follows the variable's type (DESIGN.md): ``onehot``
iterates the stored entries of ``x``, so for a sparse ``{int -> ...}`` variable the
gradient is *masked* to its non-zero entries; a dense ``{dense_int -> ...}`` variable
stores every position, zeros included, so its gradient covers every position.  The
gradient's layout is sparse either way: τ is the type of ``x`` with dense layers made
sparse (``sdqlite.syntax.types.tangent_type``).
"""

from __future__ import annotations

from collections.abc import Mapping

from sdqlite.ad.anf import anf
from sdqlite.ad.fad import fad
from sdqlite.check.typecheck import Ctx, bind, synth, typecheck, wrt_type
from sdqlite.errors import DiffError, SDQLiteError, SDQLTypeError
from sdqlite.syntax import sugar
from sdqlite.syntax.ast import (
    Expr,
    Gradient,
    Let,
    RealConst,
    Sum,
    Var,
    children,
    free_vars,
    map_children,
    subterms,
)
from sdqlite.syntax.names import NameSupply, names_in
from sdqlite.syntax.ops import total
from sdqlite.syntax.types import INT, DictT, Type, erase, is_discrete, sparse, tangent_type


def gradient(e: Expr, x: str, ctx: Ctx, *, share: bool = False) -> Expr:
    """``gradient e x`` for an elaborated ``ctx ⊢ e`` (without ``gradient`` inside),
    expanded into core SDQLite.

    With ``share``, ``e`` is put in ANF first (§5.1), as the pipeline does: the rules
    refer to a primal operand twice (``D[op(a)] = op'(a) * D[a]``), so without it the
    expansion of a deep program grows quadratically.  Without, it is Fig. fig:api's."""
    try:
        tau = wrt_type(ctx, x)
    except SDQLTypeError as err:
        raise DiffError(err.message, err.span) from None
    unchecked = next((t for t in subterms(e) if hasattr(t, "ty") and t.ty is None), None)
    if unchecked is not None:  # the rules read the types the checker writes in
        raise DiffError("gradient takes a checked program: call sdqlite.typecheck(e, ctx) "
                        "first and differentiate what it returns (or use sdqlite.grad)",
                        getattr(unchecked, "span", None))
    names = NameSupply(names_in(e) | set(ctx))
    if share:
        e = anf(e, names)
    fvs = sorted(free_vars(e))
    tangents = {v: names.prime(v) for v in fvs}
    body, _ = fad(e, {v: erase(ctx[v]) for v in fvs}, tau, tangents, names)
    for v in reversed(fvs):
        body = Let(tangents[v], ingrad(v, x, erase(ctx[v]), tau, names), body)
    return live(body)


def live(e: Expr) -> Expr:
    """``e`` without the unread lets that can fail: the expansion fails only where what
    the derivative needs fails — as ``gradient (y + log(c)) y`` is 1.0 at c = -1, so is
    ``gradient (let t = log(c) in y * y) y``, and logistic regression's gradient does not
    compute its loss (a primal value FAD binds that no tangent reads).  A let is unread
    when nothing the result needs reads it (what unread lets read does not count, so the
    answer is the same whether ANF named the steps or not); one that can fail
    (``ops.total``), or reads a dropped one, is dropped.  The others stay, as the paper
    prints them (Example 1's ``i' = 0.0``): they change nothing.  The optimizer may not
    drop a let that can fail (it would hide a failure the program has); the definition
    does, for the interpreter too."""
    unread: set[int] = set()

    def reads(e: Expr) -> frozenset[str]:  # what the result needs
        match e:
            case Var(name):
                return frozenset({name})
            case Let(x, rhs, body):
                used = reads(body)
                if x not in used:
                    unread.add(id(e))
                    return used
                return reads(rhs) | (used - {x})
            case Sum(k, v, dom, body):
                return reads(dom) | (reads(body) - {k, v})
        return frozenset().union(*(reads(c) for c in children(e)))

    def keep(e: Expr, dropped: frozenset[str]) -> Expr:
        match e:
            case Let(x, rhs, body):
                if id(e) in unread and (not total(rhs) or free_vars(rhs) & dropped):
                    return keep(body, dropped | {x})
                return Let(x, keep(rhs, dropped), keep(body, dropped - {x}), span=e.span)
            case Sum(k, v, dom, body):
                return Sum(k, v, keep(dom, dropped), keep(body, dropped - {k, v}),
                           span=e.span, ty=e.ty)
        return map_children(e, lambda c: keep(c, dropped))

    reads(e)
    return keep(e, frozenset()) if unread else e


def ingrad(v: str, x: str, t: Type, tau: Type, names: NameSupply) -> Expr:
    """Fig. fig:api: the seed tangent of input ``v``."""
    if v == x:  # iterates the stored entries of x: every position of a dense array
        return sugar.onehot(sparse(t), Var(x), names.fresh)
    if is_discrete(t):
        return RealConst(0.0)
    return sugar.zero(tangent_type(t, tau))


def expand(e: Expr, ctx: Ctx) -> Expr:
    """A checked ``ctx ⊢ e`` with every ``gradient e' x`` replaced by its expansion
    (innermost first), elaborated: a program the interpreter, ANF, FAD, the optimizer and
    the backend take.  Only the paths to a ``gradient`` are rebuilt."""
    inside = _with_gradient(e)

    def go(e: Expr, ctx: Ctx) -> Expr:
        if id(e) not in inside:
            return e
        match e:
            case Gradient(body, x):  # Fig. fig:api
                try:
                    return synth(ctx, gradient(go(body, ctx), x, ctx))[0]
                except SDQLiteError as err:  # located where the program says gradient
                    raise SDQLTypeError(err.message, err.span or e.span) from None
            case Sum(k, v, dom, body):
                dom2 = go(dom, ctx)
                dt = synth(ctx, dom2)[1]
                assert isinstance(dt, DictT), "a checked program"
                return Sum(k, v, dom2, go(body, bind(ctx, **{k: INT, v: dt.val})),
                           span=e.span, ty=e.ty)
            case Let(x, rhs, body):
                rhs2 = go(rhs, ctx)
                return Let(x, rhs2, go(body, bind(ctx, **{x: synth(ctx, rhs2)[1]})),
                           span=e.span)
            case _:
                return map_children(e, lambda c: go(c, ctx))

    return go(e, ctx)


def checked(e: Expr, ctx: Ctx) -> tuple[Expr, Type]:
    """``ctx ⊢ e`` checked (``sdqlite.check.typecheck``), then its gradients expanded: the
    program every stage after AD takes, and its type."""
    elab, t = typecheck(e, ctx)
    return expand(elab, ctx), t


def _with_gradient(e: Expr) -> set[int]:
    """The ids of the nodes of ``e`` that have a ``gradient`` at or below them."""
    out: set[int] = set()

    def visit(e: Expr) -> bool:
        found = isinstance(e, Gradient)
        for c in children(e):
            found = visit(c) or found
        if found:
            out.add(id(e))
        return found

    visit(e)
    return out


def jvp(e: Expr, ctx: Ctx, tangents: Mapping[str, str] | None = None
        ) -> tuple[Expr, dict[str, str]]:
    """``F[e]``: the directional derivative, reading the tangent of each input ``x`` from
    the variable ``x'`` (or the name given in ``tangents``)."""
    return fad(e, ctx, tangents=tangents)


def jacobian(e: Expr, x: str, ctx: Ctx) -> Expr:
    """The whole Jacobian of ``e`` w.r.t. ``x`` as one tensor of type ``T ⊗ τ`` (output
    indices first, then those of ``x``): exactly what ``gradient e x`` computes — tensorized
    FAD seeded with ``onehot`` — under the name a user of a Jacobian API looks for."""
    return gradient(e, x, ctx)

"""The gradient API of Fig. fig:api, expanded into core SDQLite.

    gradient e (x : τ) ≜ let <v1', ..., vn'> = <ingrad v1 x, ..., ingrad vn x> in D_τ[e]
                         where {v1, ..., vn} = FVS(e)
    ingrad (v : D) x ≜ zero[D ⊗ τ]       ingrad (x : D) x ≜ onehot[D] x

(The paper writes ``zero[D]`` for ``ingrad``; ``D ⊗ τ`` is the type that makes the
expansion well typed, and equals ``D`` for τ = real.)  The result has type ``T ⊗ τ``:
output indices first, then those of ``x``.

Which entries a gradient covers follows the variable's type (DESIGN.md): ``onehot``
iterates the stored entries of ``x``, so for a sparse ``{int -> ...}`` variable the
gradient is *masked* to its non-zero entries; a dense ``{dense_int -> ...}`` variable
stores every position, zeros included, so its gradient covers every position.  The
gradient's layout is sparse either way: τ is the type of ``x`` with dense layers made
sparse (``sdqlite.fad.tangent_type``).
"""

from __future__ import annotations

from collections.abc import Mapping

from sdqlite import sugar
from sdqlite.anf import anf
from sdqlite.ast import Expr, Let, RealConst, Var, free_vars
from sdqlite.fad import DiffError, fad, is_discrete, sparse, tangent_type
from sdqlite.names import NameSupply, names_in
from sdqlite.typecheck import Ctx
from sdqlite.types import Type, erase


def wrt_type(ctx: Ctx, x: str) -> Type:
    """τ for ``gradient e x``: the type of ``x`` with its dense layers made sparse."""
    if x not in ctx:
        raise DiffError(f"cannot differentiate with respect to {x}: it is not an input "
                        f"(inputs: {', '.join(sorted(ctx)) or 'none'})")
    if is_discrete(ctx[x]):
        raise DiffError(f"cannot differentiate with respect to {x} : {ctx[x]}: it is discrete")
    return sparse(erase(ctx[x]))


def gradient(e: Expr, x: str, ctx: Ctx, *, share: bool = False) -> Expr:
    """``gradient e x`` for an elaborated ``ctx ⊢ e``, expanded into core SDQLite.

    With ``share``, ``e`` is put in ANF first (§5.1), as the pipeline does: the rules
    refer to a primal operand twice (``D[op(a)] = op'(a) * D[a]``), so without it the
    expansion of a deep program grows quadratically.  Without, it is Fig. fig:api's."""
    tau = wrt_type(ctx, x)
    names = NameSupply(names_in(e) | set(ctx))
    if share:
        e = anf(e, names)
    fvs = sorted(free_vars(e))
    tangents = {v: names.prime(v) for v in fvs}
    body, _ = fad(e, {v: erase(ctx[v]) for v in fvs}, tau, tangents, names)
    for v in reversed(fvs):
        body = Let(tangents[v], ingrad(v, x, erase(ctx[v]), tau, names), body)
    return body


def ingrad(v: str, x: str, t: Type, tau: Type, names: NameSupply) -> Expr:
    """Fig. fig:api: the seed tangent of input ``v``."""
    if v == x:  # iterates the stored entries of x: every position of a dense array
        return sugar.onehot(sparse(t), Var(x), names.fresh)
    if is_discrete(t):
        return RealConst(0.0)
    return sugar.zero(tangent_type(t, tau))


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

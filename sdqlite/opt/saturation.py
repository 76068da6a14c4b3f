"""Equality saturation of SDQLite programs (§5.2): encode, saturate with the STOREL
rules, extract the cheapest program under the cost model, decode.

The pieces, one concern each: ``sdqlite.opt.debruijn`` (terms with de Bruijn indices),
``sdqlite.opt.analysis`` (each class's type and scope), ``sdqlite.opt.cost`` (STOREL's
cost model), ``sdqlite.opt.storel`` (the rule table and its guards), and the generic
engine ``sdqlite.opt.egraph``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sdqlite.check.typecheck import Ctx, typecheck
from sdqlite.errors import Span
from sdqlite.opt.analysis import new_egraph
from sdqlite.opt.cost import cost_model, term_cost
from sdqlite.opt.debruijn import decode, encode
from sdqlite.opt.egraph import Report, Term, run
from sdqlite.opt.extract import extract
from sdqlite.opt.storel import OFF_BY_DEFAULT, SATURATION_RULES
from sdqlite.syntax.ast import Expr
from sdqlite.syntax.names import NameSupply, names_in


@dataclass(frozen=True)
class Limits:
    """Per saturation: iterations (egg's default) and e-graph nodes, which decide where a
    saturation stops (the same program, options and version optimize to the same program
    on any machine), and seconds, which only stop a runaway: a stage stopped by its time
    limit says so (``TimeLimitWarning``).  Every kernel of ``make bench`` saturates well
    within them."""

    iter_limit: int = 30
    node_limit: int = 5_000  # twice the largest saturated e-graph of make bench's kernels (LSQ)
    time_limit: float = 120.0


class TimeLimitWarning(UserWarning):
    """A stage of the pipeline stopped at its wall-clock limit: what it made depends on
    how fast this machine was at the time."""


@dataclass
class Optimized:
    program: Expr
    report: Report
    cost_before: float
    cost_after: float


def optimize(e: Expr, ctx: Ctx, *, rules: list[str] | None = None,
             iter_limit: int = Limits.iter_limit, node_limit: int = Limits.node_limit,
             time_limit: float = Limits.time_limit,
             unique: Mapping[str, str | None] | None = None) -> Optimized:
    """Equality saturation of an elaborated ``ctx ⊢ e`` with the SDQLite rules (``rules``
    by name; by default all but ``OFF_BY_DEFAULT``), then extraction of the cheapest
    program under the cost model (never costlier than ``e``).  ``unique``: index arrays
    of ``ctx`` known unique within the segments of a pointer array (``Composed.unique``)."""
    g = new_egraph(unique)
    spans: dict[Term, Span] = {}
    term = encode(e, ctx, spans=spans)
    root = g.add_term(term)
    chosen = [rw for name, (_, rw) in SATURATION_RULES.items()
              if (name not in OFF_BY_DEFAULT if rules is None else name in rules)]
    cost = cost_model(g)
    before = term_cost(g, term, cost)
    report = run(g, chosen, iter_limit=iter_limit, node_limit=node_limit,
                 time_limit=time_limit)
    after, best = extract(g, root, cost)  # ≤ before: the input is in the root class
    out = decode(best, NameSupply(names_in(e) | set(ctx)), spans=spans)
    elab, _ = typecheck(out, ctx)
    return Optimized(elab, report, before, after)

"""The transformations of Fig. fig:arch as one function.

    pre-differentiation saturation → ANF → AD (gradient e x) → sparsity propagation
    (with lookups at keys known to be stored: iterated from the same dictionary, or
    within a dense input's declared extent) → saturation → storage composition →
    saturation → multiplication normalization

Without a variable to differentiate by, the program is only saturated, composed and
normalized.  Storage composition (§5.3) runs when some input has a storage format other
than ``dict``: it binds the input to its format's definition over its flat arrays, so
from there on the program's inputs (each stage's ``ctx``) are those arrays.
Normalization can be left out (``normalize=False``) to measure its effect
(Fig. fig:batax:opt).  ``Limits``' iterations and nodes decide where each saturation
stops; its seconds bound each saturation and each rewriting pass (sparsity
propagation, normalization) only against a runaway, with a ``TimeLimitWarning``; the
other stages are linear in the program.  Every stage's program is kept (``Stage``),
with what it did: rules fired, e-graph size, iterations, cost before and after, time.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from sdqlite.ad.anf import anf
from sdqlite.ad.gradient import expand, gradient
from sdqlite.check.typecheck import Ctx, typecheck
from sdqlite.opt.passes import (
    PassResult,
    iterated_key_lookup,
    normalize_multiplication,
    positional_rows,
    row_views,
    sparsity_propagation,
)
from sdqlite.opt.saturation import Limits as Limits  # part of this module's interface
from sdqlite.opt.saturation import TimeLimitWarning, optimize
from sdqlite.opt.storel import OFF_BY_DEFAULT, SATURATION_RULES
from sdqlite.storage.compose import compose
from sdqlite.storage.formats import Format
from sdqlite.syntax.ast import Expr, free_vars

#: the rules of the saturation over the formats' flat arrays: the default ones, the
#: hoisting of a linear body out of the loops over rows, and fusion for any body
#: (``OFF_BY_DEFAULT`` says why not earlier)
AFTER_COMPOSITION = [name for name in SATURATION_RULES if name not in OFF_BY_DEFAULT] + [
    "sum-hoist", "sum-sum-vert-fuse-exact-1", "sum-sum-vert-fuse-exact-2"]


@dataclass
class Stage:
    name: str
    program: Expr
    seconds: float
    report: dict[str, object] = field(default_factory=dict)
    ctx: Ctx | None = None  # the inputs' types here (None: the pipeline's input context)


def pipeline(e: Expr, ctx: Ctx, wrt: str | None = None, limits: Limits | None = None,
             formats: Mapping[str, Format] | None = None, *, normalize: bool = True,
             spans: Collection[str] = ()) -> list[Stage]:
    """Run the pipeline on an elaborated ``ctx ⊢ e``; the last stage is the result, typed
    in the last stage's ``ctx``.  ``spans`` names inputs whose data are laid out with each
    positional layer spanning its declared size (a scipy matrix's shape fixes it): their
    rows are read in place at keys of that size (``compose``)."""
    limits = limits or Limits()
    e = expand(e, ctx)  # the program's own gradient e' x, if any (Fig. fig:api)
    stages = [Stage("input", e, 0.0, ctx=dict(ctx))]
    here: dict[str, Ctx] = {"ctx": ctx}  # the current inputs' types
    unique: dict[str, str | None] = {}  # index arrays unique within segments

    def stage(name: str, fn: Callable[[Expr], tuple[Expr, dict[str, object]]]) -> None:
        start = time.perf_counter()
        program, report = fn(stages[-1].program)
        stages.append(Stage(name, program, time.perf_counter() - start, report,
                            dict(here["ctx"])))
        if report.get("stop") == "time limit":  # the work limits did not decide: say so
            warnings.warn(f"{name} stopped at its time limit of {limits.time_limit:g} s: the "
                          "program it made depends on this machine's speed (lower the "
                          "iteration or node limit to make it repeatable)", TimeLimitWarning,
                          stacklevel=2)

    def deadline() -> float:  # a rewriting pass stops after its last round within this
        return time.perf_counter() + limits.time_limit

    def saturate(x: Expr, rules: list[str] | None = None) -> tuple[Expr, dict[str, object]]:
        r = optimize(x, here["ctx"], iter_limit=limits.iter_limit,
                     node_limit=limits.node_limit, time_limit=limits.time_limit,
                     unique=unique, rules=rules)
        return r.program, {
            "rules fired": dict(r.report.fired), "e-graph nodes": r.report.nodes,
            "e-classes": r.report.classes, "iterations": r.report.iterations,
            "stop": r.report.stop_reason, "cost before": r.cost_before,
            "cost after": r.cost_after}

    stage("saturation (pre-differentiation)", saturate)
    if wrt is not None:
        stage("ANF", lambda x: (typecheck(anf(x), ctx)[0], {}))
        stage(f"AD (gradient w.r.t. {wrt})",
              lambda x: (typecheck(gradient(x, wrt, ctx), ctx)[0], {}))
        stage("sparsity propagation",
              lambda x: _pass(sparsity_propagation(x, ctx, deadline())))
        stage("iterated-key lookups", lambda x: _pass(iterated_key_lookup(x, ctx)))
        stage("sparsity propagation (again)",
              lambda x: _pass(sparsity_propagation(x, ctx, deadline())))
        stage("saturation (post-differentiation)", saturate)
    stored = {x: f for x, f in (formats or {}).items() if not f.identity}
    if stored.keys() & free_vars(stages[-1].program):

        def storage(x: Expr) -> tuple[Expr, dict[str, object]]:
            spanning = {a for a in spans if a in stored and stored[a].positional[:1] == (True,)}
            c = compose(x, here["ctx"], stored, positional_rows(x, here["ctx"], spanning))
            here["ctx"] = c.ctx
            unique.update(c.unique)  # the formats' promises, for the saturation after
            return typecheck(c.program, c.ctx)[0], {
                "formats": {x: stored[x].name for x in c.flat}, "flat arrays": c.flat}

        stage("storage composition", storage)
        stage("saturation (storage)", lambda x: saturate(x, AFTER_COMPOSITION))
    if normalize:
        stage("multiplication normalization",
              lambda x: _pass(normalize_multiplication(x, here["ctx"], deadline())))
    if unique:  # (the formats' promises: after composition)
        stage("row views", lambda x: _pass(row_views(x, here["ctx"], unique)))
    return stages


def describe(stages: list[Stage]) -> str:
    """The stages and their reports, for people (``--stages`` and ``:opt``)."""
    from sdqlite.syntax.printer import show

    lines = []
    for s in stages:
        lines.append(f"== {s.name} ({s.seconds:.3f} s)")
        for key, value in s.report.items():
            lines.append(f"   {key}: {value}")
        lines.append("   " + show(s.program).replace("\n", "\n   "))
    return "\n".join(lines)


def as_source(e: Expr, ctx: Ctx) -> str:
    """A valid source file: the inputs' declarations, then the program."""
    from sdqlite.syntax.printer import show

    decls = [f"{x} : {ctx[x]}" for x in sorted(free_vars(e)) if x in ctx]
    return "\n".join([*decls, show(e)]) + "\n"


def _pass(result: PassResult) -> tuple[Expr, dict[str, object]]:
    stop = {} if result.stop == "done" else {"stop": result.stop}
    return result.program, {"rules fired": dict(result.fired), **stop}

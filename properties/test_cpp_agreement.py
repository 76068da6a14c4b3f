"""The C++ backend agrees with the oracle (the fourth property: §6 code generation).

For generated well-typed programs Γ ⊢ e : T of Physical SDQLite — every construct,
gradients included, at generic points and at the others (entries that cancel to exactly
zero, zeros written into singletons and arrays, keys looked up that no dictionary has,
of dictionaries iterated afterwards: ``generators.NONGENERIC``) — inputs ρ ∈ ⟦Γ⟧, and a
storage format for each input among those its type admits (``sdqlite.storage.formats``:
dict, dense, COO, CSR, CSC, column-major, ...), inputs named like generated C++ and, in
half the cases, one input named like another's flat array in its format
(``generators.flat_named``: ``V1_pos`` beside V1 in CSR), binders that shadow inputs, and
views of views:

1. the program composed with the formats and compiled (lowered with and without
   destination-passing style, emitted, built, run on the buffers of ρ laid out in the
   formats) computes the interpreter's ⟦e⟧(ρ), in its canonical form (no dictionary
   stores a zero: the kernel prunes what cancelled), which the properties of
   ``test_fad_correct.py`` check against the sympy oracle — or, where the interpreter
   reports an evaluation error, so does the compiled code;
2. for Logical programs differentiated w.r.t. a real input and run through the whole
   pipeline of Fig. fig:arch with the formats (saturation, storage composition,
   normalization), the compiled result is the interpreter's value of the pipeline's
   program on the flat arrays (``test_pipeline.py`` shows that program keeps the
   gradient);
3. for programs over inputs with declared sizes, on data obeying them, compiled with a
   dense destination where the result's outer layer has a named size
   (``test_sizes.py``), the result read back as ``codegen/api.py`` reads it is ⟦e⟧(ρ);
4. and, for those programs, read back as ``sdqlite.compile``'s default output reads it
   (a numpy array where every layer is dense and rectangular from 0, a numpy vector or
   scipy CSR matrix of reals where the sizes are known and hold every key, else the
   value), it holds the entries of ⟦e⟧(ρ); a CSR matrix that says its column indices
   are sorted has them sorted, as scipy's own routines assume;
5. the lowering's own shapes (singletons entered by reference, conditionals around
   loops, domains a let names or marks unique, a range or an array in a singleton),
   with and without DPS, agree too.
6. a dense destination holds every layer of a matrix result exactly where the lowered
   program fills the inner one (``results.filled``): with DPS, each write's inner key
   iterates a dense array in a loop inside the one that fixes the key above it (a key,
   a value or a let of that loop); not a diagonal, nor a loop outside the outer key's;
   without DPS a row is added whole, never filled.
7. a loop at the top of a kernel that adds into one destination (``emit.parallel_loops``)
   run in chunks on three threads, each into its own zero added in in chunk order, gives
   the same value (to rounding), and the same first failure, as run on one.
8. reads at loop positions that the formats' stated lengths bound are made without a
   check (``emit.Extents``, as ``codegen/api.py`` emits them) and still agree; the
   sanitizer run builds them checked (``-DSDQL_CHECKED``), where a read outside fails.
9. an accumulator at the top of a kernel whose keys a declared size bounds, read only by
   loops and lookups, kept in an array of that size (``emit.workspaces``, a dense
   workspace, as ``codegen/api.py`` chooses them: the formats' index arrays bound their
   entries), gives the same value, on one thread and on three.

Reals compare to 1e-9 (the C++ sums a hash map's entries in another order); dense
arrays stored inside dictionaries compare pointwise
(``semantics.values.inner_extents_forgotten``).

Programs are compiled ``BATCH`` to a translation unit, at ``QUICK_FLAGS`` (-Og) unless
``SDQLITE_CXXFLAGS`` says otherwise (the sanitizer run sets it), so the ``ci`` profile's
300 examples are 300 programs in 300 / BATCH compilations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import event, given, settings
from hypothesis import strategies as st

from codegen import data as D
from codegen import results as R
from codegen.api import flat_lengths
from codegen.build import build
from codegen.dps import lower
from codegen.emit import Kernel, emit_kernel, translation_unit
from codegen.native import Native
from properties.generators import (
    LOGICAL,
    LOGICAL_NONGENERIC,
    NONGENERIC,
    PHYSICAL,
    SHAPE_CTX,
    SIZED_CTX,
    Generated,
    coo,
    environments,
    flat_named,
    flat_values,
    nongeneric,
    programs,
    sized_environments,
    sized_programs,
)
from properties.test_compiled_api import same_entries
from properties.test_dps import CONDITIONAL, ENTERED
from properties.test_sizes import sized_tensors
from sdqlite.ad.gradient import checked
from sdqlite.check.sizes import NO_KEYS, Size, accumulator_sizes, index_bounds, result_sizes
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import EvalError
from sdqlite.opt.pipeline import Limits, pipeline
from sdqlite.storage.compose import compose
from sdqlite.storage.formats import Format, formats_for, layout, resolve
from sdqlite.syntax.ast import Expr
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.types import REAL, DictT, Type, is_discrete
from semantics.extents import check_extents, facts, size_bounds
from semantics.interp import evaluate
from semantics.values import DenseArray, Value, inner_extents_forgotten, stored_zero, values_equal

BATCH = 20
EXAMPLES = max(2, settings().max_examples // BATCH)


pytestmark = pytest.mark.usefixtures("quick_builds")  # properties/conftest.py


@dataclass
class Case:
    program: Generated
    env: dict[str, Value]
    formats: dict[str, str]
    dps: bool
    wrt: str | None  # differentiate and run the pipeline
    sized: bool = False  # declared sizes: a dense destination where the size is named


LIMITS = Limits(iter_limit=3, node_limit=2000, time_limit=20.0)

#: results whose every layer a dense destination holds (``results.filled``: the key of
#: the inner layer iterates a dense array inside the loop that fixes the outer one), and
#: one that only looks so (the inner key is the outer one's: a diagonal)
FILLED_TEXTS = (
    "sum(<i, r> in M) sum(<k, a> in r) {k -> sum(<j, b> in X2(k)) {j -> a * b}}",
    "sum(<i, row> in X2) {i -> sum(<j, b> in row) {j -> b * x(j)}}",
    "sum(<i, row> in X2) {i -> {i -> 2.0}}")
FILLED = [(typecheck(parse_expr(text), SIZED_CTX)[0], "x") for text in FILLED_TEXTS]

#: 9. an accumulator at the top whose keys a declared size bounds (column sums: M's keys
#: in its format's index array) kept as a workspace (``emit.workspaces``) where a loop or
#: lookups read it; one added into whole (the sum of M's rows) stays a dictionary
WORKSPACE_TEXTS = (
    "sum(<k, v> in sum(<i, r> in M) sum(<j, a> in r) {j -> a}) {k -> v * 2.0}",
    "let c = sum(<i, r> in M) sum(<j, a> in r) {j -> a * a} in sum(<j, b> in x) {j -> c(j) * b}",
    "let c = sum(<i, r> in M) sum(<j, a> in r) {j -> a} in sum(<k, w> in c) w * w",
    "sum(<k, v> in sum(<i, r> in M) r) {k -> v * x(k)}")
WORKSPACES = [(typecheck(parse_expr(text), SIZED_CTX)[0], "x") for text in WORKSPACE_TEXTS]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    wrt: str | None = None
    if draw(st.integers(0, 4)) == 0:  # over inputs with declared sizes
        e, _ = draw(st.one_of(sized_programs(), st.sampled_from([1, 2]).flatmap(
            lambda o: sized_tensors(o).map(lambda t: (t, "x"))), st.sampled_from(FILLED),
            st.sampled_from(WORKSPACES)))
        env = draw(st.one_of(sized_environments(), sized_environments(nonempty=True)))
        g = Generated(dict(SIZED_CTX), e, typecheck(e, SIZED_CTX)[1])
        formats = {x: draw(st.sampled_from(formats_for(t))) for x, t in SIZED_CTX.items()}
        return Case(g, env, formats, draw(st.booleans()), None, sized=True)
    generic = draw(st.booleans())  # or entries made to cancel, zeros written, keys missed
    if draw(st.integers(0, 3)) == 0:  # a differentiated, optimized program
        g = draw(programs(lang=LOGICAL if generic else LOGICAL_NONGENERIC))
        reals = sorted(x for x, t in g.ctx.items() if not is_discrete(t))
        wrt = draw(st.sampled_from(reals)) if reals else None
    else:
        g = draw(programs(lang=PHYSICAL if generic else NONGENERIC))
    env = draw(environments(g.ctx))
    formats = {x: draw(st.sampled_from(formats_for(t))) for x, t in g.ctx.items()}
    if draw(st.booleans()):  # an input named like another's flat array
        g, env, formats = draw(flat_named(g, env, formats, wrt))
    for what, there in nongeneric(g.expr).items():
        if there:
            event(f"non-generic: {what}")
    return Case(g, env, formats, draw(st.booleans()), wrt)


@dataclass
class Prepared:
    """What a case compiles: the program over the (flat) inputs, and their values."""

    program: Expr
    ctx: Mapping[str, Type]
    env: dict[str, Value]  # the interpreter's values of the kernel's inputs
    want: Expr  # the program whose value the compiled one must have, in ``want_ctx``
    want_env: dict[str, Value]
    sizes: list[Size] = field(default_factory=list)  # of the result, with a dense destination
    bounds: dict[str, int] = field(default_factory=dict)
    params: frozenset[str] = frozenset()  # the storage formats' flat arrays
    lengths: dict[str, str] = field(default_factory=dict)  # theirs, as the formats state
    keys: dict[str, Size] = field(default_factory=dict)  # index arrays: their entries' bound

    @property
    def dense(self) -> bool:
        return bool(self.sizes) and self.sizes[0] not in (None, NO_KEYS)


def prepare(c: Case) -> Prepared:
    ctx = c.program.ctx
    for x, f in sorted(c.formats.items()):
        event(f"format {f}" + (" (identity)" if resolve(f, ctx[x]).identity else ""))
    event("differentiated and optimized" if c.wrt else "composed only")
    elab, _ = checked(c.program.expr, ctx)
    formats = {x: resolve(f, ctx[x]) for x, f in c.formats.items()}
    if c.wrt is not None:
        stages = pipeline(elab, ctx, c.wrt, LIMITS, formats)
        program, pctx = stages[-1].program, stages[-1].ctx or ctx
        report = next((s.report for s in stages if s.name == "storage composition"), {})
        flat: dict[str, dict[str, str]] = report.get("flat arrays", {})  # type: ignore[assignment]
    else:
        composed = compose(elab, ctx, formats)
        program, pctx, flat = typecheck(composed.program, composed.ctx)[0], composed.ctx, \
            composed.flat
    env = {x: v for x, v in c.env.items() if x not in flat}
    lengths = flat_lengths(flat, formats)  # (the kernels read what they bound unchecked)
    for x, params in flat.items():
        arrays = flat_values(_layout(formats[x], c.env[x], ctx[x]), formats[x])
        env |= {params[p]: arrays[p] for p in params}
    if c.wrt is not None:
        return Prepared(program, pctx, env, program, env, params=_params(flat), lengths=lengths)
    if c.sized:
        fixed = check_extents({x: (t, c.env[x], None) for x, t in ctx.items()})
        bounds = size_bounds((f for x, t in ctx.items() for f in facts(t, c.env[x], x)),
                             fixed)
        sizes = result_sizes(elab, ctx)
        t = typecheck(elab, ctx)[1]
        dense = bool(sizes) and sizes[0] not in (None, NO_KEYS) and isinstance(t, DictT) \
            and not t.dense
        event("a dense destination" if dense else "sized, no dense destination")
        keys = index_bounds(flat, {x: formats[x].keys for x in flat}, ctx)  # as codegen/api.py
        return Prepared(program, pctx, env, elab, c.env, sizes, bounds, _params(flat), lengths,
                        keys)
    return Prepared(program, pctx, env, elab, c.env, params=_params(flat), lengths=lengths)


def _params(flat: Mapping[str, Mapping[str, str]]) -> frozenset[str]:
    return frozenset(name for names in flat.values() for name in names.values())


def _layout(fmt: Format, v: Value, t: Type) -> dict[str, object]:
    return layout(fmt, coo(v, t), (None,) * len(fmt.positional))


def flat_element(x: Value, t: Type, narrow: bool) -> str | None:
    """How a kernel reads an input: a flat array of one dense layer starting at 0 in
    place (a format's index array as 32-bit ints where ``narrow`` and its entries fit, as
    scipy's are), else None: encoded."""
    if not (isinstance(t, DictT) and t.dense and not isinstance(t.val, DictT)
            and isinstance(x, DenseArray) and x.start == 0):
        return None
    if t.val == REAL:
        return "double"
    fits = all(-(2**31) <= int(v) < 2**31 for v in x.items)
    return "std::int32_t" if narrow and fits else "sdql::i64"


NUMPY = {"double": np.float64, "sdql::i64": np.int64, "std::int32_t": np.int32}


def buffers(x: Value, t: Type, element: str | None) -> D.Buffers:
    """An input's buffers: a flat array in place, or a value, encoded."""
    if element is not None:
        return [np.asarray(list(x.items), dtype=NUMPY[element])]
    return D.encode(x, t)
def agree(got: Value, want: Value) -> bool:
    return values_equal(inner_extents_forgotten(got), inner_extents_forgotten(want),
                        rel_tol=1e-9, abs_tol=1e-12)


#: the threads a kernel's loops at the top may use: one, and chunks of one to a few
#: positions each (the property's data are small)
THREADS = (1, 3)


def parallel_loops_of(k: Kernel) -> list[str]:
    """The C++ loops of a kernel that run in chunks."""
    return [line for line in k.source.splitlines() if "sdql::parallel(" in line]


def check_batch(batch: list[Case]) -> None:
    prepared = [prepare(c) for c in batch]
    kernels: list[Kernel] = []
    for i, (c, p) in enumerate(zip(batch, prepared, strict=True)):
        _, t = typecheck(p.program, p.ctx)
        low = lower(p.program, p.ctx, t, dps=c.dps,  # (sizes: where the inputs declare them)
                    sizes=accumulator_sizes(p.program, p.ctx, p.keys) if p.bounds else None)
        dest = R.choose(t, p.sizes, "dense", low) if p.dense else "value"  # as codegen/api.py
        event(f"destination {dest}")
        work = R.workspaces(low, p.bounds)
        if work:
            event("an accumulator kept as a workspace")
        flat = {x: e for x, tx in low.inputs
                if (e := flat_element(p.env[x], tx, i % 2 == 1 and x in p.params)) is not None}
        kernels.append(emit_kernel(f"k{i}", low, dest=dest, flat=flat, lengths=p.lengths,
                                   work=work))
        if "sdql::at(" in kernels[-1].source:
            event("a read a format's length bounds, unchecked")
    built = build(translation_unit(kernels))
    for p, k in zip(prepared, kernels, strict=True):
        native = Native(built, k)

        def run(inputs: list[D.Buffers], dest: object, threads: int = 1, k: Kernel = k,
                p: Prepared = p, native: Native = native) -> D.Buffers:
            return native(inputs, dest, threads, work=[p.bounds[s] for s in k.work])

        inputs = [buffers(p.env[x], tx, k.flat.get(x)) for x, tx in k.inputs]
        t = typecheck(p.program, p.ctx)[1]
        try:
            want = evaluate(p.want, p.want_env)
        except EvalError as err:
            for threads in THREADS:
                with pytest.raises(EvalError) as got_err:
                    run(inputs, R.allocate(k.dest, t, p.sizes, p.bounds), threads)
                assert got_err.value.message == err.message or "overflow" in err.message
            continue
        if any(parallel_loops_of(k)):
            event("a loop on several threads")
        for threads in THREADS[1:]:  # its chunks added in order: the value, rounded otherwise
            out = run(inputs, R.allocate(k.dest, t, p.sizes, p.bounds), threads)
            got = R.convert(out, k.result, t, p.sizes, p.bounds, "value")
            assert agree(got, want), (Path(built.source), k.name, threads, got, want)
            assert stored_zero(got) is None, (Path(built.source), k.name, threads, got)
        out = run(inputs, R.allocate(k.dest, t, p.sizes, p.bounds))
        got = R.convert(out, k.result, t, p.sizes, p.bounds, "value")
        assert agree(got, want), (Path(built.source), k.name, got, want)
        assert stored_zero(got) is None, (Path(built.source), k.name, got)  # pruned
        if p.sizes:  # the sizes that compile computes: numpy, scipy or a value
            auto = R.convert(out, k.result, t, p.sizes, p.bounds, "auto",
                             checked=k.dest == "rows")
            assert (same_entries(auto, want) if isinstance(auto, np.ndarray)
                    or sp.issparse(auto) else agree(auto, want)), (k.name, auto, want)
            if isinstance(auto, sp.csr_array) and auto.has_sorted_indices:
                assert all(np.all(np.diff(auto.indices[lo:hi]) > 0) for lo, hi in zip(
                    auto.indptr[:-1], auto.indptr[1:], strict=True)), (k.name, auto)


@settings(max_examples=EXAMPLES)
@given(st.lists(cases(), min_size=BATCH, max_size=BATCH))
def test_compiled_programs_agree_with_the_interpreter(batch: list[Case]) -> None:
    check_batch(batch)


#: the lowering's own shapes, which random programs seldom have: singletons entered by
#: reference and conditionals around loops (``test_dps``'s), domains a let names (a
#: range, a sub-array, an array: their C++ types are the lowering's) or marks unique,
#: and a range or an array as a singleton's value (its C++ type is the emitter's)
NAMED = [Generated(SHAPE_CTX, e, typecheck(e, SHAPE_CTX)[1]) for e in map(parse_expr, (
    "let r = (0:3) in sum(<k, x> in r) {x -> s}",
    "let r = a(1:3) in sum(<k, x> in r) {k -> x * s}",
    "let r = [s, 2.0] in sum(<k, x> in r) {k -> x}",
    "sum(<k, x> in unique((1:3))) {k -> s}",
    "let r = (1:3) in r",
    "{0 -> (0:2)}",
    "{0 -> [s, 2.0]}"))]
SHAPES = [*ENTERED, *CONDITIONAL, *NAMED]


@settings(max_examples=min(3, settings().max_examples))
@given(st.tuples(*(environments(g.ctx) for g in SHAPES)))
def test_the_lowerings_own_shapes_compile_and_agree(envs: tuple[dict[str, Value], ...]
                                                    ) -> None:
    """Each shape, with and without DPS, its inputs as they are (one build)."""
    check_batch([Case(g, env, {x: "dict" for x in g.ctx}, dps, None)
                 for g, env in zip(SHAPES, envs, strict=True) for dps in (True, False)])


#: matrix results (SIZED_CTX) -> does the lowered program (DPS) fill the inner layer: the
#: inner key's loop (over a dense array) inside the loop fixing the outer key — its key
#: (k, i), or a let in it (p) — or, for the diagonal {i -> {i -> ..}}, the inner key
#: fixed with the outer; and j's loop over x outside i's, the rows' loop over M
FILLS = {
    FILLED_TEXTS[0]: True, FILLED_TEXTS[1]: True, FILLED_TEXTS[2]: False,
    "sum(<i, row> in X2) let p = i + 1 in {p -> sum(<j, b> in row) {j -> b}}": True,
    "sum(<j, b> in x) sum(<i, r> in M) {i -> {j -> b}}": False,
    # the writes under a conditional count as the others do
    "sum(<i, row> in X2) if i = 0 then {i -> sum(<j, b> in row) {j -> b}}": True,
    "sum(<i, row> in X2) if i = 0 then {i -> {i -> 2.0}}": False}


def test_a_dense_destination_is_filled_where_the_inner_key_iterates_inside() -> None:
    for text, fills in FILLS.items():
        e, t = typecheck(parse_expr(text), SIZED_CTX)
        assert R.filled(lower(e, SIZED_CTX, t, dps=True), 2) == fills, text
        assert not R.filled(lower(e, SIZED_CTX, t, dps=False), 2), text  # rows added whole

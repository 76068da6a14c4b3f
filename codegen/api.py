"""Compile once, call many times, in the style of ``jax.jit``: ``sdqlite.compile``.

    f = sdqlite.compile(source, wrt="x", formats={"A": "csr"})
    grad = f(A=scipy_matrix, x=numpy_vector, beta=0.9)

The program is parsed and checked once.  A call reads each input's data — a numpy
array, a ``scipy.sparse`` matrix, or an SDQLite value (nested ``dict``/``DenseArray``,
a number) — and its storage format: the one given to ``compile``, else the one declared
(``A : ... @ csr``), else the data's default (``scipy.sparse`` → ``csr``, numpy → ``dense``,
a value → ``dict``).  Each combination of formats is compiled once (the pipeline of
Fig. fig:arch with storage composition, DPS, C++), then reused.  Data move into the
compiled code without per-entry Python work (``codegen/data.py``), and declared sizes
are checked against them first (the optimizer relied on them).

Each call checks its data once (``codegen/inputs.py``: a scipy input's arrays in compiled
code before anything else reads them), then hands the kernel flat arrays in place, and
its destination where the result's size is known (``codegen/results.py``: a real vector
is written straight into a numpy array).  The result comes back as a Python number for a
scalar; for ``output="auto"``, as a numpy array for a real vector or a dense array, a
``scipy.sparse.csr_array`` for a real matrix (``{int -> {int -> real}}``) — when the data
fix the size of each layer (``sdqlite.check.sizes``) — and otherwise as an SDQLite value,
as ``output="value"`` always.

``threads=N`` lets a call use N threads: the check of large scipy inputs, and the loops
at the top of the kernel that add into one destination (``codegen/emit.py``,
``parallel_loops``), cut into N chunks of positions.  The result depends on N (sums
grouped otherwise round otherwise), never on scheduling; ``threads=1``, the default,
gives the same result on every machine.
"""

from __future__ import annotations

import inspect
import keyword
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args, overload

import numpy as np

from codegen import data as D
from codegen import fast as F
from codegen import inputs as I
from codegen import plans
from codegen import results as R
from codegen.build import build, cached
from codegen.dps import Lowered, lower
from codegen.emit import FLAT_TYPES, Kernel, Rows, emit_kernel, translation_unit
from codegen.emit import Destination as Dest
from codegen.inputs import Arg
from codegen.native import Native, Unchecked
from codegen.results import Destination, Output
from sdqlite.ad.gradient import expand, gradient
from sdqlite.check.sizes import (
    NO_KEYS,
    Size,
    accumulator_sizes,
    declared,
    index_bounds,
    result_sizes,
)
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import DataError, EvalError, SDQLTypeError
from sdqlite.opt.passes import normalize_multiplication
from sdqlite.opt.pipeline import Limits, Stage, pipeline
from sdqlite.storage.compose import compose
from sdqlite.storage.formats import Format, declared_formats, resolve
from sdqlite.syntax.ast import Expr, Var, free_vars, subterms
from sdqlite.syntax.parser import Decl, Program, parse_program
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import INT, REAL, DictT, Type, scalar_of
from semantics.extents import check_layers, size_bounds


@dataclass(frozen=True)
class Lowering:
    """The program for one choice of input types, kinds and formats: the pipeline's
    stages, the lowered statements, the formats' flat arrays (input -> parameter -> flat
    input of the kernel), the result's type and its layers' sizes, and which inputs the
    kernel reads as flat arrays (by default with 64-bit indices)."""

    stages: list[Stage]
    low: Lowered
    flat: dict[str, dict[str, str]]
    formats: dict[str, Format]
    sizes: list[Size]
    type: Type
    elements: dict[str, str]
    #: a flat index array -> the declared size its entries are below, and a dense input
    #: read as it is -> the declared size that is its length (``emit._Emitter.within``)
    sized: tuple[dict[str, str], dict[str, str]]
    #: the CSR inputs the kernel may check as it reads them, with their arrays
    rows: dict[str, Rows] = field(default_factory=dict)

    @property
    def inputs(self) -> tuple[tuple[str, Type], ...]:
        return self.low.inputs


@dataclass
class Specialized:
    """The program compiled for one choice of formats, kinds of data and flat arrays'
    element types (``flat``: 32-bit index arrays get a kernel of their own)."""

    stages: list[Stage]
    kernel: Kernel
    flat: dict[str, dict[str, str]]  # input -> parameter -> flat input of the kernel
    formats: dict[str, Format]
    sizes: list[Size]  # of the result's layers
    result: Type  # the program's (the kernel's may store its layers densely)
    native: Native | None = None
    build_seconds: float = 0.0
    source: str = ""

    @property
    def kernel_types(self) -> dict[str, Type]:
        return dict(self.kernel.inputs)

    @property
    def inputs(self) -> tuple[tuple[str, Type], ...]:
        return self.kernel.inputs

    @property
    def program(self) -> Expr:
        return self.stages[-1].program


@dataclass
class Compiled:
    """A program ready to run compiled; call it with its inputs' data by name."""

    program: Program  # the fields are compile's arguments (it gives every one)
    wrt: str | None
    formats: dict[str, str]
    optimize: bool
    normalize: bool
    dps: bool
    limits: Limits
    output: Output
    name: str  # of the generated function (a C++ identifier is made of it)
    destination: Destination
    threads: int = 1  # a loop at the top of the kernel, and the check of the data, may use
    cache: dict[tuple[object, ...], Specialized] = field(default_factory=dict)
    lowered: dict[tuple[object, ...], Lowering] = field(default_factory=dict)
    resolved: dict[tuple[str, str, Type], Format] = field(default_factory=dict)  # formats_of
    plans: dict[tuple[object, ...], tuple[dict[str, Format], Lowering, Dest]] = field(
        default_factory=dict)  # plan's: by the inputs' types, kinds and formats
    sized: dict[tuple[object, ...], dict[str, int]] = field(
        default_factory=dict)  # check_sizes': by the inputs' types, kinds and shapes
    doors: dict[tuple[object, ...], Door] = field(default_factory=dict)  # by signature
    fast: tuple[F.Plan, ...] = ()  # the doors' plans for sdqlite_call.cpp (codegen/fast.py)
    fast_call: Any = None
    decls: dict[str, Decl] = field(init=False)
    needed: frozenset[str] = field(init=False)  # the inputs a call needs
    order: list[str] = field(init=False)

    def __post_init__(self) -> None:
        if self.program.expr is None:
            raise SDQLTypeError("the program has no expression to compile")
        declared_ = {d.name for d in self.program.decls}
        unknown = set(self.formats) - declared_ - free_vars(self.program.expr)
        if unknown:
            raise DataError(f"a format for {', '.join(sorted(unknown))}, which is not an "
                            "input of the program")
        decls = {d.name: d for d in self.program.decls}
        for x, f in self.formats.items():  # a format that cannot store the input: now
            if x in decls:
                resolve(f, decls[x].type, None, f"input {x}: ")
        self.decls = {d.name: d for d in self.program.decls}
        self.needed = free_vars(self.program.expr) | ({self.wrt} if self.wrt else set())
        self.order = sorted(self.needed)
        self.__doc__, self.__signature__ = _described(self)
        undeclared = free_vars(self.program.expr) - declared_
        if declared_ and undeclared:  # a typo, most likely: say so now, where it is
            x = min(undeclared)
            at = next((v.span for v in subterms(self.program.expr)
                       if isinstance(v, Var) and v.name == x), None)
            raise SDQLTypeError(f"{x} is not declared (the program declares "
                                f"{', '.join(sorted(declared_))}): a typo, or declare it: "
                                f"{x} : TYPE", at)
        if not undeclared:  # check now: errors at compile time
            ctx = {d.name: d.type for d in self.program.decls}
            elab = expand(typecheck(self.program.expr, ctx)[0], ctx)
            if self.wrt is not None:
                typecheck(gradient(elab, self.wrt, ctx), ctx)

    def __repr__(self) -> str:
        what = f"the gradient w.r.t. {self.wrt}" if self.wrt else "the value"
        return f"<sdqlite.compile: {self.name}{self.__signature__}, {what}>"

    # ---- calling ------------------------------------------------------------------------

    def __call__(self, *args: Any, **inputs: Any) -> Any:
        """The result for these inputs: by name, or by position in declaration order.
        Data of a signature seen before (``I.signature``) go through its ``Door``."""
        given = bind(self.program, args, inputs) if args else inputs
        if self.fast:  # (codegen/fast.py: a plan the data fit, else the door below)
            got = self.fast_call(self.fast, given)
            if got is not NotImplemented:
                return got
        key = None
        if len(given) == len(self.order) and all(x in given for x in self.order):
            sigs = tuple(I.signature(given[x]) for x in self.order)
            key = None if None in sigs else sigs
        door = self.doors.get(key) if key is not None else None
        if door is not None:
            return door.call(self, given)
        parsed = self.read(given)
        bounds = self.check_sizes(parsed)
        bufs, spec = self.plan(parsed, bounds)
        result = self.run(self.build(spec), bufs, bounds)
        if key is not None:
            lowering = self.lowering(parsed, spec.formats)
            door = Door(tuple((x, a.type, a.kind, self.decls[x].type if x in self.decls
                               else None) for x, a in parsed.items()),
                        bounds, lowering, spec, _flat_elements(lowering, bufs))
            self.doors[key] = door
            plan = F.plan(door, given, self.output, self.threads, PARALLEL_FROM) \
                if len(self.fast) < F.PLANS and type(given) is dict else None
            if plan is not None:
                self.fast_call, self.fast = F.caller(), (*self.fast, plan)
        return result

    def invoke(self, args: Mapping[str, Arg]) -> tuple[Specialized, Any]:
        """Check the sizes, lay the data out, run the kernel built for them: the
        specialization that ran, and the result."""
        bounds = self.check_sizes(args)
        inputs, spec = self.plan(args, bounds)
        return spec, self.run(self.build(spec), inputs, bounds)

    def read(self, inputs: Mapping[str, Any]) -> dict[str, Arg]:
        """Each input's data, typed: by its declaration (the data must fit it) or by it."""
        decls, needed = self.decls, self.needed
        missing = sorted(needed - set(inputs))
        if missing:
            raise DataError(f"no data for input {', '.join(missing)}")
        extra = sorted(set(inputs) - needed - set(decls))
        if extra:
            raise DataError(f"{', '.join(extra)}: not an input of the program")
        return {x: I.read(x, inputs[x], decls[x].type if x in decls else None,
                          threads=self.threads)
                for x in self.order}

    def check_sizes(self, args: Mapping[str, Arg]) -> dict[str, int]:
        """Declared sizes checked against the data; every size name's bound.  Numpy and
        scipy data are checked once per types, kinds and shapes: their shapes fix every
        size of theirs, and their keys lie below their shapes (``check_sparse``), so
        nothing else in them can break a size."""
        key = None
        if all(a.kind != "value" or not isinstance(a.type, DictT) for a in args.values()):
            key = tuple((x, a.type, I.extents(a.type), a.kind,  # (a type's equality ignores
                         None if a.kind == "value" else a.data.shape)  # its extents)
                        for x, a in args.items())
            known = self.sized.get(key)
            if known is not None:
                return known
        decls = self.decls
        layer_facts = {x: (I.layer_facts(a), decls[x].span if x in decls else None)
                       for x, a in args.items()}
        fixed = check_layers(layer_facts)
        bounds = size_bounds((f for fs, _ in layer_facts.values() for f in fs), fixed)
        if key is not None:
            self.sized[key] = bounds
        return bounds

    def plan(self, args: Mapping[str, Arg], bounds: Mapping[str, int]
             ) -> tuple[list[D.Buffers], Specialized]:
        """The kernel's input buffers for these data (laid out in their formats), and the
        specialization that reads them (32-bit indices as they are), not built."""
        key = tuple((x, a.type, I.extents(a.type), a.kind, self.format_name(x, a))
                    for x, a in args.items())  # (a type's equality ignores its extents)
        if key not in self.plans:  # what the inputs' types, kinds and formats decide
            formats = self.formats_of(args)
            lowering = self.lowering(args, formats)
            self.plans[key] = formats, lowering, R.choose(lowering.type, lowering.sizes,
                                                          self.destination, lowering.low)
        formats, lowering, dest = self.plans[key]
        inputs = self.buffers(lowering, args)
        elements = _flat_elements(lowering, inputs)
        if not R.affordable(dest, lowering.type, lowering.sizes, bounds):  # huge, few entries
            dest = R.choose(lowering.type, lowering.sizes, self.destination, lowering.low,
                            whole=False)
            if not R.affordable(dest, lowering.type, lowering.sizes, bounds):
                dest = "value"
        return inputs, self.specialized(args, formats=formats, elements=elements,
                                        lowering=lowering, dest=dest,
                                        narrow=R.narrow(dest, lowering.sizes, bounds),
                                        work=R.workspaces(lowering.low, bounds, self.destination))

    def specialize(self, args: Mapping[str, Arg]) -> Specialized:
        """The compiled program for these inputs' types, kinds and formats (specialized and
        built on first use)."""
        return self.build(self.specialized(args))

    def build(self, spec: Specialized) -> Specialized:
        if spec.native is None:
            if not cached(spec.source):
                _say(f"compiling {self.name} with the C++ compiler (once: cached after)")
            start = time.perf_counter()
            built = build(spec.source)
            spec.native, spec.build_seconds = Native(built, spec.kernel), \
                time.perf_counter() - start
        return spec

    def format_name(self, x: str, a: Arg) -> str:
        """The format an input is stored in: given to compile, declared, or its data's."""
        decls = self.decls
        return self.formats.get(x) or (decls[x].format if x in decls else None) or \
            I.default_format(a)

    def formats_of(self, args: Mapping[str, Arg]) -> dict[str, Format]:
        formats = {}
        for x, a in args.items():
            name = self.format_name(x, a)
            key = (x, name, a.type)
            if key not in self.resolved:  # (an error is raised again on every call)
                self.resolved[key] = resolve(name, a.type, None, f"input {x}: ")
            formats[x] = self.resolved[key]
        return formats

    def lowering(self, args: Mapping[str, Arg], formats: dict[str, Format]) -> Lowering:
        """The program optimized and lowered for these inputs' types, kinds and formats."""
        key = tuple((x, a.type, I.extents(a.type), a.kind, formats[x].name)
                    for x, a in sorted(args.items()))
        if key not in self.lowered:
            self.lowered[key] = self._lower({x: a.type for x, a in args.items()}, formats,
                                            {x: a.kind for x, a in args.items()})
        return self.lowered[key]

    def specialized(self, args: Mapping[str, Arg], *, formats: dict[str, Format] | None = None,
                    elements: dict[str, str] | None = None, lowering: Lowering | None = None,
                    dest: Dest | None = None, narrow: bool = False,
                    work: Mapping[str, str] | None = None) -> Specialized:
        """The specialized program for these inputs, not built (flat arrays of 64-bit
        indices unless ``elements`` says otherwise; the destination ``codegen/results.py``
        chooses unless ``dest`` does; accumulators in ``work`` kept as workspaces)."""
        formats = formats or self.formats_of(args)
        lowering = lowering or self.lowering(args, formats)
        elements = elements or lowering.elements
        dest = dest or R.choose(lowering.type, lowering.sizes, self.destination, lowering.low)
        work = dict(work or {})
        key = (id(lowering), tuple(sorted(elements.items())), dest, narrow, tuple(work.items()))
        if key not in self.cache:
            kernel = emit_kernel(_identifier(self.name), lowering.low,
                                 show(lowering.stages[-1].program), dest=dest, flat=elements,
                                 lengths=flat_lengths(lowering.flat, formats), narrow=narrow,
                                 work=work, sized=lowering.sized, rows=lowering.rows)
            self.cache[key] = Specialized(lowering.stages, kernel, lowering.flat, formats,
                                          lowering.sizes, lowering.type,
                                          source=translation_unit([kernel]))
        return self.cache[key]

    def _lower(self, ctx: dict[str, Type], formats: dict[str, Format], kinds: dict[str, I.Kind]
               ) -> Lowering:
        assert self.program.expr is not None
        elab = expand(typecheck(self.program.expr, ctx)[0], ctx)
        name = plans.key({
            "program": "\n".join([*map(str, self.program.decls), show(self.program.expr)]),
            "spans": plans.spans(self.program.expr),  # (where errors point)
            "wrt": self.wrt, "optimize": self.optimize, "normalize": self.normalize,
            "limits": self.limits, "inputs": sorted((x, str(t), kinds[x], formats[x].name)
                                                    for x, t in ctx.items())})
        stages = plans.load(name)
        if stages is None:
            _say(f"optimizing {self.name} for these inputs (once: cached after)")
            if self.optimize:
                stages = pipeline(elab, ctx, self.wrt, self.limits, formats,
                                  normalize=self.normalize,
                                  spans={x for x, k in kinds.items() if k in I.SPANS})
            else:
                stages = self._unoptimized(elab, ctx, formats)
            plans.store(name, stages, ctx)
        final, final_ctx = stages[-1].program, stages[-1].ctx or ctx
        composed = next((s.report for s in stages if s.name == "storage composition"), {})
        flat: dict[str, dict[str, str]] = composed.get("flat arrays", {})  # type: ignore[assignment]
        t = typecheck(final, final_ctx)[1]
        sized = {x: I.with_shape_sizes(x, t0) if kinds[x] != "value" else t0
                 for x, t0 in ctx.items()}
        sizes = result_sizes(elab, sized)
        if self.wrt is not None:
            sizes += declared(sized[self.wrt])
        keys = index_bounds(flat, {x: formats[x].keys for x in flat}, sized)
        low = lower(final, final_ctx, t, dps=self.dps, sizes=accumulator_sizes(
            final, {x: sized.get(x, t0) for x, t0 in final_ctx.items()}, keys))
        elements = _elements(low, flat, kinds)
        lengths = {x: n for x in elements if kinds.get(x) == "numpy"
                   for n in declared(sized[x])[:1] if n not in (None, NO_KEYS)}
        entries = {a: n for a, n in keys.items() if n not in (None, NO_KEYS)}
        return Lowering(stages, low, flat, formats, sizes, t, elements, (entries, lengths),
                        _rows(low, flat, formats, kinds, sized))

    def _unoptimized(self, elab: Expr, ctx: dict[str, Type], formats: dict[str, Format]
                     ) -> list[Stage]:
        """The interpreter's program (the gradient expanded), composed with the formats
        and normalized if asked: no saturation, no sparsity propagation."""
        e = typecheck(gradient(elab, self.wrt, ctx), ctx)[0] if self.wrt else elab
        stages = [Stage("input", e, 0.0, ctx=dict(ctx))]
        c = compose(e, ctx, formats)  # (an input in an identity format is left as it is)
        stages.append(Stage("storage composition", typecheck(c.program, c.ctx)[0], 0.0,
                            {"flat arrays": c.flat}, c.ctx))
        if self.normalize:
            n = normalize_multiplication(stages[-1].program, c.ctx)
            stages.append(Stage("multiplication normalization", n.program, 0.0, ctx=c.ctx))
        return stages

    def run(self, spec: Specialized, inputs: list[D.Buffers], bounds: Mapping[str, int],
            checks: Sequence[int] | None = None) -> Any:
        """Run the built kernel on its input buffers (``checks``: ``Native``'s); convert
        the result (to ``self.output``)."""
        assert spec.native is not None
        work = sum(b.size for bufs in inputs for b in bufs)
        out = spec.native(inputs, R.allocate(spec.kernel.dest, spec.result, spec.sizes, bounds),
                          threads=self.threads if work >= PARALLEL_FROM else 1,
                          work=[bounds[n] for n in spec.kernel.work], checks=checks)
        return R.convert(out, spec.kernel.result, spec.result, spec.sizes, bounds,
                         self.output, checked=spec.kernel.dest == "rows")

    def buffers(self, lowering: Lowering | Specialized, args: Mapping[str, Arg]
                ) -> list[D.Buffers]:
        """The kernel's input buffers: flat arrays in place, other values encoded."""
        flat: dict[str, D.Buffers] = {}
        types = dict(lowering.inputs)
        for x, params in lowering.flat.items():
            arrays = I.flat_arrays(lowering.formats[x], args[x])
            for p, name in params.items():
                if name in types:  # (an array the kernel does not read: sum(V)'s keys)
                    flat[name] = _flat_buffers(arrays[p], types[name])
        return [flat[x] if x in flat else as_is(args[x], t) for x, t in lowering.inputs]

    # ---- reading ------------------------------------------------------------------------

    def cpp(self, inputs: Mapping[str, Any] | None = None) -> str:
        """The generated C++ for these inputs' formats and kinds; without data, for the
        declared (or given) formats, else ``dict``."""
        if inputs is None:
            return self.specialized(self.declared()).source
        args = self.read(inputs)
        return self.plan(args, self.check_sizes(args))[1].source

    def declared(self) -> dict[str, Arg]:
        """The inputs as declared, with no data (to compile ahead of a call)."""
        assert self.program.expr is not None
        decls = {d.name: d for d in self.program.decls}
        needed = free_vars(self.program.expr) | ({self.wrt} if self.wrt else set())
        missing = sorted(needed - set(decls))
        if missing:
            raise SDQLTypeError(f"declare the input {', '.join(missing)} (NAME : TYPE) to "
                                "compile without data")
        return {x: Arg(x, decls[x].type, "value", None) for x in sorted(needed)}


@dataclass(frozen=True)
class Door:
    """A call plan: what the first call with data of one signature worked out (the
    inputs' types and kinds, the sizes, the formats, the kernel built for them), so that
    a later call with data of that signature does only what its data decide: their
    checks (``I.checked``), their buffers, the run.  Data whose layout turns out to need
    another kernel (a non-canonical matrix made canonical with 64-bit indices) go the
    general way.  A CSR matrix that the kernel can check as it reads it
    (``Kernel.checks``) is only looked at here (``I.trusted``): if the kernel finds
    anything wrong in it (``Unchecked``) or fails at all, the call is made again, the
    matrix checked first, so that what it says is what the checked call says."""

    inputs: tuple[tuple[str, Type, I.Kind, Type | None], ...]  # in the order read; declared
    bounds: dict[str, int]
    lowering: Lowering = field(repr=False)
    spec: Specialized = field(repr=False)  # built
    elements: dict[str, str]  # the flat buffers' element types the kernel was built for

    def call(self, c: Compiled, given: Mapping[str, Any], trust: bool = True) -> Any:
        checks = self.spec.kernel.checks
        trusted = {x: Arg(x, t, kind, s) for x, t, kind, _ in self.inputs
                   if trust and x in checks and kind == "scipy"
                   and (s := I.trusted(given[x])) is not None}
        try:
            args = {x: trusted.get(x) or I.checked(x, given[x], t, kind, declared_type,
                                                   threads=c.threads)
                    for x, t, kind, declared_type in self.inputs}
            bufs = c.buffers(self.lowering, args)
        except DataError:  # (an input after a trusted one: the first wrong one is named)
            if not trusted:
                raise
            return self.call(c, given, trust=False)
        if _flat_elements(self.lowering, bufs) != self.elements:
            return c.invoke(args)[1] if not trusted else self.call(c, given, trust=False)
        if not trusted:
            return c.run(self.spec, bufs, self.bounds)
        try:
            return c.run(self.spec, bufs, self.bounds, checks=[
                trusted[x].data.shape[1] if x in trusted else -1 for x in checks])
        except (Unchecked, EvalError):  # (a bug's error, CodegenError, is not hidden)
            return self.call(c, given, trust=False)


def _rows(low: Lowered, flat: Mapping[str, Mapping[str, str]], formats: Mapping[str, Format],
          kinds: Mapping[str, I.Kind], sized: Mapping[str, Type]) -> dict[str, Rows]:
    """The CSR inputs whose arrays pos, idx and val the kernel reads
    (``emit.rows_checked``), each with the flat lengths that are its row count: its own,
    and those of ``_as_many_rows``."""
    read = {x for x, _ in low.inputs}
    out = {}
    for x, params in flat.items():
        a = [params[p] for p in ("len", "pos", "idx", "val") if p in params]
        if formats[x].name != "csr" or len(a) != 4 or not set(a[1:]) <= read:
            continue
        same = _as_many_rows(x, flat, formats, kinds, sized)
        out[x] = (frozenset({a[0]} | same), a[1], a[2], a[3])
    return out


def _as_many_rows(x: str, flat: Mapping[str, Mapping[str, str]], formats: Mapping[str, Format],
                  kinds: Mapping[str, I.Kind], sized: Mapping[str, Type]) -> set[str]:
    """The lengths of the dense numpy inputs declared as long as the scipy matrix ``x``
    has rows (one size name: the door checks their shapes agree)."""
    n = declared(sized[x])[0]
    if kinds[x] != "scipy" or n in (None, NO_KEYS):
        return set()
    return {p["len"] for y, p in flat.items()
            if y != x and kinds[y] == "numpy" and formats[y].name == "dense" and "len" in p
            and declared(sized[y])[:1] == [n]}


def _flat_elements(lowering: Lowering, bufs: list[D.Buffers]) -> dict[str, str]:
    """The C++ element types of the flat inputs' buffers."""
    return {x: _ELEMENTS[b[0].dtype] for (x, _), b in zip(lowering.inputs, bufs, strict=True)
            if x in lowering.elements}


@overload
def compile(source: str | Program, wrt: str | None = None,
            formats: Mapping[str, str] | None = None, *, optimize: bool = True,
            normalize: bool = True, dps: bool = True, limits: Limits | None = None,
            output: Output = "auto", name: str = "kernel", destination: Destination = "dense",
            threads: int = 1) -> Compiled: ...


@overload
def compile(source: str | Program, wrt: Sequence[str],
            formats: Mapping[str, str] | None = None, *, optimize: bool = True,
            normalize: bool = True, dps: bool = True, limits: Limits | None = None,
            output: Output = "auto", name: str = "kernel", destination: Destination = "dense",
            threads: int = 1) -> Compiled | Gradients: ...


def compile(source: str | Program, wrt: str | Sequence[str] | None = None,
            formats: Mapping[str, str] | None = None, *, optimize: bool = True,
            normalize: bool = True, dps: bool = True, limits: Limits | None = None,
            output: Output = "auto", name: str = "kernel", destination: Destination = "dense",
            threads: int = 1) -> Compiled | Gradients:
    """Compile an SDQLite program (its source text: declarations, then an expression) to
    C++, differentiated w.r.t. ``wrt`` when given (several names: a tuple of gradients);
    call the result with the inputs, by name or in declaration order.

    >>> f = sdqlite.compile("x : {dense_int -> real}\\nsum(<i, a> in x) a * a", wrt="x")
    >>> f(np.array([1.0, 2.0]))
    array([2., 4.])
    """
    if not isinstance(source, str | Program):
        raise DataError(f"the program is {type(source).__name__}: give its source text (str) "
                        "or a parsed program")
    program = parse_program(source) if isinstance(source, str) else source
    declared_formats(program)  # a declared format that does not fit its input is an error here
    if formats is not None and not isinstance(formats, Mapping):
        raise DataError(f"formats is {type(formats).__name__}: give a dict of input names to "
                        "format names, e.g. formats={\"A\": \"csr\"}")
    for option, value in (("output", output), ("destination", destination)):
        allowed = get_args(Output if option == "output" else Destination)
        if value not in allowed:
            raise DataError(f"{option}={value!r}: choose one of "
                            f"{', '.join(map(repr, allowed))}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise DataError(f"threads={threads!r}: give how many threads a call may use, a whole "
                        "number, 1 or more")
    if wrt is None or isinstance(wrt, str):
        return Compiled(program, wrt, dict(formats or {}), optimize, normalize, dps,
                        limits or Limits(), output, name, destination, threads=threads)
    if not (isinstance(wrt, Sequence) and wrt and all(isinstance(x, str) for x in wrt)):
        raise DataError(f"wrt is {wrt!r}: give the name of an input (wrt=\"x\") or a tuple "
                        "of names (wrt=(\"x\", \"b\"))")
    return Gradients([Compiled(program, x, dict(formats or {}), optimize, normalize, dps,
                               limits or Limits(), output, f"{name}_{x}", destination,
                               threads=threads)
                      for x in wrt])


def bind(program: Program, args: Sequence[Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs by name: positional ones named by the program's declarations, in order,
    then the named ones."""
    order = [d.name for d in program.decls]
    if len(args) > len(order):
        named = ", ".join(order) or "none"
        raise DataError(f"{len(args)} inputs given by position, but the program declares "
                        f"{len(order)} ({named}): give the others by name (NAME=data)")
    given = dict(zip(order, args, strict=False))
    for x in inputs:
        if x in given:
            raise DataError(f"input {x} is given twice: by position and by name")
    return given | dict(inputs)


def _described(c: Compiled) -> tuple[str, inspect.Signature]:
    """What ``help(f)`` and ``inspect.signature(f)`` show of a compiled program: its
    inputs (declared ones first, in order, positional or by name), the program, a call."""
    declared_ = [d.name for d in c.program.decls if d.name in c.needed]
    rest = sorted(c.needed - set(declared_))
    P = inspect.Parameter
    if all(x.isidentifier() and not keyword.iskeyword(x) for x in c.needed):
        sig = inspect.Signature([P(x, P.POSITIONAL_OR_KEYWORD) for x in declared_] +
                                [P(x, P.KEYWORD_ONLY) for x in rest])
    else:  # an input named class or x' is given as f(**{"class": ...}) or by position
        sig = inspect.Signature([P("args", P.VAR_POSITIONAL), P("inputs", P.VAR_KEYWORD)])
    assert c.program.expr is not None
    what = f"the gradient w.r.t. {c.wrt} of" if c.wrt else "the value of"
    text = "\n".join([*map(str, c.program.decls), show(c.program.expr)])
    call = ", ".join([*declared_, *(f"{x}={x}" for x in rest)])
    doc = (f"{c.name}{sig}: {what} the SDQLite program\n\n"
           + "\n".join("    " + line for line in text.splitlines())
           + f"\n\ncompiled to C++ (built on the first call for each combination of input "
           f"formats).\nCall it with numpy arrays, scipy.sparse matrices, numbers or SDQLite "
           f"values:\n\n    {c.name}({call})\n\n"
           "c.cpp() shows the generated C++; c.cpp(inputs) for the inputs' formats.")
    return doc, sig


class Gradients:
    """Several compiled gradients of one program, called together: a tuple of results,
    in the order of ``wrt`` (``sdqlite.compile(source, wrt=("x", "b"))``)."""

    def __init__(self, parts: Sequence[Compiled]) -> None:
        self.parts = tuple(parts)
        self.__doc__ = "A tuple of gradients, each:\n\n" + "\n\n".join(
            str(p.__doc__) for p in self.parts)
        self.__signature__ = self.parts[0].__signature__

    def __call__(self, *args: Any, **inputs: Any) -> tuple[Any, ...]:
        return tuple(p(*args, **inputs) for p in self.parts)


def _say(what: str) -> None:
    """A line on stderr about a first call's slow work: where a person watches (a
    terminal), unless SDQLITE_QUIET is set."""
    if sys.stderr.isatty() and not os.environ.get("SDQLITE_QUIET"):
        print(f"sdqlite: {what}", file=sys.stderr, flush=True)


def _identifier(name: str) -> str:
    text = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"
    return text if text[0].isalpha() else f"k_{text}"


def flat_lengths(flat: Mapping[str, Mapping[str, str]], formats: Mapping[str, Format]
                 ) -> dict[str, str]:
    """The formats' lengths of their arrays (``Format.lengths``) in the kernel's flat names:
    ``pos -> len+1`` of input A is ``A_pos -> A_len+1``."""
    out = {}
    for x, params in flat.items():  # (every parameter of x's format: law 12)
        for param, length in formats[x].lengths:
            base = length.removeprefix("@").removesuffix("+1")
            out[params[param]] = length.replace(base, params[base], 1)
    return out


def _elements(low: Lowered, flat: Mapping[str, Mapping[str, str]], kinds: Mapping[str, I.Kind]
              ) -> dict[str, str]:
    """The flat inputs of a kernel and their C++ element types, 64-bit for indices: the
    formats' arrays, and the numpy arrays of one dense layer given as they are."""
    params = {name for names in flat.values() for name in names.values()}
    out = {}
    for x, t in low.inputs:
        one_layer = isinstance(t, DictT) and t.dense and not isinstance(t.val, DictT)
        if one_layer and (x in params or kinds.get(x) == "numpy"):
            out[x] = "double" if scalar_of(t) == REAL else "sdql::i64"
    return out


#: the input entries (buffer elements) from which a kernel's loops run on several threads
#: when asked to (a thread costs ~50 µs to start here; less work is done sooner on one)
PARALLEL_FROM = 1 << 16

#: a flat array's C++ element type by its dtype (dtype objects: ``.name`` is slow per call)
_ELEMENTS = {np.dtype(name): cpp for name, cpp in FLAT_TYPES.items()}


def _flat_buffers(x: Any, t: Type) -> D.Buffers:
    """A flat parameter: an int (a 1-element array), or an index or value array as it
    is (32-bit indices stay so), as one buffer when it is a flat input."""
    if type(x) is int:  # a length
        return [np.array([x], dtype=np.int64)]
    a = np.asarray(x)
    if a.ndim == 0:
        return D.scalar(int(a), INT)
    if scalar_of(t) == REAL:
        return [np.ascontiguousarray(a, dtype=np.float64)]
    return [np.ascontiguousarray(a) if a.dtype in I.INDEX_DTYPES else
            np.ascontiguousarray(a, dtype=np.int64)]


def as_is(a: Arg, t: Type) -> D.Buffers:
    match a.kind:
        case "numpy":
            if all(layer.dense for layer in D.layers(t)):
                if len(D.layers(t)) == 1:
                    return [np.ascontiguousarray(a.data, dtype=D.leaf_dtype(t))]
                return D.from_numpy(a.data, t)
            keys, vals = I.entries(a)
            return D.from_coo(keys, vals, t)
        case "scipy":
            return D.from_coo(*I.entries(a), t)
    return D.encode(a.data, t)

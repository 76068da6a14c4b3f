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

The result comes back as a Python number for a scalar; for ``output="auto"``, as a numpy
array for a real vector or a dense array, a ``scipy.sparse.csr_array`` for a real
matrix (``{int -> {int -> real}}``) — when the data fix the size of each layer
(``sdqlite.check.sizes``) — and otherwise as an SDQLite value, as ``output="value"`` always.
Where the data fix the size n of the result's outer layer, the compiled code accumulates
into an array of n positions rather than a hash map (``destination="dense"``, the
default; ``"dict"`` keeps hash maps throughout, as the paper's "∇SD (dict)").
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse

from codegen import data as D
from codegen.build import build
from codegen.dps import lower
from codegen.emit import DEST_SIZE, Kernel, emit_kernel, translation_unit
from codegen.native import Native
from sdqlite.ad.gradient import expand, gradient
from sdqlite.check.sizes import NO_KEYS, Size, declared, result_sizes
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import DataError, SDQLTypeError
from sdqlite.opt.passes import normalize_multiplication
from sdqlite.opt.pipeline import Limits, Stage, pipeline
from sdqlite.storage.compose import compose
from sdqlite.storage.formats import Coo, Format, declared_formats, layout, resolve
from sdqlite.syntax.ast import Expr, free_vars
from sdqlite.syntax.parser import Program, parse_program
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type, erase, scalar_of
from semantics.datafiles import sparse_declared
from semantics.extents import Layer, check_layers, facts, size_bounds
from semantics.values import DenseArray, data_mismatch, has_type, is_zero, type_of

Kind = Literal["numpy", "scipy", "value"]
Output = Literal["auto", "value"]
Destination = Literal["dense", "dict"]


@dataclass(frozen=True)
class Arg:
    """An input's data, read once: its type (sizes included), what it came as."""

    name: str
    type: Type
    kind: Kind
    data: Any


@dataclass
class Specialized:
    """The program compiled for one choice of formats and kinds of data."""

    stages: list[Stage]
    kernel: Kernel
    flat: dict[str, dict[str, str]]  # input -> parameter -> flat input of the kernel
    formats: dict[str, Format]
    sizes: list[Size]  # of the result's layers
    result: Type  # the program's (the kernel's may store its outer layer densely)
    native: Native | None = None
    build_seconds: float = 0.0
    source: str = ""

    @property
    def kernel_types(self) -> dict[str, Type]:
        return dict(self.kernel.inputs)

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
    cache: dict[tuple[object, ...], Specialized] = field(default_factory=dict)

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
        if free_vars(self.program.expr) <= declared_:  # check now: errors at compile time
            ctx = {d.name: d.type for d in self.program.decls}
            elab = expand(typecheck(self.program.expr, ctx)[0], ctx)
            if self.wrt is not None:
                typecheck(gradient(elab, self.wrt, ctx), ctx)

    # ---- calling ------------------------------------------------------------------------

    def __call__(self, **inputs: Any) -> Any:
        args = self.read(inputs)
        spec = self.specialize(args)
        return self.run(spec, args)

    def read(self, inputs: Mapping[str, Any]) -> dict[str, Arg]:
        """Each input's data, typed: by its declaration (the data must fit it) or by it."""
        assert self.program.expr is not None
        decls = {d.name: d for d in self.program.decls}
        needed = free_vars(self.program.expr) | ({self.wrt} if self.wrt else set())
        missing = sorted(needed - set(inputs))
        if missing:
            raise DataError(f"no data for input {', '.join(missing)}")
        extra = sorted(set(inputs) - needed - set(decls))
        if extra:
            raise DataError(f"{', '.join(extra)}: not an input of the program")
        return {x: _arg(x, inputs[x], decls[x].type if x in decls else None)
                for x in sorted(needed)}

    def specialize(self, args: Mapping[str, Arg]) -> Specialized:
        """The compiled program for these inputs' types, kinds and formats (specialized and
        built on first use)."""
        spec = self.specialized(args)
        if spec.native is None:
            start = time.perf_counter()
            built = build(spec.source)
            spec.native, spec.build_seconds = Native(built, spec.kernel), \
                time.perf_counter() - start
        return spec

    def specialized(self, args: Mapping[str, Arg]) -> Specialized:
        """The specialized program for these inputs, not built."""
        decls = {d.name: d for d in self.program.decls}
        formats = {}
        for x, a in args.items():
            name = self.formats.get(x) or (decls[x].format if x in decls else None) or \
                _default_format(a)
            formats[x] = resolve(name, a.type, None, f"input {x}: ")
        key = tuple((x, a.type, _extents(a.type), a.kind, formats[x].name)
                    for x, a in sorted(args.items()))
        if key not in self.cache:
            self.cache[key] = self._specialize({x: a.type for x, a in args.items()}, formats,
                                               {x: a.kind for x, a in args.items()})
        return self.cache[key]

    def _specialize(self, ctx: dict[str, Type], formats: dict[str, Format],
                    kinds: dict[str, Kind]) -> Specialized:
        assert self.program.expr is not None
        elab = expand(typecheck(self.program.expr, ctx)[0], ctx)
        if self.optimize:
            stages = pipeline(elab, ctx, self.wrt, self.limits, formats,
                              normalize=self.normalize)
        else:
            stages = self._unoptimized(elab, ctx, formats)
        final, final_ctx = stages[-1].program, stages[-1].ctx or ctx
        composed = next((s.report for s in stages if s.name == "storage composition"), {})
        flat: dict[str, dict[str, str]] = composed.get("flat arrays", {})  # type: ignore[assignment]
        t = typecheck(final, final_ctx)[1]
        sized = {x: _with_shape_sizes(x, t0) if kinds[x] != "value" else t0
                 for x, t0 in ctx.items()}
        sizes = result_sizes(elab, sized)
        if self.wrt is not None:
            sizes += declared(sized[self.wrt])
        low = lower(final, final_ctx, t, dps=self.dps)
        dense = (self.destination == "dense" and isinstance(t, DictT) and not t.dense
                 and bool(sizes) and sizes[0] not in (None, NO_KEYS))
        kernel = emit_kernel(_identifier(self.name), low, show(final), dense_result=dense)
        return Specialized(stages, kernel, flat, formats, sizes, t,
                           source=translation_unit([kernel]))

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

    def run(self, spec: Specialized, args: Mapping[str, Arg]) -> Any:
        """Check the data against declared sizes, move them in, run, convert the result
        (to ``self.output``)."""
        assert spec.native is not None
        buffers, bounds = self.buffers(spec, args)
        out = spec.native(buffers)
        return _result(out, spec.kernel.result, spec.result, spec.sizes, bounds, self.output)

    def buffers(self, spec: Specialized, args: Mapping[str, Arg]
                ) -> tuple[list[D.Buffers], dict[str, int]]:
        """The kernel's input buffers (sizes checked first), and every size name's bound."""
        bounds = self.check_sizes(args)
        args = {x: _within(a, bounds) for x, a in args.items()}
        flat: dict[str, D.Buffers] = {}
        for x, params in spec.flat.items():
            arrays = _layout(spec.formats[x], args[x])
            flat |= {name: _flat_buffers(arrays[p], spec.kernel_types[name])
                     for p, name in params.items()}
        if spec.kernel.inputs and spec.kernel.inputs[-1][0] == DEST_SIZE:
            flat[DEST_SIZE] = D.scalar(bounds[str(spec.sizes[0])], INT)
        return [flat[x] if x in flat else _as_is(args[x], t)
                for x, t in spec.kernel.inputs], bounds

    def check_sizes(self, args: Mapping[str, Arg]) -> dict[str, int]:
        """Declared sizes checked against the data; every size name's bound."""
        decls = {d.name: d for d in self.program.decls}
        layer_facts = {x: (_facts(a), decls[x].span if x in decls else None)
                       for x, a in args.items()}
        fixed = check_layers(layer_facts)
        return size_bounds((f for fs, _ in layer_facts.values() for f in fs), fixed)

    # ---- reading ------------------------------------------------------------------------

    def cpp(self, inputs: Mapping[str, Any] | None = None) -> str:
        """The generated C++ for these inputs' formats and kinds; without data, for the
        declared (or given) formats, else ``dict``."""
        return self.specialized(self.read(inputs) if inputs is not None else self.declared()
                                ).source

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


def compile(source: str | Program, wrt: str | None = None,
            formats: Mapping[str, str] | None = None, *, optimize: bool = True,
            normalize: bool = True, dps: bool = True, limits: Limits | None = None,
            output: Output = "auto", name: str = "kernel", destination: Destination = "dense"
            ) -> Compiled:
    """Compile an SDQLite program (its source text: declarations, then an expression) to
    C++, differentiated w.r.t. ``wrt`` when given; call the result with the inputs."""
    program = parse_program(source) if isinstance(source, str) else source
    declared_formats(program)  # a declared format that does not fit its input is an error here
    return Compiled(program, wrt, dict(formats or {}), optimize, normalize, dps,
                    limits or Limits(), output, name, destination)


def _identifier(name: str) -> str:
    text = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"
    return text if text[0].isalpha() else f"k_{text}"


# ---- inputs ---------------------------------------------------------------------------------


def _arg(name: str, x: Any, want: Type | None) -> Arg:
    """Read an input's data and check it against its declaration."""
    if scipy.sparse.issparse(x):
        sparse: Any = x
        logical = DictT(REAL) if sparse.ndim == 1 else DictT(DictT(REAL))
        t = want if want is not None else logical
        if erase(t) != logical:
            raise DataError(f"input {name}: a {sparse.ndim}-d sparse array is a {logical}, "
                            f"but {name} is declared {t}")
        if sparse.dtype.kind not in "iuf":
            raise DataError(f"input {name}: a sparse array of dtype {sparse.dtype} has no "
                            "SDQLite type (use float or int)")
        # CSR, a vector's too (no copy of a float CSR array's arrays: scipy copies only
        # to convert)
        m: Any = scipy.sparse.csr_array(sparse, dtype=np.float64)
        if not m.has_canonical_format:
            m = m.copy()  # the caller's matrix stays as it is
            m.sum_duplicates()  # canonical: the formats' layouts rely on it
        if not np.all(np.isfinite(m.data)):
            raise DataError(f"input {name}: the array holds a number that is not finite")
        return Arg(name, t, "scipy", m)
    if isinstance(x, np.ndarray) and x.ndim > 0:
        return Arg(name, _numpy_type(name, x, want), "numpy", x)
    if isinstance(x, np.generic | np.ndarray):
        x = x.item()
    if isinstance(x, int | float | bool | dict | DenseArray):
        if isinstance(x, int) and not isinstance(x, bool) and want == REAL:
            x = float(x)  # an integer is a real where a real is declared
        vt = want if want is not None else type_of(x)
        if vt is None:
            raise DataError(f"the type of input {name} cannot be told from its data; "
                            f"declare it: {name} : TYPE")
        if isinstance(x, float) and not np.isfinite(x):
            raise DataError(f"input {name} is not a finite number")
        if not has_type(x, vt):
            raise DataError(data_mismatch(name, x, vt, type_of(x)))
        return Arg(name, vt, "value", x)
    raise DataError(f"input {name}: cannot read data of Python type {type(x).__name__} "
                    "(give a numpy array, a scipy.sparse matrix or an SDQLite value)")


def _numpy_type(name: str, a: Any, want: Type | None) -> Type:
    if a.dtype.kind not in "iuf":
        raise DataError(f"input {name}: arrays of dtype {a.dtype} have no SDQLite type "
                        "(use float or int)")
    if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        raise DataError(f"input {name}: the array holds a number that is not finite")
    if want is None:
        t: Type = INT if a.dtype.kind in "iu" else REAL
        for _ in range(a.ndim):
            t = DictT(t, dense=True)
        return t
    layers = D.layers(want)
    leaf = scalar_of(want)
    dense = (len(layers) == a.ndim and all(layer.dense for layer in layers)
             and (leaf == REAL or (leaf == INT and a.dtype.kind in "iu")))
    if not dense and not sparse_declared(want, a.ndim):  # as the interpreter (datafiles.py)
        raise DataError(f"input {name} is declared {want}, but its data is a {a.ndim}-d "
                        f"array of {a.dtype} (a dense array, or a real vector or matrix "
                        "declared sparse)")
    return want


def _default_format(a: Arg) -> str:
    match a.kind:
        case "scipy":
            return "csr" if a.data.ndim == 2 else "coo"
        case "numpy":
            return "dense"
    return "dict"


def _extents(t: Type) -> tuple[str | None, ...]:
    return tuple(declared(t))


def _with_shape_sizes(name: str, t: Type, level: int = 0) -> Type:
    """``t`` with a size name on each layer that declares none (the data's shape)."""
    if not isinstance(t, DictT):
        return t
    return DictT(_with_shape_sizes(name, t.val, level + 1), t.dense,
                 t.extent or f"{name}#{level}")


def _facts(a: Arg) -> list[Layer]:
    """What the data say about each layer (numpy and scipy without per-entry work; a
    stored zero is no entry: past a size, ``_within`` cuts it away)."""
    if a.kind == "value":
        return list(facts(a.type, a.data, a.name))
    layers = D.layers(_with_shape_sizes(a.name, a.type))
    # numpy data have every layer dense, or none (_numpy_type); scipy data none
    where = None if all(layer.dense for layer in layers) else a.data.nonzero()
    out = []
    for d, layer in enumerate(layers):
        path = a.name + "(*)" * d
        n = a.data.shape[d]
        out.append(Layer(layer, path, count=n, bound=n) if where is None else
                   Layer(layer, path, keys=_range(where[d]), bound=n))
    return out


def _within(a: Arg, bounds: Mapping[str, int]) -> Arg:
    """numpy or scipy data cut to the sizes of their layers where another input fixes one
    below the shape: the sizes check found no entry beyond it, and a kernel iterating
    the whole shape would write an empty row's key outside the result's size."""
    if a.kind not in ("scipy", "numpy"):
        return a
    layers = D.layers(_with_shape_sizes(a.name, a.type))
    cut = tuple(min(n, bounds[str(layer.extent)]) for n, layer in zip(
        a.data.shape, layers, strict=True))
    if cut == a.data.shape:
        return a
    return Arg(a.name, a.type, a.kind, a.data[tuple(slice(0, n) for n in cut)])


def _range(keys: Any) -> tuple[int, int] | None:
    return (int(keys.min()), int(keys.max())) if len(keys) else None


def _coo(a: Arg) -> Coo:
    """Every stored entry's keys and value."""
    match a.kind:
        case "scipy":
            coo = a.data.tocoo()
            keep = coo.data != 0
            return [c[keep].astype(np.int64) for c in coo.coords], coo.data[keep]
        case "numpy":
            where = np.nonzero(a.data)
            return [w.astype(np.int64) for w in where], np.asarray(a.data[where], np.float64)
    return D.to_coo(D.encode(a.data, a.type), a.type)


def _layout(fmt: Format, a: Arg) -> dict[str, Any]:
    """An input's flat arrays in ``fmt``: a scipy matrix's own CSR (or CSC) arrays, which
    are canonical (sorted, duplicates added); else the format's layout of its entries."""
    if a.kind == "scipy" and a.data.ndim == 2 and fmt.name in ("csr", "csc"):
        # (an explicit zero stays: the format's definition reads {j -> 0.0} as no entry,
        # and the caller's arrays, shared, stay as they are)
        m = a.data if fmt.name == "csr" else scipy.sparse.csc_array(a.data)
        n = m.shape[0] if fmt.name == "csr" else m.shape[1]
        return {"len": n, "pos": m.indptr.astype(np.int64), "idx": m.indices.astype(np.int64),
                "val": m.data}
    return layout(fmt, _coo(a), _sizes_of(a))


def _sizes_of(a: Arg) -> tuple[int | None, ...]:
    if a.kind in ("scipy", "numpy"):
        return tuple(int(n) for n in a.data.shape)
    return (None,) * len(D.layers(a.type))


def _flat_buffers(x: Any, t: Type) -> D.Buffers:
    """A flat parameter's buffers: an int, or an index or value array."""
    return D.from_numpy(np.asarray(x), t)


def _as_is(a: Arg, t: Type) -> D.Buffers:
    match a.kind:
        case "numpy":
            if all(layer.dense for layer in D.layers(t)):
                return D.from_numpy(a.data, t)
            keys, vals = _coo(a)
            return D.from_coo(keys, vals, t)
        case "scipy":
            return D.from_coo(*_coo(a), t)
    return D.encode(a.data, t)


# ---- results --------------------------------------------------------------------------------


def _result(bufs: D.Buffers, stored: Type, t: Type, sizes: list[Size],
            bounds: Mapping[str, int], output: Output) -> Any:
    """The result as ``output`` asks: ``stored`` is how the buffers hold it (a dense
    destination's outer layer is an array), ``t`` the program's type."""
    if not isinstance(t, DictT):
        x = bufs[0][0]
        return bool(x) if t == BOOL else int(x) if t == INT else float(x)
    if output == "auto":
        layers = D.layers(t)
        shape = [0 if s == NO_KEYS else bounds.get(s) if s is not None else None
                 for s in sizes]
        if all(layer.dense for layer in layers):
            arr = D.to_numpy(bufs, t)
            if arr is not None:
                return arr
        elif scalar_of(t) == REAL and len(layers) <= 2 and None not in shape:
            dims = [int(n) for n in shape if n is not None]
            whole = stored != t  # a dense destination: positions 0 .. dims[0]-1 (buffers())
            assert not whole or (bufs[1].tolist() == [0] and len(
                bufs[2 if len(layers) == 2 else -1]) == dims[0] + len(layers) - 1)
            if whole and len(layers) == 1:  # an array of the right size already
                return bufs[-1]
            keys, vals = D.to_coo(bufs, stored)
            # the result's sizes bound its keys (test_sizes.py): the check keeps a bug
            # there from making a wrong array
            if all(len(k) == 0 or (k.min() >= 0 and k.max() < n)
                   for k, n in zip(keys, dims, strict=True)):
                if len(layers) == 1:
                    out = np.zeros(dims[0])
                    out[keys[0]] = vals
                    return out
                if whole:  # rows 0 .. n-1 in order: the buffers are CSR's arrays
                    return scipy.sparse.csr_array((bufs[-1], bufs[3], bufs[2]),
                                                  shape=(dims[0], dims[1]))
                return scipy.sparse.csr_array((vals, (keys[0], keys[1])),
                                              shape=(dims[0], dims[1]))
    value = D.decode(bufs, stored)
    if stored != t:  # the dense outer layer read as the dictionary it stands for
        return {k: x for k, x in enumerate(value.items, value.start) if not is_zero(x)}
    return value

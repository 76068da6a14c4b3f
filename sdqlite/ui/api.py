"""The Python API in three functions, shaped like numpy's and JAX's::

    sdqlite.evaluate(source, A=a_csr_matrix, x=a_numpy_vector)           # the value
    sdqlite.grad(source, "x", A=a_csr_matrix, x=a_numpy_vector)          # ∂/∂x, like x
    f = sdqlite.compile(source, wrt="x"); f(A, x)                         # jax.jit's role

Inputs are numpy arrays, ``scipy.sparse`` matrices and arrays, Python numbers or SDQLite
values (nested dicts of numbers), by name or positionally in declaration order.  Both
backends read them through the same checked door (``codegen/inputs.py``) and give
results of the same kinds: a number for a scalar; a numpy array for a dense array or a
real vector whose size the data fix; a ``scipy.sparse`` matrix for a real matrix, of the
inputs' class and format (``csr_matrix`` in, ``csr_matrix`` out); otherwise an SDQLite
value.  A gradient comes back like the input it is by: the same kind, shape and format.

``backend="interp"`` runs the reference interpreter (the paper's semantics, slow and
obviously right); ``backend="cpp"`` the optimized C++ of ``sdqlite.compile`` (built once
per program and input formats, then cached on disk).  Misuse of any kind is an
``SDQLiteError`` that says what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse

from codegen import data as D
from codegen import inputs as I
from codegen import results as R
from codegen.api import Compiled, as_is, bind
from codegen.api import compile as compile_
from sdqlite.ad.gradient import expand
from sdqlite.check.sizes import declared, result_sizes
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import DataError, SDQLiteError
from sdqlite.opt.pipeline import Limits, Stage, pipeline
from sdqlite.paths import read_source
from sdqlite.storage.formats import resolve
from sdqlite.syntax.ast import Gradient
from sdqlite.syntax.parser import Program, parse_program
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import Type
from semantics.convert import to_numpy
from semantics.interp import evaluate as interpret
from semantics.run import check_program

Backend = Literal["interp", "cpp"]
BACKENDS = ("interp", "cpp")


def evaluate(program: str | Path | Program, /, *args: Any, backend: Backend = "interp",
             **inputs: Any) -> Any:
    """The value of an SDQLite program (its source text, a path to a ``.sdql`` file, or a
    parsed ``Program``) for these inputs.

    >>> import numpy as np, sdqlite
    >>> sdqlite.evaluate("x : {dense_int -> real}\\nsum(<i, a> in x) a * a", np.array([1.0, 2.0]))
    5.0
    """
    prog = program_of(program)
    with _located(program):
        return value_of(prog, _bind(prog, args, inputs, backend), backend)


def grad(program: str | Path | Program, wrt: str | Sequence[str], /, *args: Any,
         backend: Backend = "interp", **inputs: Any) -> Any:
    """The gradient of a program's value w.r.t. the input ``wrt`` (Fig. fig:api's
    ``gradient e x``) at these inputs: for a real program, of the kind, shape and format
    of that input; for a tensor, its Jacobian (the result's layers, then the input's), as
    ``evaluate`` gives results.  For several inputs (a tuple or list of names), a tuple.

    >>> import numpy as np, sdqlite
    >>> sdqlite.grad("x : {dense_int -> real}\\nsum(<i, a> in x) a * a", "x", np.array([1.0, 2.0]))
    array([2., 4.])
    """
    prog = program_of(program)
    names = _wrts(wrt)
    with _located(program):
        given = _bind(prog, args, inputs, backend)
        out = tuple(gradient_of(prog, x, given, backend) for x in names)
    return out[0] if isinstance(wrt, str) else out


def value_of(prog: Program, given: Mapping[str, Any], backend: str, options: Options = ()
             ) -> Any:
    """``evaluate`` on inputs bound by name (also the command line's ``--output``, with
    its compile ``options``)."""
    result, t, _ = _run(prog, None, given, backend, "auto", options)
    return _matching(result, t, given)


def gradient_of(prog: Program, x: str, given: Mapping[str, Any], backend: str,
                options: Options = ()) -> Any:
    """``grad`` by one input, on inputs bound by name."""
    value = x in given and _kind(given[x]) == "value"  # a value in, a value out
    result, t, xt = _run(prog, x, given, backend, "value" if value else "auto", options)
    # a real program's gradient is like x; a tensor's (a Jacobian: the result's layers,
    # then x's) is a result
    real = xt is not None and len(D.layers(t)) == len(D.layers(xt))
    return _like(result, given[x]) if real else _matching(result, t, given)


# ---- reading the call -------------------------------------------------------------------


def program_of(program: object) -> Program:
    """A program given as source text, a path to a ``.sdql`` file or a parsed ``Program``."""
    match program:
        case Program():
            return program
        case Path():
            return _parsed(read_source(str(program)), str(program))
        case str():
            return _parsed(program, None)
    raise DataError(f"the program is {type(program).__name__}: give its source text (str), "
                    "a path to a .sdql file (pathlib.Path) or a parsed program")


def _parsed(text: str, file: str | None) -> Program:
    try:
        return parse_program(text)
    except SDQLiteError as err:
        err.file = err.file or file
        raise


class _located:
    """Errors from the program carry its file's name (``str(e)`` is ``file:line:col: …``)."""

    def __init__(self, program: object) -> None:
        self.file = str(program) if isinstance(program, Path) else None

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, err: BaseException | None, tb: object) -> None:
        if isinstance(err, SDQLiteError) and self.file:
            err.file = err.file or self.file


def optimized(prog: Program, ctx: Mapping[str, Type], wrt: str | None,
              formats: Mapping[str, str], limits: Limits | None = None) -> list[Stage]:
    """The pipeline of Fig. fig:arch on a program whose inputs have these types, its
    storage formats those declared and ``formats`` (``sdqlite opt``, ``%%sdql --opt``);
    the last stage is the result (``as_source`` prints it)."""
    elab, _ = check_program(prog, dict(ctx))
    unknown = sorted(set(formats) - set(ctx))
    if unknown:
        raise DataError(f"--format for {', '.join(unknown)}, which is not an input")
    named = {d.name: d.format for d in prog.decls if d.format} | dict(formats)
    resolved = {x: resolve(f, ctx[x], None, f"--format {x}: ") for x, f in named.items()}
    return pipeline(elab, dict(ctx), wrt, limits or Limits(), resolved)


def _wrts(wrt: object) -> tuple[str, ...]:
    if isinstance(wrt, str):
        return (wrt,)
    if isinstance(wrt, Sequence) and wrt and all(isinstance(x, str) for x in wrt):
        return tuple(wrt)
    raise DataError(f"wrt is {wrt!r}: give the name of an input (wrt=\"x\") or a tuple of "
                    "names (wrt=(\"x\", \"b\"))")


def _bind(prog: Program, args: Sequence[Any], inputs: Mapping[str, Any], backend: object
          ) -> dict[str, Any]:
    """The inputs by name: positional ones in declaration order, then the named ones."""
    if backend not in BACKENDS:
        raise DataError(f"backend={backend!r}: choose \"interp\" (the reference interpreter) "
                        "or \"cpp\" (the compiled C++)")
    return bind(prog, args, inputs)


def _sparse(x: Any) -> bool:
    return bool(scipy.sparse.issparse(x))


def _kind(x: Any) -> str:
    if _sparse(x):
        return "scipy"
    if isinstance(x, np.ndarray) and x.ndim > 0:
        return "numpy"
    return "value"


# ---- the two backends ---------------------------------------------------------------------


#: compile's options as the command line gives them: formats (name, format) pairs,
#: optimize, normalize, dps, name, threads (hashable, for the cache)
Options = tuple[tuple[str, Any], ...]


@lru_cache(maxsize=64)
def _compiled_text(text: str, wrt: str | None, output: str, options: Options = ()
                   ) -> Compiled:
    opts = dict(options)
    return compile_(text, wrt, dict(opts.pop("formats", ())), **opts,
                    output="value" if output == "value" else "auto")


def _run(prog: Program, wrt: str | None, given: Mapping[str, Any], backend: str, output: str,
         options: Options = ()) -> tuple[Any, Type, Type | None]:
    """The result on the backend asked for, its type, and the type of ``wrt``'s data."""
    if backend == "interp":
        return _interpreted(prog, wrt, given, output)
    c = _compiled_text(_text(prog), wrt, output, options)
    args = c.read(given)
    spec, result = c.invoke(args)
    return result, spec.result, args[wrt].type if wrt is not None else None


def _text(prog: Program) -> str:
    assert prog.expr is not None
    return "\n".join([*map(str, prog.decls), show(prog.expr)])


def _interpreted(prog: Program, wrt: str | None, given: Mapping[str, Any], output: str
                 ) -> tuple[Any, Type, Type | None]:
    """The reference interpreter on the data as the compiled code reads them (the same
    checks, the same sizes); the result converted as it converts
    (a gradient by an input given as a value: that value)."""
    c = compile_(prog, wrt)  # parsed and checked now; nothing is built
    args = c.read(given)
    bounds = c.check_sizes(args)
    ctx = {x: a.type for x, a in args.items()}
    assert prog.expr is not None
    elab, t = typecheck(prog.expr if wrt is None else Gradient(prog.expr, wrt), ctx)
    value = interpret(expand(elab, ctx), {x: _value(a) for x, a in args.items()})
    xt = args[wrt].type if wrt is not None else None
    if output == "value":
        return value, t, xt
    sized = {x: I.with_shape_sizes(x, a.type) if a.kind != "value" else a.type
             for x, a in args.items()}
    sizes = result_sizes(expand(typecheck(prog.expr, ctx)[0], ctx), sized)
    if wrt is not None:
        sizes += declared(sized[wrt])
    return R.convert(D.encode(value, t), t, t, sizes, bounds, "auto"), t, xt


def _value(a: I.Arg) -> Any:
    """An input's data as an SDQLite value, through the buffers the compiled code reads."""
    if a.kind == "value":
        return a.data
    if a.kind == "numpy" and all(layer.dense for layer in D.layers(a.type)):
        return D.decode(D.from_numpy(a.data, a.type), a.type)
    return D.decode(as_is(a, a.type), a.type)


# ---- results like the inputs -----------------------------------------------------------------


def _like(result: Any, x: Any) -> Any:
    """A gradient as the input it is by was given: numpy of its shape, scipy of its class
    and format, or the value."""
    match _kind(x):
        case "numpy":
            if _sparse(result):
                arr = result.toarray()
            elif isinstance(result, np.ndarray):
                arr = result
            else:
                arr = to_numpy(result, x.shape)
            if arr.shape != x.shape:  # a size cut below the shape: the rest is zero
                whole = np.zeros(x.shape)
                whole[tuple(slice(0, n) for n in arr.shape)] = arr
                arr = whole
            return arr
        case "scipy":
            return _sparse_like(result, x)
    return result


def _sparse_like(result: Any, x: Any) -> Any:
    if _sparse(result) or isinstance(result, np.ndarray):
        m = scipy.sparse.coo_array(result)
    else:  # a value: its entries
        m = scipy.sparse.coo_array(to_numpy(result, x.shape))
    if m.shape != x.shape:
        m = scipy.sparse.coo_array((m.data, m.coords), shape=x.shape)
    cls = type(x)
    try:
        return cls(m.asformat(x.format))
    except (ValueError, TypeError):
        return m.asformat(x.format)


def _matching(result: Any, t: Type, given: Mapping[str, Any]) -> Any:
    """A real matrix of sparse layers as ``scipy.sparse`` (the compiled code may have
    written it into a dense array), in the class and format the scipy inputs share
    (``csr_matrix`` in, ``csr_matrix`` out); numpy and values as they are."""
    layers = D.layers(t)
    if isinstance(result, np.ndarray) and result.ndim == 2 and not all(
            layer.dense for layer in layers):
        result = scipy.sparse.csr_array(result)
    if not _sparse(result):
        return result
    sparse = [x for x in given.values() if _sparse(x) and x.ndim == result.ndim]
    if not sparse or len({(type(x), x.format) for x in sparse}) != 1:
        return result
    like = sparse[0]
    try:
        return type(like)(result.asformat(like.format))
    except (ValueError, TypeError):
        return result

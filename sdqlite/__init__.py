"""SDQLite: the language of the paper '∇SD: Differentiable Programming for Sparse Tensors'.

The public entry points::

    sdqlite.evaluate(source, A=matrix, x=vector)              # the value (interpreter)
    sdqlite.grad(source, "x", A=matrix, x=vector)             # a gradient, like x
    sdqlite.grad(source, "x", A, x, backend="cpp")            # the same, compiled C++
    f = sdqlite.compile(source, wrt="x"); f(A, x)             # compile once, call often
    sdqlite.spy(value); sdqlite.loop_nest(source, A, x)      # pictures (sdqlite[plot])
    %load_ext sdqlite                                         # %%sdql cells in Jupyter
    from sdqlite import parse_program, show, typecheck        # the language itself

One sub-package per stage of Fig. fig:arch, each importing only those below it (the
layers contract in ``pyproject.toml``, checked by ``lint-imports``): ``syntax`` →
``check`` → ``ad`` → ``storage`` and ``opt`` → (``semantics``, ``codegen``) → ``ui``.
``errors`` and ``paths`` serve every layer.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, Any

from sdqlite.check.typecheck import check, synth, typecheck
from sdqlite.errors import (
    BuildError,
    CodegenError,
    DataError,
    DiffError,
    EvalError,
    ParseError,
    SDQLiteError,
    SDQLTypeError,
)
from sdqlite.syntax.parser import parse_expr, parse_program, parse_type
from sdqlite.syntax.printer import show

try:
    __version__ = metadata.version("sdqlite")
except metadata.PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "unknown"

if TYPE_CHECKING:
    from codegen.api import compile as compile
    from sdqlite.ui.api import evaluate as evaluate
    from sdqlite.ui.api import grad as grad
    from sdqlite.ui.plot import loop_nest as loop_nest
    from sdqlite.ui.plot import spy as spy


def __getattr__(name: str) -> Any:
    """``compile``, ``evaluate`` and ``grad`` come from layers above this package's
    sub-packages (``codegen``, ``sdqlite.ui``), so they are looked up when first used
    (PEP 562): this ``__init__`` runs before any of ``sdqlite.syntax``, ``sdqlite.check``,
    …, which those layers import."""
    if name == "compile":
        from codegen.api import compile

        return compile
    if name in ("evaluate", "grad"):
        from sdqlite.ui import api

        return getattr(api, name)
    if name in ("spy", "loop_nest"):
        from sdqlite.ui import plot

        return getattr(plot, name)
    raise AttributeError(f"module 'sdqlite' has no attribute {name!r}")


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext sdqlite`` in IPython or Jupyter: the ``%%sdql`` cell magic
    (``sdqlite.ui.magic``)."""
    from sdqlite.ui.magic import load

    load(shell)


# (load_ipython_extension is IPython's hook for %load_ext, not a function to call)
__all__ = ["BuildError", "CodegenError", "DataError", "DiffError", "EvalError", "ParseError",
           "SDQLTypeError", "SDQLiteError", "__version__", "check", "compile", "evaluate",
           "grad", "loop_nest", "parse_expr", "parse_program", "parse_type", "show", "spy",
           "synth", "typecheck"]

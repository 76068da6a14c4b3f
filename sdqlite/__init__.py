"""SDQLite: the language of the paper '∇SD: Differentiable Programming for Sparse Tensors'.

The public entry points::

    from sdqlite import parse_expr, parse_program, show, typecheck
    from semantics.interp import evaluate           # the reference interpreter
    f = sdqlite.compile(source, wrt="x", formats={"A": "csr"})   # the C++ backend

One sub-package per stage of Fig. fig:arch, each importing only those below it (the
layers contract in ``pyproject.toml``, checked by ``lint-imports``): ``syntax`` →
``check`` → ``ad`` → ``storage`` and ``opt`` → (``semantics``, ``codegen``) → ``ui``.
``errors`` and ``paths`` serve every layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdqlite.check.typecheck import check, synth, typecheck
from sdqlite.syntax.parser import parse_expr, parse_program, parse_type
from sdqlite.syntax.printer import show

if TYPE_CHECKING:
    from codegen.api import compile as compile


def __getattr__(name: str) -> Any:
    """``compile`` comes from ``codegen``, a layer above this package's sub-packages, so
    it is looked up when first used (PEP 562): this ``__init__`` runs before any of
    ``sdqlite.syntax``, ``sdqlite.check``, …, which ``codegen`` itself imports."""
    if name == "compile":
        from codegen.api import compile

        return compile
    raise AttributeError(f"module 'sdqlite' has no attribute {name!r}")


__all__ = ["check", "compile", "parse_expr", "parse_program", "parse_type", "show", "synth",
           "typecheck"]

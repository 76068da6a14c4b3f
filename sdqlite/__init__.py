"""SDQLite: the language of the paper '∇SD: Differentiable Programming for Sparse Tensors'.

The public entry points::

    from sdqlite import parse_expr, parse_program, show, typecheck
    from semantics.interp import evaluate           # the reference interpreter
    f = sdqlite.compile(source, wrt="x", formats={"A": "csr"})   # the C++ backend
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdqlite.parser import parse_expr, parse_program, parse_type
from sdqlite.printer import show
from sdqlite.typecheck import check, synth, typecheck

if TYPE_CHECKING:
    from codegen.api import Compiled


def compile(source: str, wrt: str | None = None, formats: dict[str, str] | None = None,
            **options: Any) -> Compiled:
    """Compile a program to C++ (``codegen/api.py``): ``f = compile(source, wrt="x",
    formats={"A": "csr"})``, then ``f(A=scipy_matrix, x=numpy_vector, beta=0.9)``."""
    from codegen.api import compile as compile_

    return compile_(source, wrt, formats, **options)


__all__ = ["check", "compile", "parse_expr", "parse_program", "parse_type", "show", "synth",
           "typecheck"]

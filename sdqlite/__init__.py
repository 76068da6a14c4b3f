"""SDQLite: the language of the paper '∇SD: Differentiable Programming for Sparse Tensors'.

The public entry points::

    from sdqlite import parse_expr, parse_program, show, typecheck
    from semantics.interp import evaluate
"""

from sdqlite.parser import parse_expr, parse_program, parse_type
from sdqlite.printer import show
from sdqlite.typecheck import check, synth, typecheck

__all__ = ["check", "parse_expr", "parse_program", "parse_type", "show", "synth", "typecheck"]

"""A readable view of a program after destination-passing style: its loop nest.

The IR of ``codegen/dps.py`` as indented pseudo-code, one line per statement, the way §5.5
draws the generated code before it is C++::

    for <i, r> in A:
      for <j, v> in r:
        result[i] += v * x(j)
    prune result

``result`` is the destination the generated function receives (``%result`` when an
input is called ``result``).  One line per statement of the IR:

========================  =====================================================
``T acc``                 an accumulator, zero to start with (``Decl``)
``x = e``                 a binding, not copied (``Bind``)
``for <k, v> in d:``      a loop over a range, a sub-array, a dictionary, an array
``if c:``                 ``When``
``dest += e``             ``AddInto``
``dest += a * b``         ``MulAddInto``: the product is added, not built
``d = &dest``             ``Enter``: an entry of a destination becomes one
``prune acc``             drop the entries that became zero
``dest = e``              ``Assign`` (a boolean result)
========================  =====================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from codegen.dps import (
    RESULT,
    AddInto,
    Assign,
    Bind,
    Decl,
    Dest,
    Enter,
    Loop,
    Lowered,
    MulAddInto,
    Prune,
    Stmt,
    When,
)
from sdqlite.syntax.ast import Mul
from sdqlite.syntax.printer import show

INDENT = "  "


def loop_nest(low: Lowered) -> str:
    """The statements of ``low`` as an indented loop nest."""
    result = RESULT if any(x == "result" for x, _ in low.inputs) else "result"
    lines = [f"{x} : {t}" for x, t in low.inputs]
    lines.append(f"{result} : {low.type}  (the destination)")
    lines += _lines(low.body, 0, result)
    return "\n".join(lines) + "\n"


def _lines(body: Sequence[Stmt], depth: int, result: str) -> list[str]:
    pad = INDENT * depth
    out: list[str] = []

    def dest(d: Dest) -> str:
        root = result if d.root == RESULT else d.root
        return root + "".join(f"[{show(k)}]" for k in d.keys)

    for s in body:
        match s:
            case Decl(name, t):
                out.append(f"{pad}{name} : {t} = zero")
            case Bind(name, value, _):
                out.append(f"{pad}{name} = {show(value)}")
            case Loop(key, val, dom, _, inner):
                out.append(f"{pad}for <{key}, {val}> in {show(dom)}:")
                out += _lines(inner, depth + 1, result)
            case When(cond, inner):
                out.append(f"{pad}if {show(cond)}:")
                out += _lines(inner, depth + 1, result)
            case AddInto(d, value, _):
                out.append(f"{pad}{dest(d)} += {show(value)}")
            case MulAddInto(d, left, right, _, _):
                out.append(f"{pad}{dest(d)} += {show(Mul(left, right))}")
            case Enter(name, d, _):
                out.append(f"{pad}{name} = &{dest(d)}")
            case Prune(name):
                out.append(f"{pad}prune {result if name == RESULT else name}")
            case Assign(d, value):
                out.append(f"{pad}{dest(d)} = {show(value)}")
            case _:
                assert_never(s)
    return out

"""Pictures of values and programs: ``sdqlite.spy`` and ``sdqlite.loop_nest``.

``spy(value)`` draws which entries of a matrix or vector are stored (matplotlib, the
optional extra ``sdqlite[plot]``): an SDQLite value, a numpy array (its non-zeros) or a
``scipy.sparse`` matrix.  ``loop_nest(program, wrt=…, **inputs)`` is the program the
compiled code runs for these inputs, after destination-passing style, as an indented
loop nest (``codegen/loops.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import scipy.sparse

from codegen.api import bind
from codegen.api import compile as compile_
from codegen.loops import loop_nest as show_loops
from sdqlite.errors import DataError
from sdqlite.syntax.parser import Program
from sdqlite.ui import api
from semantics.values import DenseArray, entries

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def spy(value: Any, *, ax: Axes | None = None, shape: tuple[int, int] | None = None,
        title: str | None = None, markersize: float | None = None) -> Axes:
    """Draw the stored entries of ``value`` (a matrix, or a vector as one row) on ``ax``
    (a new figure's when not given); ``shape`` fixes the picture's size for a value whose
    keys do not (a dictionary's largest keys are the default).  An entry a scipy matrix
    stores is drawn even when it holds zero.

    >>> ax = sdqlite.spy({0: {1: 2.0}, 2: {0: 1.0}})
    >>> ax.get_title()
    '3 × 2, 2 stored'
    """
    if shape is not None and not (
            isinstance(shape, tuple) and len(shape) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape)):
        raise DataError(f"shape={shape!r}: give (rows, columns), two positive integers")
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise DataError("sdqlite.spy draws with matplotlib, which is not installed: "
                        "pip install 'sdqlite[plot]'") from None
    m = _matrix(value, shape)
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4 * min(1.0, max(0.15, m.shape[0] / m.shape[1]))))
    if m.nnz:
        ax.spy(cast(Any, m), precision="present",
               markersize=markersize if markersize is not None else _size(m.shape),
               aspect="auto" if min(m.shape) == 1 else "equal")
    else:
        ax.set_xlim(-0.5, m.shape[1] - 0.5)
        ax.set_ylim(m.shape[0] - 0.5, -0.5)
    ax.set_title(title if title is not None else f"{m.shape[0]} × {m.shape[1]}, "
                 f"{m.nnz} stored")
    return ax


def _size(shape: tuple[int, int]) -> float:
    """A marker that fills its cell on a small matrix and stays visible on a large one."""
    return max(1.0, min(12.0, 200.0 / max(shape)))


def _matrix(value: Any, shape: tuple[int, int] | None) -> scipy.sparse.coo_array:
    """The stored entries of ``value`` as a 2-d COO array, each once."""
    if scipy.sparse.issparse(value):
        m = scipy.sparse.coo_array(cast(Any, value))
        if m.ndim == 1:
            m = scipy.sparse.coo_array((m.data, (np.zeros_like(m.coords[0]), m.coords[0])),
                                       shape=(1, m.shape[0]))
        m.sum_duplicates()
    elif isinstance(value, np.ndarray):
        if value.ndim not in (1, 2):
            raise DataError(f"spy draws a matrix or a vector; this array has {value.ndim} "
                            "dimensions")
        m = scipy.sparse.coo_array(np.atleast_2d(value))
        m.eliminate_zeros()
    elif isinstance(value, dict | DenseArray):
        rows, cols = _keys(value)
        size = (max(rows, default=-1) + 1, max(cols, default=-1) + 1)
        m = scipy.sparse.coo_array((np.ones(len(rows)), (rows, cols)),
                                   shape=(max(1, size[0]), max(1, size[1])))
    else:
        raise DataError(f"spy draws a matrix or a vector (an SDQLite value, a numpy array "
                        f"or a scipy matrix), not {type(value).__name__}")
    if shape is not None and (shape[0] < m.shape[0] or shape[1] < m.shape[1]):
        raise DataError(f"shape={shape} is smaller than the value's {m.shape}")
    return scipy.sparse.coo_array((m.data, m.coords), shape=shape or m.shape)


def _keys(value: dict[Any, Any] | DenseArray) -> tuple[list[int], list[int]]:
    """The (row, column) of each stored entry of a vector (row 0) or a matrix value."""
    rows: list[int] = []
    cols: list[int] = []
    layers = set()
    for k, inner in entries(value):
        _key(k)
        if isinstance(inner, dict | DenseArray):
            layers.add(2)
            for j, x in entries(inner):
                _key(j)
                if isinstance(x, dict | DenseArray):
                    raise DataError("spy draws a matrix or a vector; this value has more "
                                    "than two layers")
                rows.append(k)
                cols.append(j)
        else:
            layers.add(1)
            rows.append(0)
            cols.append(k)
    if len(layers) > 1:
        raise DataError("spy draws a matrix or a vector; this value mixes numbers and "
                        "dictionaries in one layer (it has no SDQLite type)")
    return rows, cols


def _key(k: object) -> None:
    if not isinstance(k, int) or isinstance(k, bool):
        raise DataError(f"spy draws integer keys; this value has the key {k!r}")
    if k < 0:
        raise DataError(f"spy draws keys from 0 up; this value has the key {k}")


def loop_nest(program: str | Path | Program, /, *args: Any, wrt: str | None = None,
              formats: dict[str, str] | None = None, dps: bool = True, **inputs: Any) -> str:
    """The loop nest that ``sdqlite.compile(program, wrt=wrt, dps=dps)`` runs on these
    inputs (by position or by name), after destination-passing style (or, with
    ``dps=False``, the paper's red listing: every sum builds its own accumulator): the
    program over the inputs' storage (``A_pos``, ``A_idx``, … for a CSR matrix), one line
    per statement.

    >>> print(sdqlite.loop_nest("V : {int -> real}\\nsum(<i, a> in V) { i -> a * a }",
    ...                         {0: 2.0}), end="")
    V : {int -> real}
    result : {int -> real}  (the destination)
    for <k1, v2> in V:
      result[k1] += v2 * v2
    prune result
    """
    if not isinstance(dps, bool) or not (wrt is None or isinstance(wrt, str)) or not (
            formats is None or isinstance(formats, dict)):
        raise DataError("wrt=, formats= and dps= are loop_nest's options (a name, a dict of "
                        "formats, True or False): give an input of one of these names by "
                        "position")
    prog = api.program_of(program)
    compiled = compile_(prog, wrt, formats, dps=dps)
    given = bind(prog, args, inputs)
    read = compiled.read(given)
    return show_loops(compiled.lowering(read, compiled.formats_of(read)).low)

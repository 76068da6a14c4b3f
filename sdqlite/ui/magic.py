"""SDQLite in Jupyter and IPython: ``%load_ext sdqlite``, then an ``%%sdql`` cell.

::

    %%sdql [-o NAME] [--grad X] [--backend interp|cpp] [--anf | --fad | --opt | --cpp]
           [--format NAME=FORMAT]
    x : {dense_int -> real}
    sum(<i, a> in x) a * a

The cell is a program (declarations, then an expression).  Its inputs are the notebook's
variables of the same names: numpy arrays, ``scipy.sparse`` matrices, numbers or SDQLite
values, read as ``sdqlite.evaluate`` reads them.  The cell shows the value (a sparse one
as a small table of its stored entries), or with ``--grad X`` the gradient w.r.t. ``X``,
or the program in ANF (``--anf``), its scalar forward mode ``F[e]`` (``--fad``), the
optimized program (``--opt``) or the generated C++ (``--cpp``); ``-o NAME`` also puts the
result into the variable ``NAME`` (numpy or scipy where the shape allows, as
``sdqlite.evaluate`` gives it; the text of a program).  An error in
the program or the data shows as ``<cell>:line:col: error: …`` with the line and a caret,
never a traceback.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterator, Mapping
from typing import Any, cast

import scipy.sparse
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import Code

from codegen.api import compile as compile_
from sdqlite.ad.anf import anf
from sdqlite.ad.fad import fad, tangent_context
from sdqlite.ad.gradient import expand
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import DataError, SDQLiteError, format_error, internal_error
from sdqlite.opt.pipeline import as_source
from sdqlite.syntax.ast import free_vars
from sdqlite.syntax.parser import Program, parse_program
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import REAL
from sdqlite.ui import api
from semantics.display import show_value
from semantics.values import DenseArray, entries

CELL = "<cell>"  # the file name errors give
ROWS = 20  # entries a table shows before it says how many it left out


class CellError(Exception):
    """An error in a cell, shown as its located message alone: IPython prints what
    ``_render_traceback_`` gives instead of a traceback."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def _render_traceback_(self) -> list[str]:
        return self.text.splitlines()


@magics_class
class SDQLiteMagics(Magics):
    @magic_arguments()
    @argument("-o", "--output", metavar="NAME",
              help="also put the result into the notebook variable NAME")
    @argument("--grad", metavar="X", help="the gradient w.r.t. the input X")
    @argument("--backend", choices=api.BACKENDS, default="interp",
              help="interp (the reference interpreter) or cpp (the optimized C++)")
    @argument("--anf", action="store_true", help="show the program in ANF (§5.1)")
    @argument("--fad", action="store_true",
              help="show scalar forward mode F[e] of its ANF (Fig. forward_diffrules)")
    @argument("--opt", action="store_true", help="show the optimized program")
    @argument("--cpp", action="store_true", help="show the generated C++")
    @argument("--format", action="append", default=[], metavar="NAME=FORMAT",
              help="a storage format for an input (--opt and --cpp)")
    @cell_magic
    def sdql(self, line: str, cell: str) -> Any:
        """Run the cell as an SDQLite program on the notebook's variables."""
        args = parse_argstring(self.sdql, line)
        try:
            shown, result = run_cell(cell, self.shell.user_ns if self.shell else {}, args)
        except SDQLiteError as err:
            raise CellError(format_error(err, cell, err.file or CELL)) from None
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as err:  # a bug of ours: one line, as the CLI says it
            if os.environ.get("SDQLITE_DEBUG"):
                raise
            raise CellError(internal_error(err)) from None
        if args.output and self.shell is not None:
            self.shell.user_ns[args.output] = result
        return shown


def run_cell(cell: str, namespace: Mapping[str, Any], args: Any) -> tuple[Any, Any]:
    """What the cell shows, and its result for ``-o``."""
    if args.output is not None and not args.output.isidentifier():
        raise DataError(f"-o {args.output}: give a Python variable name")
    shows = [o for o in ("anf", "fad", "opt", "cpp") if getattr(args, o)]
    if len(shows) > 1:
        raise DataError(f"--{shows[0]} and --{shows[1]}: choose one")
    prog = parse_program(cell)
    if prog.expr is None:
        raise DataError("the cell has no expression to run" + (
            " (only input declarations)" if prog.decls else ""))
    formats = _formats(args.format)
    if formats and not (args.opt or args.cpp):
        raise DataError("--format chooses storage for --opt and --cpp only")
    # a program to show needs no data: declared inputs without a variable keep their type
    given = _inputs(prog, namespace, args.grad, data=not shows)
    if shows:
        return _shown_program(prog, given, args.grad, formats, shows[0])
    result = (api.value_of(prog, given, args.backend) if args.grad is None
              else api.gradient_of(prog, args.grad, given, args.backend))
    shown = Shown(result) if scipy.sparse.issparse(result) or isinstance(
        result, dict | DenseArray) else result  # numbers and numpy arrays show themselves
    return shown, result


def _inputs(prog: Program, namespace: Mapping[str, Any], wrt: str | None, data: bool
            ) -> dict[str, Any]:
    """The program's inputs, from the notebook's variables of the same names: all of
    them (``data``), or those there are, when every other one is declared."""
    assert prog.expr is not None
    declared = {d.name for d in prog.decls}
    used = free_vars(prog.expr)
    if wrt is not None and wrt not in declared | used:
        raise DataError(f"--grad {wrt}: the program has no input {wrt}")
    needed = used | ({wrt} if wrt else set())
    missing = sorted(x for x in needed if x not in namespace and (data or x not in declared))
    if missing:
        raise DataError(f"no notebook variable for input {', '.join(missing)}: set "
                        f"{missing[0]} = … (a numpy array, a scipy matrix, a number or a "
                        "value) in a Python cell first" + ("" if data else
                                                           f", or declare {missing[0]} : TYPE"))
    if not data and any(x not in namespace for x in needed):
        return {}  # the declarations alone
    return {x: namespace[x] for x in sorted(needed)}


def _shown_program(prog: Program, given: Mapping[str, Any], wrt: str | None,
                   formats: dict[str, str], show_: str) -> tuple[Code, str]:
    """The program in ANF, F[e] of it, the optimized program or the generated C++, for
    the inputs' data (their types, kinds and formats) or, without data, as declared."""
    compiled = compile_(prog, wrt, formats)
    if show_ == "cpp":
        text = compiled.cpp(dict(given) if given else None)
        return Code(text, language="cpp"), text
    ctx = {d.name: d.type for d in prog.decls}
    if given:
        ctx |= {x: a.type for x, a in compiled.read(given).items()}
    if show_ == "opt":
        stages = api.optimized(prog, ctx, wrt, formats)
        text = as_source(stages[-1].program, stages[-1].ctx or ctx)
        return Code(text, language="sdql"), text
    assert prog.expr is not None
    elab, _ = typecheck(expand(typecheck(prog.expr, ctx)[0], ctx), ctx)
    e = anf(elab)
    if show_ == "fad":  # each input x's tangent is x' (Fig. fig:forward_diffrules)
        e, names = fad(e, ctx)
        typecheck(e, tangent_context(ctx, REAL, names))  # (F[e] is well typed: Lemma 1)
    text = show(e)
    return Code(text, language="sdql"), text


def _formats(specs: list[str]) -> dict[str, str]:
    out = {}
    for s in specs:
        name, sep, fmt = s.partition("=")
        if not sep or not name.strip() or not fmt.strip():
            raise DataError(f"expected --format NAME=FORMAT, found {s!r}")
        out[name.strip()] = fmt.strip()
    return out


# ---- showing a result ----------------------------------------------------------------------


class Shown:
    """A sparse result as the cell shows it: a table of its stored entries (keys, then
    value) in HTML, the paper's notation (a value) or a list of entries (a scipy matrix)
    as text."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        v: Any = self.value
        if _sparse(v):
            head = f"{type(v).__name__} of shape {v.shape}, {v.nnz} stored entries"
            return "\n".join([head, *(f"  {k} -> {x}" for k, x in _rows(v))])
        return show_value(v)

    def _repr_html_(self) -> str:
        v: Any = self.value
        rows = list(_rows(v))
        if not rows:
            return "<code>{}</code>: no stored entries (a dictionary never stores a zero)"
        depth = max((len(k) for k, _ in rows), default=1)
        head = "".join(f"<th>key {i + 1}</th>" for i in range(depth)) + "<th>value</th>"
        body = "".join(
            "<tr>" + "".join(f"<td>{k}</td>" for k in keys) + f"<td>{x}</td></tr>"
            for keys, x in rows[:ROWS])
        more = len(rows) - ROWS
        note = (f"<tr><td colspan='{depth + 1}'>… {more} more entries</td></tr>"
                if more > 0 else "")
        what = (f"{type(v).__name__} of shape {v.shape}" if _sparse(v)
                else "a dictionary" if isinstance(v, dict) else "a dense array")
        caption = f"{html.escape(what)}: {len(rows)} stored entries"
        return (f"<table><caption>{caption}</caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}{note}</tbody></table>")


def _sparse(v: object) -> bool:
    return bool(scipy.sparse.issparse(v))  # (a bool: issparse narrows the type)


def _rows(v: Any) -> Iterator[tuple[tuple[int, ...], Any]]:
    """The stored entries of a value or a scipy matrix, keys in order."""
    if scipy.sparse.issparse(v):
        m = scipy.sparse.coo_array(cast(Any, v))
        m.sum_duplicates()
        for *at, x in sorted(zip(*m.coords, m.data, strict=True)):
            yield tuple(int(k) for k in at), float(x)
        return
    if isinstance(v, dict | DenseArray):
        for k, inner in entries(v):
            if isinstance(inner, dict | DenseArray):
                for keys, x in _rows(inner):
                    yield (k, *keys), x
            else:
                yield (k,), inner
        return
    yield (), v


def load(shell: InteractiveShell) -> None:
    """``%load_ext sdqlite``."""
    shell.register_magics(SDQLiteMagics)

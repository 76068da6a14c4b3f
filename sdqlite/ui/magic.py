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
import itertools
import keyword
import os
from collections.abc import Iterator, Mapping
from typing import Any

import scipy.sparse
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import Code

from codegen import inputs as I
from codegen.api import compile as compile_
from sdqlite.ad.anf import anf
from sdqlite.ad.gradient import expand
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import DataError, SDQLiteError, format_error, internal_error
from sdqlite.opt.pipeline import as_source
from sdqlite.syntax.ast import free_vars
from sdqlite.syntax.parser import Program, parse_program
from sdqlite.syntax.printer import show
from sdqlite.ui import api
from sdqlite.ui.session import forward_mode, read_formats
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
        try:
            args = parse_argstring(self.sdql, line)
        except ValueError as err:  # (shlex: an unclosed quote)
            raise UsageError(f"%%sdql {line}: {err}") from None
        namespace = self.shell.user_ns if self.shell is not None else {}
        try:
            shown, result = run_cell(cell, namespace, args)
        except SDQLiteError as err:
            raise CellError(format_error(err, cell, err.file or CELL)) from None
        except Exception as err:  # a bug of ours: one line, as the CLI says it
            if os.environ.get("SDQLITE_DEBUG"):
                raise
            raise CellError(internal_error(err)) from None
        if args.output is not None and self.shell is not None:
            self.shell.user_ns[args.output] = result
        return shown


SHOWS = ("anf", "fad", "opt", "cpp")  # the options that show a program


def run_cell(cell: str, namespace: Mapping[str, Any], args: Any) -> tuple[Any, Any]:
    """What the cell shows, and its result for ``-o``."""
    if args.output is not None and (not args.output.isidentifier()
                                    or keyword.iskeyword(args.output)):
        raise DataError(f"-o {args.output}: give a Python variable name")
    shows = [o for o in SHOWS if getattr(args, o)]
    if len(shows) > 1:
        raise DataError(f"--{shows[0]} and --{shows[1]}: choose one")
    if shows and args.backend != "interp":
        raise DataError(f"--backend chooses what computes the value; --{shows[0]} shows a "
                        "program and computes nothing")
    if args.grad is not None and shows and shows[0] in ("anf", "fad"):
        raise DataError(f"--{shows[0]} shows the program before differentiation; the "
                        "gradient's program is --opt --grad X (or --cpp --grad X)")
    formats = read_formats(args.format)
    if formats and not (args.opt or args.cpp):
        raise DataError("--format chooses storage for --opt and --cpp only")
    prog = parse_program(cell)
    if prog.expr is None:
        raise DataError("the cell has no expression to run" + (
            " (only input declarations)" if prog.decls else ""))
    if shows:
        return _shown_program(prog, namespace, args.grad, formats, shows[0])
    try:
        given = _inputs(prog, namespace, _needed(prog, args.grad))
        result = (api.value_of(prog, given, args.backend) if args.grad is None
                  else api.gradient_of(prog, args.grad, given, args.backend))
    except DataError as err:
        raise _at_declaration(err, prog) from None
    shown = Shown(result) if scipy.sparse.issparse(result) or isinstance(
        result, dict | DenseArray) else result  # numbers and numpy arrays show themselves
    return shown, result


def _needed(prog: Program, wrt: str | None) -> set[str]:
    """The inputs a run reads: the expression's free variables, and ``wrt``."""
    assert prog.expr is not None
    used = set(free_vars(prog.expr))
    if wrt is not None and wrt not in used | {d.name for d in prog.decls}:
        raise DataError(f"--grad {wrt}: the program has no input {wrt}")
    return used | ({wrt} if wrt is not None else set())


def _inputs(prog: Program, namespace: Mapping[str, Any], names: set[str]
            ) -> dict[str, Any]:
    """The notebook's variables of these names (the inputs they stand for)."""
    missing = sorted(x for x in names if x not in namespace)
    if missing:
        declared = {d.name for d in prog.decls}
        hint = "" if missing[0] in declared else f", or declare {missing[0]} : TYPE"
        raise DataError(f"no notebook variable for input {', '.join(missing)}: set "
                        f"{missing[0]} = … (a numpy array, a scipy matrix, a number or a "
                        f"value) in a Python cell first{hint}")
    return {x: namespace[x] for x in sorted(names)}


def _at_declaration(err: DataError, prog: Program) -> DataError:
    """Data that do not fit an input's declaration: the error at that declaration."""
    if err.span is None:
        for d in prog.decls:
            if err.message.startswith((f"input {d.name}:", f"input {d.name} ")):
                err.span = d.span
                break
    return err


def _shown_program(prog: Program, namespace: Mapping[str, Any], wrt: str | None,
                   formats: dict[str, str], show_: str) -> tuple[Code, str]:
    """The program in ANF, F[e] of it, the optimized program or the generated C++.
    Declared inputs keep their declared types (a notebook variable of the same name is
    not read); an undeclared input is typed by its variable.  The C++ is for the
    variables' kinds and formats when the notebook has every input, else for the
    declared formats."""
    needed = _needed(prog, wrt)
    declared = {d.name: d.type for d in prog.decls}
    compiled = compile_(prog, wrt, formats)
    try:
        if show_ == "cpp":
            whole = all(x in namespace for x in needed)
            text = compiled.cpp(_inputs(prog, namespace, needed) if whole else None)
            return Code(text, language="cpp"), text
        ctx = dict(declared)
        for x, value in _inputs(prog, namespace, needed - set(declared)).items():
            ctx[x] = I.read(x, value, None).type
    except DataError as err:
        raise _at_declaration(err, prog) from None
    if show_ == "opt":
        stages = api.optimized(prog, ctx, wrt, formats)
        text = as_source(stages[-1].program, stages[-1].ctx or ctx)
        return Code(text, language="sdql"), text
    assert prog.expr is not None
    elab = expand(typecheck(prog.expr, ctx)[0], ctx)
    text = show(forward_mode(elab, ctx)[0] if show_ == "fad" else anf(elab))
    return Code(text, language="sdql"), text


# ---- showing a result ----------------------------------------------------------------------


class Shown:
    """A sparse result as the cell shows it: the first ``ROWS`` of its stored entries in
    key order (keys, then value), as an HTML table or as text, and how many there are."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def _head(self) -> tuple[str, list[tuple[tuple[int, ...], Any]], int]:
        v: Any = self.value
        rows = list(itertools.islice(_rows(v), ROWS))
        if _sparse(v):
            return f"{type(v).__name__} of shape {v.shape}", rows, _canonical(v).nnz
        count = sum(1 for _ in _rows(v))
        return ("a dictionary" if isinstance(v, dict) else "a dense array"), rows, count

    def __repr__(self) -> str:
        what, rows, count = self._head()
        if not _sparse(self.value) and count <= ROWS:
            return show_value(self.value)  # the paper's notation, whole
        more = [f"  … {count - len(rows)} more entries"] if count > len(rows) else []
        return "\n".join([f"{what}, {count} stored entries",
                          *(f"  {k} -> {x}" for k, x in rows), *more])

    def _repr_html_(self) -> str:
        what, rows, count = self._head()
        if not count:
            return "<code>{}</code>: no stored entries (a dictionary never stores a zero)"
        depth = max(len(k) for k, _ in rows)
        head = "".join(f"<th>key {i + 1}</th>" for i in range(depth)) + "<th>value</th>"
        body = "".join(
            "<tr>" + "".join(f"<td>{k}</td>" for k in keys) + f"<td>{x}</td></tr>"
            for keys, x in rows)
        more = count - len(rows)
        note = (f"<tr><td colspan='{depth + 1}'>… {more} more entries</td></tr>"
                if more > 0 else "")
        caption = f"{html.escape(what)}: {count} stored entries"
        return (f"<table><caption>{caption}</caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}{note}</tbody></table>")


def _sparse(v: object) -> bool:
    return bool(scipy.sparse.issparse(v))  # (a bool: issparse narrows the type)


def _canonical(v: Any) -> Any:
    """A scipy matrix or 1-d array with its entries summed and in key order."""
    m = scipy.sparse.csr_array(v) if v.ndim == 2 else scipy.sparse.coo_array(v)
    m.sum_duplicates()
    return m


def _rows(v: Any) -> Iterator[tuple[tuple[int, ...], Any]]:
    """The stored entries of a value or a scipy matrix, keys in order, one at a time."""
    if _sparse(v):
        m = _canonical(v)
        if m.ndim == 1:
            yield from (((int(k),), float(x)) for k, x in zip(m.coords[0], m.data, strict=True))
            return
        for i in range(m.shape[0]):
            for p in range(m.indptr[i], m.indptr[i + 1]):
                yield (i, int(m.indices[p])), float(m.data[p])
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

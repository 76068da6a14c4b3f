"""The command line: ``sdqlite repl | check | eval | grad | opt | cpp | examples``.

Values go to stdout, diagnostics to stderr as ``file:line:col: error: …`` with the
source line and a caret.  No Python traceback reaches the user (set SDQLITE_DEBUG=1 to
see one for an internal error).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdqlite.errors import DataError, SDQLiteError, SDQLTypeError, format_error, internal_error
from sdqlite.opt.pipeline import Limits
from sdqlite.paths import read_source
from sdqlite.syntax.ast import free_vars
from sdqlite.syntax.parser import Program, parse_program
from sdqlite.ui.session import (
    HELP,
    declared_types,
    read_formats,
    read_input,
    read_raw_input,
)
from semantics.run import Input

if TYPE_CHECKING:
    from codegen.api import Compiled

EXIT_ERROR, EXIT_INTERNAL = 1, 70


def _source(args: argparse.Namespace) -> tuple[str, str]:
    """The program's text and name; kept on ``args`` so that errors show its lines (stdin
    can be read only once)."""
    text = sys.stdin.read() if args.file == "-" else read_source(args.file)
    args.source = text
    return text, "<stdin>" if args.file == "-" else args.file


def _inputs(program: Program, specs: Sequence[str]) -> dict[str, Input]:
    declared = declared_types(program)
    _known(program, specs)
    return dict(read_input(s, declared.get(s.partition("=")[0].strip())) for s in specs)


def _known(program: Program, specs: Sequence[str]) -> None:
    """Each --input names an input of the program (declared or read), once."""
    names = [s.partition("=")[0].strip() for s in specs]
    inputs = set(declared_types(program)) | (free_vars(program.expr) if program.expr else set())
    for i, name in enumerate(names):
        if name in names[:i]:
            raise DataError(f"--input {name} is given twice")
        if name and name not in inputs:
            known = ", ".join(sorted(inputs)) or "none"
            raise DataError(f"--input {name}: the program has no input {name} (inputs: {known})")


def cmd_check(args: argparse.Namespace) -> int:
    from semantics.run import check_program, context

    text, name = _source(args)
    prog = parse_program(text)
    if prog.expr is None:
        raise SDQLTypeError("nothing to check: the program is empty" if not prog.decls else
                            "nothing to check: the program has declarations (NAME : TYPE) "
                            "but no expression after them")
    inputs = _inputs(prog, args.input)
    _, t = check_program(prog, context(prog, inputs))
    print(f"{name}: {t}")
    return 0


def _raw_inputs(program: Program, specs: Sequence[str]) -> dict[str, object]:
    declared = declared_types(program)
    _known(program, specs)
    return dict(read_raw_input(s, declared.get(s.partition("=")[0].strip())) for s in specs)


def _options(args: argparse.Namespace, wrt: str | None) -> tuple[tuple[str, Any], ...]:
    """The compile options the command line gives (``sdqlite.ui.api.Options``)."""
    stem = Path(args.file).stem if args.file != "-" else "stdin"
    return (("formats", tuple(sorted(read_formats(args.format).items()))),
            ("optimize", not args.no_opt), ("normalize", not args.no_normalize),
            ("dps", not args.no_dps), ("name", stem + (f"_wrt_{wrt}" if wrt else "")),
            ("threads", args.threads))


def _compiled(args: argparse.Namespace, prog: Program, wrt: str | None) -> Compiled:
    from codegen.api import compile as compile_

    opts = dict(_options(args, wrt))
    return compile_(prog, wrt, dict(opts.pop("formats")), **opts, output="value")


def _written(args: argparse.Namespace, prog: Program, wrt: str | None) -> int:
    """``--output FILE``: the result as numpy or scipy (as ``sdqlite.evaluate`` and
    ``sdqlite.grad`` give it), written to FILE; what was written goes to stderr."""
    from sdqlite.ui.api import gradient_of, value_of
    from semantics.datafiles import write_data

    given = _raw_inputs(prog, args.input)
    options = _options(args, wrt)
    result = (value_of(prog, given, args.backend, options) if wrt is None
              else gradient_of(prog, wrt, given, args.backend, options))
    print(f"wrote {write_data(args.output, result)}", file=sys.stderr)
    return 0


def _run_compiled(args: argparse.Namespace, prog: Program, wrt: str | None) -> int:
    from semantics.display import show_value

    compiled = _compiled(args, prog, wrt)
    spec, value = compiled.invoke(compiled.read(_raw_inputs(prog, args.input)))
    if getattr(args, "program", False):
        from sdqlite.syntax.printer import show

        print(show(spec.program), file=sys.stderr)
    print(show_value(value))
    if args.type:
        print(f": {spec.kernel.result}", file=sys.stderr)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from semantics.display import show_value
    from semantics.run import run

    text, _ = _source(args)
    prog = parse_program(text)
    if args.output:
        return _written(args, prog, None)
    if args.backend == "cpp":
        return _run_compiled(args, prog, None)
    result = run(prog, _inputs(prog, args.input))
    print(show_value(result.value))
    if args.type:
        print(f": {result.type}", file=sys.stderr)
    return 0


def cmd_cpp(args: argparse.Namespace) -> int:
    text, _ = _source(args)
    prog = parse_program(text)
    compiled = _compiled(args, prog, args.wrt)
    print(compiled.cpp(_raw_inputs(prog, args.input) if args.input else None), end="")
    return 0


def cmd_grad(args: argparse.Namespace) -> int:
    from sdqlite.ad.gradient import gradient
    from sdqlite.check.typecheck import typecheck
    from sdqlite.syntax.printer import show
    from semantics.display import show_value
    from semantics.interp import evaluate
    from semantics.run import check_program, context

    text, _ = _source(args)
    prog = parse_program(text)
    if args.output:
        return _written(args, prog, args.wrt)
    if args.backend == "cpp":
        return _run_compiled(args, prog, args.wrt)
    inputs = _inputs(prog, args.input)
    ctx = context(prog, inputs)
    elab, _ = check_program(prog, ctx)  # report errors of the program itself first
    assert prog.expr is not None
    try:  # in ANF first, as the pipeline does: the expansion stays linear in the program
        expansion = gradient(elab, args.wrt, ctx, share=True)
    except SDQLiteError as err:
        raise SDQLTypeError(err.message, err.span or prog.expr.span) from None
    expanded, t = typecheck(expansion, ctx)
    if args.program:
        print(show(expanded), file=sys.stderr)
    missing = sorted(n for n in free_vars(expanded) if n not in inputs)
    if missing:
        raise DataError(f"no data for input {', '.join(missing)} (give --input NAME=PATH)")
    print(show_value(evaluate(expanded, {n: i.value for n, i in inputs.items()})))
    if args.type:
        print(f": {t}", file=sys.stderr)
    return 0


def cmd_opt(args: argparse.Namespace) -> int:
    from sdqlite.opt.pipeline import as_source, describe
    from sdqlite.ui.api import optimized
    from semantics.run import context

    text, _ = _source(args)
    prog = parse_program(text)
    ctx = context(prog, _inputs(prog, args.input))
    stages = optimized(prog, ctx, args.wrt, read_formats(args.format),
                       Limits(args.iter_limit, args.node_limit, args.time_limit))
    if args.stages:
        print(describe(stages), file=sys.stderr)
    else:
        for s in stages:
            report = ", ".join(f"{k} {v}" for k, v in s.report.items() if k != "rules fired")
            print(f"{s.name}: {s.seconds:.3f} s" + (f"; {report}" if report else ""),
                  file=sys.stderr)
    print(as_source(stages[-1].program, stages[-1].ctx or ctx), end="")
    return 0


def cmd_repl(args: argparse.Namespace) -> int:
    from sdqlite.ui.repl import repl

    return repl()


def cmd_examples(args: argparse.Namespace) -> int:
    from paper_examples.__main__ import main as examples

    return examples(args.names)


def _at_least(low: float, kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, found {text}")
        return value
    return parse


class _Parser(argparse.ArgumentParser):
    """A parser whose help may end with text made only when help is asked for."""

    def __init__(self, *args: Any, more_help: Callable[[], str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.more_help = more_help

    def format_help(self) -> str:
        text = super().format_help()
        return f"{text}\n{self.more_help()}\n" if self.more_help else text


def _version() -> str:
    try:
        return metadata.version("sdqlite")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "(not installed)"


def _example_names() -> str:
    from paper_examples.__main__ import describe  # imported only for --help: sympy is slow

    return describe()


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="sdqlite",
        description="SDQLite: semi-ring dictionaries, their semantics and differentiation "
                    "(the paper '∇SD: Differentiable Programming for Sparse Tensors').")
    ap.add_argument("-V", "--version", action="version", version=f"%(prog)s {_version()}")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
    inp = {"action": "append", "default": [], "metavar": "NAME=PATH|VALUE",
           "help": "data for an input: a .npy/.mtx/.npz file or a literal such as "
                   "'{0 -> 1.5}'"}
    out = {"metavar": "FILE",
           "help": "write the result to FILE instead of printing it: .npy (numpy), .npz "
                   "(scipy.sparse.save_npz) or .mtx (Matrix Market), as sdqlite.evaluate "
                   "and sdqlite.grad return it"}

    def backend_options(p: argparse.ArgumentParser, choose: bool = True) -> None:
        if choose:
            p.add_argument("--backend", choices=["interp", "cpp"], default="interp",
                           help="the reference interpreter (default) or compiled C++ (the "
                                "optimizer, storage composition, DPS)")
        p.add_argument("--format", action="append", default=[], metavar="NAME=FORMAT",
                       help="the storage format of an input for the C++ backend (csr, csc, "
                            "coo, dense, dense_col, csf, dict); defaults follow the data: "
                            ".mtx/.npz -> csr (coo for a vector), .npy -> dense, literals -> dict")
        p.add_argument("--no-opt", action="store_true",
                       help="C++ backend: compile the program as the interpreter runs it "
                            "(no saturation or sparsity propagation)")
        p.add_argument("--no-normalize", action="store_true",
                       help="C++ backend: leave out multiplication normalization")
        p.add_argument("--no-dps", action="store_true",
                       help="C++ backend: build every intermediate dictionary (no "
                            "destination-passing style)")
        p.add_argument("--threads", type=_at_least(1, int), default=1, metavar="N",
                       help="C++ backend: run the kernel's outer loops (and the check of "
                            "large sparse inputs) on N threads; the result depends on N, "
                            "never on scheduling (default 1)")

    p = sub.add_parser("check", help="type-check a source file")
    p.add_argument("file", help="source file ('-' for stdin)")
    p.add_argument("--input", "-i", **inp)  # type: ignore[arg-type]
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("eval", help="evaluate a source file; the value goes to stdout")
    p.add_argument("file", help="source file ('-' for stdin)")
    p.add_argument("--input", "-i", **inp)  # type: ignore[arg-type]
    p.add_argument("--type", action="store_true", help="also print the type (on stderr)")
    p.add_argument("--output", "-o", **out)  # type: ignore[arg-type]
    backend_options(p)
    p.set_defaults(run=cmd_eval)

    p = sub.add_parser(
        "grad", help="the gradient of a program w.r.t. an input (output indices first, then "
                     "the input's); the value goes to stdout")
    p.add_argument("file", help="source file ('-' for stdin)")
    p.add_argument("--wrt", required=True, metavar="X", help="the input to differentiate by")
    p.add_argument("--input", "-i", **inp)  # type: ignore[arg-type]
    p.add_argument("--program", action="store_true",
                   help="also print the expanded program (on stderr)")
    p.add_argument("--type", action="store_true", help="also print the type (on stderr)")
    p.add_argument("--output", "-o", **out)  # type: ignore[arg-type]
    backend_options(p)
    p.set_defaults(run=cmd_grad)

    p = sub.add_parser(
        "opt", help="the pipeline of Fig. arch (saturation, ANF, AD, sparsity propagation, "
                    "saturation, normalization); the final program goes to stdout")
    p.add_argument("file", help="source file ('-' for stdin)")
    p.add_argument("--wrt", metavar="X", help="differentiate w.r.t. this input")
    p.add_argument("--input", "-i", **inp)  # type: ignore[arg-type]
    p.add_argument("--stages", action="store_true", help="print every stage (on stderr)")
    p.add_argument("--format", action="append", default=[], metavar="NAME=FORMAT",
                   help="compose an input with a storage format (csr, coo, dense, ...)")
    p.add_argument("--iter-limit", type=_at_least(0, int), default=Limits.iter_limit,
                   help="iterations per saturation (default %(default)s)")
    p.add_argument("--node-limit", type=_at_least(1, int), default=Limits.node_limit,
                   help="e-graph nodes per saturation (default %(default)s)")
    p.add_argument("--time-limit", type=_at_least(0, float), default=Limits.time_limit,
                   help="seconds per saturation (default %(default)s)")
    p.set_defaults(run=cmd_opt)

    p = sub.add_parser("cpp", help="print the C++ the backend generates for a program "
                                   "(differentiated w.r.t. --wrt X when given)")
    p.add_argument("file", help="source file ('-' for stdin)")
    p.add_argument("--wrt", metavar="X", help="differentiate w.r.t. this input")
    p.add_argument("--input", "-i", **inp)  # type: ignore[arg-type]
    backend_options(p, choose=False)
    p.set_defaults(run=cmd_cpp)

    p = sub.add_parser("repl", help="the interactive read-eval-print loop",
                       description=f"The interactive read-eval-print loop.\n\n{HELP}",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(run=cmd_repl)

    p = sub.add_parser("examples", help="run the paper's examples against their expectations",
                       more_help=_example_names)
    p.add_argument("names", nargs="*", metavar="NAME", help="run only these (listed below)")
    p.set_defaults(run=cmd_examples)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except SDQLiteError as err:
        name = getattr(args, "file", None)
        name = "<stdin>" if name == "-" else name
        print(format_error(err, getattr(args, "source", None),
                           name if err.span is not None and name else "sdqlite"),
              file=sys.stderr)
        return EXIT_ERROR
    except (RecursionError, MemoryError) as err:  # a limit of this machine, not a bug
        name = getattr(args, "file", None)
        what = ("nested too deeply to process (Python's recursion limit)"
                if isinstance(err, RecursionError) else "too large: out of memory")
        print(f"{'<stdin>' if name == '-' else name or 'sdqlite'}: error: the input is {what}",
              file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`sdqlite eval f | head`)
        sys.stderr.close()
        return 0
    except Exception as err:  # an internal error: say so plainly, no traceback
        if os.environ.get("SDQLITE_DEBUG"):
            raise
        print(internal_error(err), file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())

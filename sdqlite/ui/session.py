"""What the front doors share: inputs given as files or literals, and a REPL session."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from codegen.api import compile as compile_
from sdqlite.ad.anf import anf
from sdqlite.ad.fad import fad, tangent_context
from sdqlite.ad.gradient import expand
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import DataError, ParseError, SDQLiteError
from sdqlite.opt.pipeline import describe, pipeline
from sdqlite.paths import read_source
from sdqlite.storage.formats import declared_formats, format_names, formats_for
from sdqlite.syntax.ast import Expr, Gradient, free_vars
from sdqlite.syntax.parser import HINTS, Decl, Program, keywords, parse_program, parse_type
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import REAL, Type
from semantics.convert import load
from semantics.datafiles import names_data, read_data
from semantics.display import read_value, show_value, summary
from semantics.extents import check_extents
from semantics.interp import evaluate
from semantics.run import Input, context
from semantics.values import Value

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*'*")  # as NAME in grammar.lark


def read_input(spec: str, declared: Type | None = None, option: str = "--input"
               ) -> tuple[str, Input]:
    """``NAME=PATH`` (a data file, ``semantics/datafiles.py``) or ``NAME=VALUE`` (a literal
    such as ``{0 -> 1.5}``; checked against the declared type when there is one).  Errors
    name the ``option`` that gave it (the REPL's is ``:input``)."""
    name, rhs = _split(spec, option)
    if names_data(rhs):
        value, t = load(rhs, declared)
        return name, Input(value, t)
    try:
        value, t = read_value(rhs, declared)
    except SDQLiteError as err:
        raise DataError(f"{option} {name}: {err.message}", None) from None
    return name, Input(value, t)


def read_raw_input(spec: str, declared: Type | None = None) -> tuple[str, Any]:
    """``NAME=PATH|VALUE`` for the compiled backend: a data file as the numpy or
    ``scipy.sparse`` array it holds (read and checked as for the interpreter), a literal
    as a value."""
    name, rhs = _split(spec)
    if names_data(rhs):
        return name, read_data(rhs, declared)
    return name, read_input(spec, declared)[1].value


def _split(spec: str, option: str = "--input") -> tuple[str, str]:
    name, sep, rhs = spec.partition("=")
    name, rhs = name.strip(), rhs.strip()
    if not sep or not IDENT.fullmatch(name):
        eq = " = " if option == ":input" else "="
        raise DataError(f"{option}: expected NAME{eq}PATH or NAME{eq}VALUE, found {spec!r}")
    return name, rhs


def forward_mode(elab: Expr, ctx: dict[str, Type]) -> tuple[Expr, Type]:
    """Scalar forward mode F[e] of an elaborated expression's ANF (Fig.
    fig:forward_diffrules; each input x's tangent is x'), and its type (``:fad``,
    ``%%sdql --fad``)."""
    tangent, names = fad(anf(elab), ctx)
    return tangent, typecheck(tangent, tangent_context(ctx, REAL, names))[1]


def read_formats(specs: Sequence[str]) -> dict[str, str]:
    """``--format NAME=FORMAT`` options (the command line's, ``%%sdql``'s) by input."""
    out = {}
    for s in specs:
        name, sep, fmt = s.partition("=")
        if not sep or not name.strip() or not fmt.strip():
            raise DataError(f"expected --format NAME=FORMAT, found {s!r}")
        out[name.strip()] = fmt.strip()
    return out


def declared_types(program: Program) -> dict[str, Type]:
    return {d.name: d.type for d in program.decls}


#: SDQLite's constructs (Fig. fig:langs and the derived forms): each with an example that
#: parses (a test checks it) and a note, for :help syntax
SYNTAX: tuple[tuple[str, str, str], ...] = (
    ("NAME : TYPE", "x : {int -> real} @coo", "a declaration, with a storage format"),
    ("TYPE", "{dense_int[n] -> real}", "real int bool {int -> D} {dense_int -> D} tensor 2"),
    ("a + b, a - b, a * b, -a", "x * x - 2.0 * x", "no /: a * inv(b)"),
    ("a = b", "i = j", "equality; not (i = j) for inequality"),
    ("if c then e", "if i = j then 1.0", "no else: zero when c is false"),
    ("let x = e in body", "let y = x * x in y + y", ""),
    ("op(e)", "exp(sin(x))", "sin cos exp log sqrt tanh inv (inv(x) is 1 / x)"),
    ("sum(<k, v> in d) body", "sum(<i, a> in V) a * a", "the sum over d's entries"),
    ("{k -> v, ...}, {}", "{0 -> 1.5, 3 -> 2.0}", "a dictionary; {} is empty"),
    ("d(k)", "V(3)", "a lookup: zero where d has no key k"),
    ("[a, ...], d(lo:hi), (lo:hi)", "[1.0, 2.0](0:1)", "dense arrays, sub-arrays, ranges"),
    ("unique(k)", "sum(<_, i> in (0:3)) {unique(i) -> 1.0}",
     "a key promised distinct in its sum (storage formats)"),
    ("zero[T], onehot[T] k", "onehot[{int -> real}] 2", ""),
    ("gradient e x", "gradient (x * x) x", "Fig. fig:api; :grad EXPR X in the REPL"),
)

SHOWN = 20  # numbers a value prints in the REPL before it is summarised (:all shows it whole)

HELP = f"""\
Enter an SDQLite expression to evaluate it, or a declaration `NAME : TYPE`.
  :input NAME = VALUE | PATH   bind an input to a literal value or a .npy/.mtx/.npz file
  :type EXPR                   show the type of an expression
  :load FILE                   read a source file (its declarations, then its expression)
  :anf EXPR                    show the ANF of an expression (§5.1)
  :fad EXPR                    show scalar forward mode F[e] of its ANF (tangents x')
  :grad EXPR X                 expand `gradient EXPR X` (Fig. api), show it and its value
  :opt EXPR                    the optimizer's stages (Fig. arch) on EXPR
  :opt EXPR wrt X              ... differentiating EXPR w.r.t. X
  :cpp EXPR [wrt X]            the C++ the backend generates (declared inputs, as hash maps)
  :inputs                      list the declared inputs and their values
  :all                         the last value in full (a large value prints its first
                               {SHOWN} numbers, then how many entries each layer has)
  :help                        this text (:help syntax: the constructs, and ^, /, == …)
  :quit, quit, exit            leave (also Ctrl-D)
An expression or declaration goes on over further lines while it is incomplete; an
empty line ends it (if it is still incomplete, the error says what is missing).
A command (:...) is one line."""


COMMANDS = tuple(sorted(set(re.findall(r"^  (:\w+)", HELP, re.MULTILINE))))


def _paths(word: str) -> list[str]:
    """Files and folders whose path starts with ``word`` (folders end in ``/``)."""
    return sorted(p + "/" if os.path.isdir(p) else p for p in glob.glob(glob.escape(word) + "*"))


@dataclass
class Session:
    """The state of a REPL: declared input types and input values."""

    types: dict[str, Type] = field(default_factory=dict)
    inputs: dict[str, Input] = field(default_factory=dict)
    source: str = ""  # the text the spans of the last error refer to
    last: Value | None = None  # the last value, for :all

    def handle(self, text: str) -> str:
        """Run one REPL entry and return what to print (errors are raised)."""
        stripped = text.strip()
        self.source = text
        if not stripped:
            return ""
        if stripped.startswith(":"):
            cmd, _, arg = stripped[1:].partition(" ")
            return self.command(cmd, arg.strip())
        return self.program(parse_program(text))

    def command(self, cmd: str, arg: str) -> str:
        self.source = arg
        match cmd:
            case "help" | "h" | "?":
                if arg.strip() == "syntax":
                    width = max(len(k) for k, _, _ in SYNTAX)
                    return "\n".join(["SDQLite's constructs, with an example:",
                                      *(f"  {k:{width}}  {e}" + (f"   ({n})" if n else "")
                                        for k, e, n in SYNTAX), "",
                                      "What other languages write, and SDQLite's way:",
                                      *(f"  {k:6} {v}" for k, v in HINTS.items())])
                return HELP
            case "type" | "t":
                return str(self._elaborate(arg, ":type EXPR")[1])
            case "input" | "i":
                spec = arg.replace(" = ", "=", 1)
                name, inp = read_input(spec, self.types.get(spec.partition("=")[0].strip()),
                                       ":input")
                decls = tuple(Decl(n, t) for n, t in self.types.items())
                context(Program(decls, None), {name: inp})  # data must match a declaration
                self.inputs[name] = inp
                if name not in self.types and inp.type is not None:
                    self.types[name] = inp.type
                return f"{name} : {self.types[name]}"
            case "load" | "l":
                self.source = read_source(arg)
                return self.program(parse_program(self.source))
            case "anf":
                return show(anf(self._elaborate(arg, ":anf EXPR")[0]))
            case "fad":
                tangent, dt = forward_mode(self._elaborate(arg, ":fad EXPR")[0], self._ctx())
                return f"{show(tangent)}\n  : {dt}"
            case "grad" | "gradient":
                body, _, x = arg.rstrip().rpartition(" ")
                if not body.strip() or not x.isidentifier() or not self._parses(body):
                    if self._parses(arg):  # an expression, and no variable after it
                        raise DataError(":grad EXPR X: the variable to differentiate by "
                                        "is missing (e.g. :grad x * x x)")
                    if not body.strip() or not x.isidentifier():
                        raise DataError("usage: :grad EXPR X (e.g. :grad x * x x)")
                self.source = body
                expr = self._parse(body, ":grad EXPR X")
                ctx = self._ctx()
                elab, t = typecheck(Gradient(expr, x, span=expr.span), ctx)
                expanded = expand(elab, ctx)
                return f"{show(expanded)}\n{self._value(expanded, t)}"
            case "opt":
                body, sep, x = arg.rpartition(" wrt ")
                if not sep:
                    body, x = arg, ""
                self.source = body
                elab, _ = self._elaborate(body, ":opt EXPR [wrt X]")
                return describe(pipeline(elab, self._ctx(), x.strip() or None))
            case "cpp":
                body, sep, x = arg.rpartition(" wrt ")
                if not sep:
                    body, x = arg, ""
                self.source = body
                expr = self._parse(body, ":cpp EXPR [wrt X]")
                typecheck(expr, self._ctx())  # errors located as the other commands' are
                decls = tuple(Decl(n, t) for n, t in self.types.items())
                return compile_(Program(decls, expr), x.strip() or None, name="repl").cpp()
            case "inputs":
                lines = []
                for n, t in sorted(self.types.items()):
                    v = self.inputs.get(n)
                    value = "" if v is None else f" = {summary(v.value, SHOWN)}"
                    lines.append(f"{n} : {t}{value}")
                return "\n".join(lines) or "(no inputs)"
            case "all":
                if self.last is None:
                    raise DataError(":all shows the last value in full, and there is none yet")
                return show_value(self.last)
            case _:
                raise DataError(f"unknown command :{cmd} (try :help)")

    def program(self, prog: Program) -> str:
        out = []
        declared_formats(prog)  # a declared format must fit its input
        for d in prog.decls:
            self.types[d.name] = d.type
            out.append(f"{d.name} : {d.type}")
            if d.name in self.inputs:  # a value bound before keeps only if it fits
                try:
                    context(Program((d,), None), {d.name: self.inputs[d.name]})
                except DataError as err:
                    del self.inputs[d.name]
                    out.append(f"  ({d.name}'s value is unbound: {err.message}; bind one "
                               f"with :input {d.name} = VALUE)")
        if prog.expr is not None:
            ctx = self._ctx()
            elab, t = typecheck(prog.expr, ctx)
            out.append(self._value(expand(elab, ctx), t))
        return "\n".join(out)

    def _value(self, elab: Expr, t: Type) -> str:
        missing = sorted(n for n in free_vars(elab) if n not in self.inputs)
        if missing:
            raise DataError(f"no value for input {', '.join(missing)} "
                            f"(bind it with :input NAME = VALUE)")
        check_extents({n: (self.types[n], i.value, None) for n, i in self.inputs.items()
                       if n in self.types})
        value = evaluate(elab, {n: i.value for n, i in self.inputs.items()})
        self.last = value
        return f"{summary(value, SHOWN)}\n  : {t}"

    def complete(self, before: str, word: str) -> list[str]:
        """What ``word`` may complete to (the Tab key), ``before`` being the line's text
        before it: a command at the start of a line; a file after ``:load`` or an
        input's ``=``; a format after ``@``; otherwise the declared names and the words
        of the language."""
        head = before.lstrip()
        if not head and word.startswith(":"):
            choices = COMMANDS
        elif head.startswith((":load", ":l ")) or (head.startswith(":i") and "=" in head):
            return _paths(word)
        elif head.rstrip().endswith("@"):  # the formats for the declared type, if it parses
            declared = self._type_or_none(head.rstrip()[:-1].partition(":")[2])
            choices = tuple(format_names() if declared is None else formats_for(declared))
        else:
            choices = (*self.types, *keywords())
        return sorted(c for c in set(choices) if c.startswith(word))

    @staticmethod
    def _type_or_none(text: str) -> Type | None:
        try:
            return parse_type(text)
        except ParseError:
            return None

    @staticmethod
    def _parses(text: str) -> bool:
        try:
            return parse_program(text).expr is not None
        except ParseError:
            return False

    def _parse(self, text: str, usage: str) -> Expr:
        expr = parse_program(text).expr
        if expr is None:
            raise DataError(f"usage: {usage}")
        return expr

    def _elaborate(self, text: str, usage: str) -> tuple[Expr, Type]:
        """The expression checked, its gradients expanded (``sdqlite.ad.gradient``)."""
        ctx = self._ctx()
        elab, t = typecheck(self._parse(text, usage), ctx)
        return expand(elab, ctx), t

    def _ctx(self) -> dict[str, Type]:
        return dict(self.types)

"""Parser: text → AST, with the grammar kept as data in ``grammar.lark`` (Lark, LALR).

Entry points: ``parse_program`` (input declarations then an expression),
``parse_expr``, ``parse_type``.  Every failure is a ``ParseError`` with a span.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import lark
from lark import Token

from sdqlite.errors import ParseError, Span
from sdqlite.syntax import sugar
from sdqlite.syntax.ast import Add as AddE
from sdqlite.syntax.ast import (
    ArrayLit,
    BoolConst,
    Empty,
    Eq,
    Expr,
    Gradient,
    If,
    IntConst,
    Let,
    Lookup,
    Mul,
    Not,
    Range,
    RealConst,
    SubArray,
    Sum,
    Unique,
    UnOp,
    Var,
)
from sdqlite.syntax.names import NameSupply, names_in
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type, has_extents, otimes, tensor


@dataclass(frozen=True)
class Decl:
    """An input declaration ``name : type`` at the top of a source file, optionally with
    the storage format the compiled backend reads it in (``A : {int -> {int -> real}} @
    csr``), kept as a name: ``sdqlite.storage.formats.declared_formats`` resolves it."""

    name: str
    type: Type
    span: Span | None = None
    format: str | None = None
    format_span: Span | None = None

    def __str__(self) -> str:
        return f"{self.name} : {self.type}" + (f" @ {self.format}" if self.format else "")


@dataclass(frozen=True)
class Program:
    """A source file: input declarations, then (optionally) one expression."""

    decls: tuple[Decl, ...]
    expr: Expr | None


@cache
def _lark() -> lark.Lark:
    """The LALR parser, building the AST as it reduces (``transformer=``: no parse tree)."""
    text = Path(__file__).with_name("grammar.lark").read_text(encoding="utf-8")
    return lark.Lark(
        text, parser="lalr", start=["program", "expr_only", "type_only"],
        keep_all_tokens=True, maybe_placeholders=False, transformer=_ToAst(),
    )


@cache
def keywords() -> frozenset[str]:
    """The words of the grammar (``sum``, ``let``, ``gradient``, ``real``, …), for
    completion: its keyword terminals, the index kinds and the unary operations."""
    words = {t.pattern.value for t in _lark().terminals
             if t.pattern.type == "str" and t.pattern.value.isidentifier()}
    return frozenset(words | {"dense_int"} | set(UNARY_OPS))


class _Built(NamedTuple):
    """What a rule built, and the text it covers (its parentheses included)."""

    value: Any
    span: Span | None


#: the terminals a rule's method receives; keywords and punctuation only give positions
_KEPT = frozenset({"NAME", "INT", "REAL", "OP", "KEY", "OTIMES"})


def _rule(method: Callable[..., Any]) -> Callable[[Any, list[Any]], _Built]:
    """A rule's method as Lark calls it while parsing: with the span from the start of
    its first child to the end of its last (as ``propagate_positions`` computes it), and
    the children's values."""

    def reduce(self: Any, children: list[Any]) -> _Built:
        span = None
        if children:
            first, last = _where(children[0]), _where(children[-1])
            if first is not None and last is not None:
                span = Span(first.line, first.col, last.end_line, last.end_col)
        args = [c.value if isinstance(c, _Built) else c for c in children
                if not isinstance(c, Token) or c.type in _KEPT]
        return _Built(method(self, span, *args), span)

    return reduce


def _where(child: Any) -> Span | None:
    return _tspan(child) if isinstance(child, Token) else child.span


def _no_extents(t: Type, span: Span | None, where: str) -> Type:
    if has_extents(t):
        raise ParseError(f"{where}[{t}]: sizes such as int[n] are declared on inputs only",
                         span)
    return t


def _tspan(tok: Token) -> Span:
    return Span(tok.line or 1, tok.column or 1, tok.end_line or 1, tok.end_column or 1)


class _Rules:
    """One method per grammar rule, given the rule's span and its children's values;
    derived forms go through ``sdqlite.syntax.sugar``."""

    # program structure
    def program(self, span: Span | None, *items: Any) -> Program:
        decls = tuple(i for i in items if isinstance(i, Decl))
        exprs = [i for i in items if not isinstance(i, Decl)]
        return Program(decls, exprs[0] if exprs else None)

    def decl(self, span: Span | None, name: Token, t: Type, fmt: Token | None = None) -> Decl:
        if fmt is None:
            return Decl(str(name), t, span)
        return Decl(str(name), t, span, str(fmt), _tspan(fmt))  # sdqlite.storage resolves it

    def expr_only(self, span: Span | None, e: Expr) -> Expr:
        return e

    def atom(self, span: Span | None, e: Expr) -> Expr:  # ( e ): e keeps its own span
        return e

    def atype(self, span: Span | None, t: Type) -> Type:  # ( t )
        return t

    def type_only(self, span: Span | None, t: Type) -> Type:
        return t

    def binder(self, span: Span | None, name: Token) -> str:
        return str(name)

    def entry(self, span: Span | None, k: Expr, v: Expr) -> tuple[Expr, Expr]:
        return (k, v)

    # Logical SDQLite
    def sum(self, span: Span | None, k: str, v: str, dom: Expr, body: Expr) -> Expr:
        return Sum(k, v, dom, body, span=span)

    def let(self, span: Span | None, name: str, rhs: Expr, *rest: Any) -> Expr:
        return Let(name, rhs, rest[-1], span=span)

    def let_tuple(self, span: Span | None, *items: Any) -> Expr:
        body = items[-1]
        parts = [i for i in items[:-1] if not isinstance(i, Token)]
        names = [p for p in parts if isinstance(p, str)]
        rhss = [p for p in parts if not isinstance(p, str)]
        return sugar.tuple_let(names, rhss, body, span)

    def if_(self, span: Span | None, c: Expr, body: Expr) -> Expr:
        return If(c, body, span=span)

    def not_(self, span: Span | None, e: Expr) -> Expr:
        return Not(e, span=span)

    def eq(self, span: Span | None, a: Expr, b: Expr) -> Expr:
        return Eq(a, b, span=span)

    def add(self, span: Span | None, a: Expr, b: Expr) -> Expr:
        return AddE(a, b, span=span)

    def sub(self, span: Span | None, a: Expr, b: Expr) -> Expr:
        return sugar.subtract(a, b, span)

    def mul(self, span: Span | None, a: Expr, b: Expr) -> Expr:
        return Mul(a, b, span=span)

    def neg(self, span: Span | None, e: Expr) -> Expr:
        return sugar.negate(e, span)

    def lookup(self, span: Span | None, d: Expr, k: Expr) -> Expr:
        return Lookup(d, k, span=span)

    def var(self, span: Span | None, name: Token) -> Expr:
        if str(name) == "_":
            raise ParseError("`_` is a binder that cannot be referred to", _tspan(name))
        return Var(str(name), span=_tspan(name))

    def int(self, span: Span | None, tok: Token) -> Expr:
        limit = sys.get_int_max_str_digits()  # Python's own bound on reading an integer
        if limit and len(tok) > limit:
            raise ParseError(f"integer literal of {len(tok)} digits is too long (at most "
                             f"{limit})", _tspan(tok))
        return IntConst(int(tok), span=_tspan(tok))

    def real(self, span: Span | None, tok: Token) -> Expr:
        value = float(tok)
        if value == float("inf"):
            raise ParseError(f"real literal {tok} is too large", _tspan(tok))
        return RealConst(value, span=_tspan(tok))

    def true(self, span: Span | None) -> Expr:
        return BoolConst(True, span=span)

    def false(self, span: Span | None) -> Expr:
        return BoolConst(False, span=span)

    def empty(self, span: Span | None) -> Expr:
        return Empty(span=span)

    def dictlit(self, span: Span | None, *entries: tuple[Expr, Expr]) -> Expr:
        return sugar.dict_literal(entries, span)

    def unop(self, span: Span | None, op: Token, e: Expr) -> Expr:
        return UnOp(str(op), e, span=span)

    def zero(self, span: Span | None, t: Type) -> Expr:
        return sugar.zero(_no_extents(t, span, "zero"), span)

    def onehot(self, span: Span | None, t: Type, x: Expr) -> Expr:
        return sugar.onehot(_no_extents(t, span, "onehot"), x, NameSupply(names_in(x)).fresh,
                            span)

    def gradient(self, span: Span | None, e: Expr, x: Token) -> Expr:
        return Gradient(e, str(x), span=span)

    # Physical SDQLite
    def range(self, span: Span | None, lo: Expr, hi: Expr) -> Expr:
        return Range(lo, hi, span=span)

    def subarray(self, span: Span | None, arr: Expr, lo: Expr, hi: Expr) -> Expr:
        return SubArray(arr, lo, hi, span=span)

    def unique(self, span: Span | None, e: Expr) -> Expr:
        return Unique(e, span=span)

    def arraylit(self, span: Span | None, *elems: Expr) -> Expr:
        return ArrayLit(tuple(elems), span=span)

    # types
    def t_int(self, span: Span | None) -> Type:
        return INT

    def t_real(self, span: Span | None) -> Type:
        return REAL

    def t_bool(self, span: Span | None) -> Type:
        return BOOL

    def t_dict(self, span: Span | None, key: Token, *rest: Any) -> Type:
        *extent, val = rest  # {KEY [n] -> val}: a declared extent (see sdqlite.syntax.types)
        return DictT(val, dense=str(key) == "dense_int",
                     extent=str(extent[0]) if extent else None)

    def t_tensor(self, span: Span | None, n: Token) -> Type:
        if int(n) > 64:
            raise ParseError(f"tensor {n}: order too large (at most 64)", _tspan(n))
        return tensor(int(n))

    def otimes(self, span: Span | None, a: Type, _op: Token, b: Type) -> Type:
        t = otimes(a, b)
        if t is None:
            raise ParseError(f"{a} ⊗ {b} is not defined", span)
        return t


#: what Lark calls as it reduces: each rule's method, given its span
_ToAst = type("_ToAst", (), {name: _rule(f) for name, f in vars(_Rules).items()
                             if not name.startswith("_")})


_NICE = {
    "$END": "end of input", "LPAR": "'('", "RPAR": "')'", "LBRACE": "'{'",
    "RBRACE": "'}'", "LSQB": "'['", "RSQB": "']'", "COMMA": "','", "COLON": "':'",
    "LESSTHAN": "'<'", "MORETHAN": "'>'", "EQUAL": "'='", "PLUS": "'+'", "MINUS": "'-'",
    "STAR": "'*'", "NAME": "a name", "INT": "an integer", "REAL": "a real",
    "OP": "a unary operation", "KEY": "a key type", "OTIMES": "'⊗'", "IN": "'in'",
}


def _nice(name: str) -> str:
    if name in _NICE:
        return _NICE[name]
    try:
        pattern = _lark().get_terminal(name).pattern
        if isinstance(pattern, lark.lexer.PatternStr):
            return f"'{pattern.value}'"
    except KeyError:
        pass
    return name.lower()


#: what people type from other languages -> what SDQLite writes (``:help syntax``)
HINTS: dict[str, str] = {
    "^": "SDQLite has no power operator: write x * x, or exp(y * log(x))",
    "**": "SDQLite has no power operator: write x * x, or exp(y * log(x))",
    "/": "SDQLite has no division: write a * inv(b)",
    "%": "SDQLite has no remainder operator",
    "==": "equality is one '=': a = b",
    "!": "negation is 'not': not (a = b)",
    "!=": "inequality is 'not (a = b)'",
    "&&": "no 'and' operator: nest the conditions, if a then (if b then e)",
    "||": "no 'or' operator: (if a then e) + (if not a then (if b then e))",
    "else": "'if c then e' has no else: it is zero when c is false; write "
            "(if c then a) + (if not c then b)",
}


def _hint(text: str, pos: int, found: str) -> str:
    """A hint for what was found at ``pos`` (two characters first: ``==`` over ``=``)."""
    for n in (2, 1):
        if text[pos:pos + n] in HINTS and n <= len(text) - pos:
            return f" ({HINTS[text[pos:pos + n]]})"
    return f" ({HINTS[found]})" if found in HINTS else ""


def _convert(err: lark.exceptions.UnexpectedInput, text: str) -> ParseError:
    line, col = max(err.line, 1), max(err.column, 1)
    if isinstance(err, lark.exceptions.UnexpectedToken):
        tok = err.token
        found = "end of input" if tok.type == "$END" else f"{tok.value!r}"
        expected = sorted({_nice(t) for t in err.expected})
        exp = ", ".join(expected[:8]) + (", ..." if len(expected) > 8 else "")
        if tok.type == "$END":
            lines = text.splitlines() or [""]
            line, col = len(lines), len(lines[-1]) + 1
        end = col + max(1, len(str(tok.value)) if tok.type != "$END" else 1)
        hint = ""
        if tok.type != "$END" and tok.start_pos is not None:  # "==": the second "=" here
            before = text[tok.start_pos - 1] if tok.start_pos > 0 else ""
            pair = before + str(tok.value)[:1]
            hint = f" ({HINTS[pair]})" if pair in HINTS else _hint(text, tok.start_pos,
                                                                     str(tok.value))
        return ParseError(f"unexpected {found}; expected {exp}{hint}",
                          Span(line, col, line, end))
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        pos = err.pos_in_stream or 0
        ch = text[pos] if 0 <= pos < len(text) else "?"
        what = "unterminated comment" if text.startswith("/*", pos) else (
            f"unexpected character {ch!r}{_hint(text, pos, ch)}"
        )
        return ParseError(what, Span(line, col, line, col + 1))
    return ParseError("unexpected end of input", Span(line, col, line, col + 1))


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off while parsing: a parse makes no cycles, and the
    collector's passes over the growing AST made a long literal's parse superlinear
    (10^5 entries: half the time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse(text: str, start: str) -> Any:
    try:
        with _no_cycle_collection():
            built: _Built = _lark().parse(text, start=start)  # type: ignore[assignment]
        return built.value
    except lark.exceptions.UnexpectedInput as err:
        raise _convert(err, text) from None


def parse_program(text: str) -> Program:
    """Parse a source file: ``name : type`` declarations, one per line, then an expression.

    >>> from sdqlite import parse_program, show
    >>> p = parse_program("x : real\\nx * x")
    >>> [str(d) for d in p.decls], show(p.expr)
    (['x : real'], 'x * x')
    """
    prog: Program = _parse(text, "program")
    seen: dict[str, Decl] = {}
    for d in prog.decls:
        if d.name in seen:
            raise ParseError(f"input {d.name} is declared twice", d.span)
        seen[d.name] = d
    return prog


def parse_expr(text: str) -> Expr:
    """Parse one SDQLite expression.

    >>> from sdqlite import parse_expr
    >>> parse_expr("x * 2.0")
    Mul(left=Var(name='x'), right=RealConst(value=2.0))
    """
    e: Expr = _parse(text, "expr_only")
    return e


def parse_type(text: str) -> Type:
    """Parse a type expression such as ``{int -> real}``, ``tensor 2`` or ``tensor 1 ** real``.

    >>> from sdqlite import parse_type
    >>> print(parse_type("tensor 2"))
    {int -> {int -> real}}
    """
    t: Type = _parse(text, "type_only")
    return t


def is_incomplete(text: str) -> bool:
    """True when ``text`` is a prefix of a program (used by the REPL for multi-line input)."""
    try:
        _lark().parse(text, start="program")
    except lark.exceptions.UnexpectedToken as err:
        return bool(err.token.type == "$END")
    except lark.exceptions.UnexpectedEOF:
        return True
    except lark.exceptions.UnexpectedCharacters as err:
        return text.startswith("/*", err.pos_in_stream or 0)
    except Exception:
        return False
    return False

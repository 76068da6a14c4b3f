"""Parser: text → AST, with the grammar kept as data in ``grammar.lark`` (Lark, LALR).

Entry points: ``parse_program`` (input declarations then an expression),
``parse_expr``, ``parse_type``.  Every failure is a ``ParseError`` with a span.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import lark
from lark import Token, Transformer, v_args

from sdqlite import sugar
from sdqlite.ast import Add as AddE
from sdqlite.ast import (
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
from sdqlite.errors import ParseError, SDQLiteError, Span
from sdqlite.names import NameSupply, names_in
from sdqlite.types import BOOL, INT, REAL, DictT, Type, has_extents, otimes, tensor


@dataclass(frozen=True)
class Decl:
    """An input declaration ``name : type`` at the top of a source file, optionally with
    the storage format the compiled backend reads it in (``A : {int -> {int -> real}} @
    csr``; ``sdqlite.storage``)."""

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
    text = Path(__file__).with_name("grammar.lark").read_text(encoding="utf-8")
    return lark.Lark(
        text, parser="lalr", start=["program", "expr_only", "type_only"],
        propagate_positions=True, maybe_placeholders=False,
    )


def _span(meta: Any) -> Span | None:
    if getattr(meta, "empty", True):
        return None
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _no_extents(t: Type, meta: Any, where: str) -> Type:
    if has_extents(t):
        raise ParseError(f"{where}[{t}]: sizes such as int[n] are declared on inputs only",
                         _span(meta))
    return t


def _tspan(tok: Token) -> Span:
    return Span(tok.line or 1, tok.column or 1, tok.end_line or 1, tok.end_column or 1)


@v_args(meta=True, inline=True)
class _ToAst(Transformer[Token, Any]):
    """One method per grammar rule; derived forms go through ``sdqlite.sugar``."""

    # program structure
    def program(self, meta: Any, *items: Any) -> Program:
        decls = tuple(i for i in items if isinstance(i, Decl))
        exprs = [i for i in items if not isinstance(i, Decl)]
        return Program(decls, exprs[0] if exprs else None)

    def decl(self, meta: Any, name: Token, t: Type, fmt: Token | None = None) -> Decl:
        if fmt is None:
            return Decl(str(name), t, _span(meta))
        from sdqlite.storage import resolve

        resolve(str(fmt), t, _tspan(fmt), f"input {name}: ")  # a format that fits the type
        return Decl(str(name), t, _span(meta), str(fmt), _tspan(fmt))

    def expr_only(self, meta: Any, e: Expr) -> Expr:
        return e

    def type_only(self, meta: Any, t: Type) -> Type:
        return t

    def binder(self, meta: Any, name: Token) -> str:
        return str(name)

    def entry(self, meta: Any, k: Expr, v: Expr) -> tuple[Expr, Expr]:
        return (k, v)

    # Logical SDQLite
    def sum(self, meta: Any, k: str, v: str, dom: Expr, body: Expr) -> Expr:
        return Sum(k, v, dom, body, span=_span(meta))

    def let(self, meta: Any, name: str, rhs: Expr, *rest: Any) -> Expr:
        return Let(name, rhs, rest[-1], span=_span(meta))

    def let_tuple(self, meta: Any, *items: Any) -> Expr:
        body = items[-1]
        parts = [i for i in items[:-1] if not isinstance(i, Token)]
        names = [p for p in parts if isinstance(p, str)]
        rhss = [p for p in parts if not isinstance(p, str)]
        return sugar.tuple_let(names, rhss, body, _span(meta))

    def if_(self, meta: Any, c: Expr, body: Expr) -> Expr:
        return If(c, body, span=_span(meta))

    def not_(self, meta: Any, e: Expr) -> Expr:
        return Not(e, span=_span(meta))

    def eq(self, meta: Any, a: Expr, b: Expr) -> Expr:
        return Eq(a, b, span=_span(meta))

    def add(self, meta: Any, a: Expr, b: Expr) -> Expr:
        return AddE(a, b, span=_span(meta))

    def sub(self, meta: Any, a: Expr, b: Expr) -> Expr:
        return sugar.subtract(a, b, _span(meta))

    def mul(self, meta: Any, a: Expr, b: Expr) -> Expr:
        return Mul(a, b, span=_span(meta))

    def neg(self, meta: Any, e: Expr) -> Expr:
        return sugar.negate(e, _span(meta))

    def lookup(self, meta: Any, d: Expr, k: Expr) -> Expr:
        return Lookup(d, k, span=_span(meta))

    def var(self, meta: Any, name: Token) -> Expr:
        if str(name) == "_":
            raise ParseError("`_` is a binder that cannot be referred to", _tspan(name))
        return Var(str(name), span=_tspan(name))

    def int(self, meta: Any, tok: Token) -> Expr:
        limit = sys.get_int_max_str_digits()  # Python's own bound on reading an integer
        if limit and len(tok) > limit:
            raise ParseError(f"integer literal of {len(tok)} digits is too long (at most "
                             f"{limit})", _tspan(tok))
        return IntConst(int(tok), span=_tspan(tok))

    def real(self, meta: Any, tok: Token) -> Expr:
        value = float(tok)
        if value == float("inf"):
            raise ParseError(f"real literal {tok} is too large", _tspan(tok))
        return RealConst(value, span=_tspan(tok))

    def true(self, meta: Any) -> Expr:
        return BoolConst(True, span=_span(meta))

    def false(self, meta: Any) -> Expr:
        return BoolConst(False, span=_span(meta))

    def empty(self, meta: Any) -> Expr:
        return Empty(span=_span(meta))

    def dictlit(self, meta: Any, *entries: tuple[Expr, Expr]) -> Expr:
        return sugar.dict_literal(entries, _span(meta))

    def unop(self, meta: Any, op: Token, e: Expr) -> Expr:
        return UnOp(str(op), e, span=_span(meta))

    def zero(self, meta: Any, t: Type) -> Expr:
        return sugar.zero(_no_extents(t, meta, "zero"), _span(meta))

    def onehot(self, meta: Any, t: Type, x: Expr) -> Expr:
        return sugar.onehot(_no_extents(t, meta, "onehot"), x, NameSupply(names_in(x)).fresh,
                            _span(meta))

    def gradient(self, meta: Any, e: Expr, x: Token) -> Expr:
        return Gradient(e, str(x), span=_span(meta))

    # Physical SDQLite
    def range(self, meta: Any, lo: Expr, hi: Expr) -> Expr:
        return Range(lo, hi, span=_span(meta))

    def subarray(self, meta: Any, arr: Expr, lo: Expr, hi: Expr) -> Expr:
        return SubArray(arr, lo, hi, span=_span(meta))

    def unique(self, meta: Any, e: Expr) -> Expr:
        return Unique(e, span=_span(meta))

    def arraylit(self, meta: Any, *elems: Expr) -> Expr:
        return ArrayLit(tuple(elems), span=_span(meta))

    # types
    def t_int(self, meta: Any) -> Type:
        return INT

    def t_real(self, meta: Any) -> Type:
        return REAL

    def t_bool(self, meta: Any) -> Type:
        return BOOL

    def t_dict(self, meta: Any, key: Token, *rest: Any) -> Type:
        *extent, val = rest  # {KEY [n] -> val}: a declared extent (see sdqlite.types)
        return DictT(val, dense=str(key) == "dense_int",
                     extent=str(extent[0]) if extent else None)

    def t_tensor(self, meta: Any, n: Token) -> Type:
        if int(n) > 64:
            raise ParseError(f"tensor {n}: order too large (at most 64)", _tspan(n))
        return tensor(int(n))

    def otimes(self, meta: Any, a: Type, _op: Token, b: Type) -> Type:
        t = otimes(a, b)
        if t is None:
            raise ParseError(f"{a} ⊗ {b} is not defined", _span(meta))
        return t


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
        return ParseError(f"unexpected {found}; expected {exp}", Span(line, col, line, end))
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        pos = err.pos_in_stream or 0
        ch = text[pos] if 0 <= pos < len(text) else "?"
        what = "unterminated comment" if text.startswith("/*", pos) else (
            f"unexpected character {ch!r}"
        )
        return ParseError(what, Span(line, col, line, col + 1))
    return ParseError("unexpected end of input", Span(line, col, line, col + 1))


def _parse(text: str, start: str) -> Any:
    try:
        tree = _lark().parse(text, start=start)
        return _ToAst().transform(tree)
    except lark.exceptions.UnexpectedInput as err:
        raise _convert(err, text) from None
    except lark.exceptions.VisitError as err:
        if isinstance(err.orig_exc, SDQLiteError):
            raise err.orig_exc from None
        if isinstance(err.orig_exc, RecursionError):
            raise ParseError("program is nested too deeply", None) from None
        raise
    except RecursionError:
        raise ParseError("program is nested too deeply", None) from None


def parse_program(text: str) -> Program:
    """Parse a source file: ``name : type`` declarations, one per line, then an expression."""
    prog: Program = _parse(text, "program")
    seen: dict[str, Decl] = {}
    for d in prog.decls:
        if d.name in seen:
            raise ParseError(f"input {d.name} is declared twice", d.span)
        seen[d.name] = d
    return prog


def parse_expr(text: str) -> Expr:
    """Parse one SDQLite expression."""
    e: Expr = _parse(text, "expr_only")
    return e


def parse_type(text: str) -> Type:
    """Parse a type expression such as ``{int -> real}``, ``tensor 2`` or ``tensor 1 ** real``."""
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

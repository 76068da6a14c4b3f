"""Bad input is reported, never crashes.

* The parser is total: any text yields an AST or a ``ParseError`` (with a span when the
  text has a location to blame), nothing else.
* The checker rejects generated ill-typed programs — each breaks exactly one typing rule
  of Fig. fig:langs inside a well-typed context — with an ``SDQLTypeError`` whose span
  lies inside the program text, nothing else.
* Any text is an input's data (a file's name or a literal), a program's path or a REPL
  ``:load`` argument: it is read or refused with an ``SDQLiteError`` — never an OS error
  (a name too long, a NUL byte) — however long it is.
* Any bytes under a data file's suffix (``.npy``, ``.mtx``, ``.npz``), behind a valid
  start or not, are read as a value of the type read with them or refused with a
  ``DataError`` naming the file.
"""

import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from properties.generators import ill_typed
from sdqlite.check.typecheck import Ctx, typecheck
from sdqlite.errors import DataError, ParseError, SDQLiteError, SDQLTypeError
from sdqlite.paths import read_source
from sdqlite.syntax.ast import Expr
from sdqlite.syntax.parser import parse_program
from sdqlite.syntax.printer import show
from sdqlite.ui.session import read_input, read_raw_input
from semantics.convert import load
from semantics.datafiles import read_data
from semantics.values import has_type

TOKENS = ["sum", "(", ")", "<", ">", ",", "in", "let", "=", "if", "then", "not", "{", "}",
          "->", "+", "-", "*", ":", "[", "]", "x", "V1'", "_", "1", "2.5", "true", "sin",
          "unique", "zero", "real", "int", "dense_int", "**", "tensor", "//", "/*", "*/",
          "\n", "@", "1e400"]


def _parse_total(text: str) -> None:
    try:
        parse_program(text)
    except ParseError as err:
        if err.span is not None:
            lines = text.splitlines() or [""]
            assert 1 <= err.span.line <= len(lines) + 1


@given(st.text(max_size=80))
@example("((((((((((((((((((((((((((((((((((((((((" * 60)
@example("1e400")
@example("/* never closed")
def test_parser_is_total_on_text(text: str) -> None:
    _parse_total(text)


@given(st.lists(st.sampled_from(TOKENS), max_size=25).map(" ".join))
def test_parser_is_total_on_token_soup(text: str) -> None:
    _parse_total(text)


@given(ill_typed())
def test_ill_typed_programs_are_rejected_with_a_span(case: tuple[Ctx, Expr, str]) -> None:
    ctx, expr, rule = case
    text = show(expr)
    parsed = parse_program(text).expr
    assert parsed is not None
    try:
        typecheck(parsed, ctx)
    except SDQLTypeError as err:
        assert err.span is not None, (rule, err.message)
        lines = text.splitlines()
        assert 1 <= err.span.line <= len(lines), (rule, err.span)
        assert 1 <= err.span.col <= len(lines[err.span.line - 1]) + 1
    else:
        raise AssertionError(f"ill-typed program ({rule}) was accepted:\n{text}")


TEXTS = st.one_of(st.text(max_size=40), st.text(min_size=250, max_size=400),
                  st.text(alphabet="x/.\0", min_size=200, max_size=5000))


@given(TEXTS)
@example("x" * 300)
@example("{0 -> 1.5, " + ", ".join(f"{k} -> 2.0" for k in range(1, 60)) + "}")
@example("a\0b.npy")
@example(".")
@example("/")
def test_any_text_is_read_or_refused(text: str) -> None:
    rhs = text.strip()
    for read in (read_input, read_raw_input):
        try:
            read(f"x={text}")
        except SDQLiteError as err:  # a file's error names it, a literal's the input
            assert err.message.startswith((f"{rhs}: ", "--input x: ")), err.message
    try:
        read_source(text)
    except SDQLiteError as err:
        assert err.message.startswith(f"{text}: "), err.message


STARTS = [b"", b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (",
          b"%%MatrixMarket matrix coordinate real symmetric\n", b"PK\x03\x04",
          b"%%MatrixMarket matrix array integer general\n2 2\n"]


@given(st.sampled_from([".npy", ".mtx", ".npz"]), st.sampled_from(STARTS),
       st.binary(max_size=200))
@example(".mtx", STARTS[2], b"2 2 1\n2 1 1.0\n")  # read, as the two below
@example(".mtx", STARTS[4], b"1\n2\n3\n4\n")
@example(".npy", STARTS[1], b"3,), }" + b" " * 60 + b"\n" + b"\x00" * 24)
# thorough: scipy's array reader divides by zero (SIGFPE) on an array with no entries
@example(".mtx", b"%%MatrixMarket matrix array real general\n", b"0 0\n")
@example(".mtx", b"%%MatrixMarket matrix array real general\n", b"0 3\n1.5\n")
# thorough: scipy's array reader segfaults on too few entries ending in non-ASCII bytes
@example(".mtx", STARTS[4][:-4], b"2 2\n5\xc2\xc8")
def test_any_bytes_are_read_or_refused(suffix: str, start: bytes, rest: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"data{suffix}"
        path.write_bytes(start + rest)
        try:
            value, t = load(path)
            read_data(path)
        except DataError as err:
            assert str(path) in err.message
        else:
            assert has_type(value, t)

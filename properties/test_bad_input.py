"""Bad input is reported, never crashes.

* The parser is total: any text yields an AST or a ``ParseError`` (with a span when the
  text has a location to blame), nothing else.
* The checker rejects generated ill-typed programs — each breaks exactly one typing rule
  of Fig. fig:langs inside a well-typed context — with an ``SDQLTypeError`` whose span
  lies inside the program text, nothing else.
"""

from hypothesis import example, given
from hypothesis import strategies as st

from properties.generators import ill_typed
from sdqlite.ast import Expr
from sdqlite.errors import ParseError, SDQLTypeError
from sdqlite.parser import parse_program
from sdqlite.printer import show
from sdqlite.typecheck import Ctx, typecheck

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

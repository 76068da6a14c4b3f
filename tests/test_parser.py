"""Spans the parser gives: a node covers the text its rule read, from the start of its
first token to the end of its last (keywords and brackets included); a parenthesized
expression's span leaves out its parentheses, while the node around it covers them."""

from sdqlite.errors import ParseError, Span
from sdqlite.syntax.ast import Add, Lookup, Mul, Sum, Var
from sdqlite.syntax.parser import parse_expr, parse_program


def cols(text: str, part: str) -> tuple[int, int]:
    """The 1-based columns where ``part`` starts in ``text`` and just after it ends."""
    start = text.index(part) + 1
    return start, start + len(part)


def test_a_span_covers_its_tokens_and_its_operands_parentheses() -> None:
    text = "(a + b) * c(i)"
    e = parse_expr(text)
    assert isinstance(e, Mul) and isinstance(e.left, Add) and isinstance(e.right, Lookup)
    assert e.span == Span(1, 1, 1, len(text) + 1)
    start, end = cols(text, "a + b")
    assert e.left.span == Span(1, start, 1, end)
    start, end = cols(text, "c(i)")
    assert e.right.span == Span(1, start, 1, end) and end == len(text) + 1


def test_keywords_start_a_span_and_lines_are_counted() -> None:
    text = "x : {int -> real}\ny : real @ dict\nsum(<i, a> in x)\n  a * y"
    prog = parse_program(text)
    x, y = prog.decls
    assert x.span == Span(1, 1, 1, len("x : {int -> real}") + 1)
    assert y.span == Span(2, 1, 2, len("y : real @ dict") + 1)
    start, end = cols("y : real @ dict", "dict")
    assert y.format_span == Span(2, start, 2, end)
    assert isinstance(prog.expr, Sum) and isinstance(prog.expr.dom, Var)
    assert prog.expr.span == Span(3, 1, 4, len("  a * y") + 1)
    start, _ = cols("sum(<i, a> in x)", "x)")
    assert prog.expr.dom.span == Span(3, start, 3, start + 1)


def test_deep_nesting_parses_without_recursion() -> None:
    n = 20_000  # Python's recursion limit is 1,000: the parser builds bottom-up
    e = parse_expr("(x + " * n + "1" + ")" * n)
    for _ in range(n):
        assert isinstance(e, Add)
        e = e.right


def test_the_first_problem_in_the_text_is_reported() -> None:
    text = "{ 2 -> _ } + (x"  # the `_` comes before the missing parenthesis
    try:
        parse_expr(text)
    except ParseError as err:
        assert err.message == "`_` is a binder that cannot be referred to"
        assert err.span == Span(1, text.index("_") + 1, 1, text.index("_") + 2)
    else:
        raise AssertionError("parsed")

"""ANF on the paper's Example 1 (§2.1): the unrolled dot product."""

from sdqlite import parse_expr, show, typecheck
from sdqlite.ad.anf import anf
from sdqlite.syntax.types import REAL


def test_example_1_unrolled_dot_product() -> None:
    ctx = {n: REAL for n in ["x1", "x2", "y1", "y2"]}
    e, _ = typecheck(parse_expr("x1*y1 + x2*y2"), ctx)
    paper = "let t1 = x1*y1 in\nlet t2 = x2*y2 in\nlet t3 = t1+t2 in\nt3"  # as printed in §4.1
    assert anf(e) == parse_expr(paper)
    assert show(anf(e)) == "let t1 = x1 * y1 in\nlet t2 = x2 * y2 in\nlet t3 = t1 + t2 in\nt3"


def test_fresh_names_avoid_user_names() -> None:
    e, _ = typecheck(parse_expr("let t1 = 3.0 in t1 * sin(t1)"), {})
    assert show(anf(e)) == "let t1 = 3.0 in\nlet t2 = sin(t1) in\nlet t3 = t1 * t2 in\nt3"

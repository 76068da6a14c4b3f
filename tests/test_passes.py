"""The passes on the paper's examples (§5.2)."""

from sdqlite import parse_expr, show, typecheck
from sdqlite.names import alpha_normal
from sdqlite.passes import normalize_multiplication, sparsity_propagation
from sdqlite.rules import RULES
from sdqlite.types import REAL, tensor


def test_sparsity_propagation_on_the_differentiated_dot_product() -> None:
    """§5.2, Example 1: the gradient w.r.t. V1 of the variant iterating V2."""
    ctx = {"V1": tensor(1), "V2": tensor(1)}
    g, _ = typecheck(parse_expr("gradient (sum(<i, a> in V2) V1(i) * a) V1"), ctx)
    result = sparsity_propagation(g, ctx)
    paper = parse_expr("""let V1' = sum(<i, a> in V1) {i -> {i -> 1}}
                          sum(<i, a> in V2)
                            V1'(i) * a""")
    assert alpha_normal(result.program) == alpha_normal(paper), show(result.program)
    assert result.fired["let-zero"] == 3  # V2', a' and i' are zeros


def test_normalization_of_batax() -> None:
    """§5.4: beta * (sum(<i,r> in A) r * r) has no tensor product left."""
    ctx = {"A": tensor(2), "beta": REAL}
    e, _ = typecheck(parse_expr("beta * (sum(<i, r> in A) r * r)"), ctx)
    result = normalize_multiplication(e, ctx)
    assert result.fired == {"mul-normalize-left": 1, "mul-normalize-right": 2}
    assert "beta * v" in show(result.program)


def test_rule_table_documents_every_rule() -> None:
    lines = [r.show() for r in RULES]
    assert lines[0].startswith("zero-mul-left: Z1 * e2  ~>  Z")
    assert all("~>" in line for line in lines)

"""The mutation operators: a table of small, plausible bugs, each a rewrite of one syntax
node of a module's source.

The operators are chosen for this code base: most bugs worth catching here are a side
condition weakened or strengthened (a conjunct dropped, a comparison negated, a guard
made always true, a binder left out of a freshness set), an arm of a rule table
skipped, an update forgotten, or an arithmetic slip in the semantics.  A mutant is
spliced into the source text at the node's span, so its diff is one line or a few.

Not mutated: docstrings, type annotations, ``assert`` statements and ``assert_never``
(internal checks: weakening one cannot change a result, strengthening one is caught at
once), string
constants (messages), patterns of ``case`` (``skip-case`` covers an arm), decorators
(``@dataclass(frozen=True, slots=True)`` declares a discipline that ``mypy --strict``
enforces, not behaviour a test could see), and lines marked ``# pragma: no mutate``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Mut:
    """``target`` (an expression, a statement, or a ``case`` that gets a guard) becomes
    the source ``text``."""

    target: ast.AST
    text: str


@dataclass(frozen=True)
class Site:
    """A replacement of the source between two positions (1-based lines, 0-based UTF-8
    byte columns, as ``ast`` gives them) by ``text``."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str


@dataclass(frozen=True)
class Edit:
    operator: str
    site: Site
    original: str  # the source replaced, for the mutant's name and the report
    function: str  # the qualified name of the enclosing function ("" at module level)
    at_import: bool  # evaluated when the module is imported (not inside a function)
    mut: Mut


Operator = Callable[[ast.AST], Iterator[Mut]]


def _span(n: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
    return (n.lineno, n.col_offset), (n.end_lineno or n.lineno, n.end_col_offset or 0)  # type: ignore[attr-defined]


def _replace(n: ast.AST, by: ast.AST | str) -> Mut:
    text = by if isinstance(by, str) else ast.unparse(by)
    simple = isinstance(ast.parse(text, mode="eval").body, ast.Name | ast.Constant) if \
        isinstance(n, ast.expr) else True
    if isinstance(n, ast.expr) and not isinstance(n, ast.Name | ast.Constant) and not simple:
        text = f"({text})"
    return Mut(n, text)


def site(m: Mut) -> Site:
    """Where the mutant's text goes in the source."""
    if isinstance(m.target, ast.match_case):  # a guard added after the pattern
        end = _span(m.target.pattern)[1]
        return Site(end, end, " if False")
    return Site(*_span(m.target), m.text)


# ---- the operators -------------------------------------------------------------------

_NEGATED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.In: ast.NotIn, ast.NotIn: ast.In}
_BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_ARITH: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv, ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd, ast.Pow: ast.Mult}


def negate_comparison(n: ast.AST) -> Iterator[Mut]:
    """``a == b`` ↔ ``a != b``, ``is`` ↔ ``is not``, ``in`` ↔ ``not in``."""
    if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _NEGATED:
        yield _replace(n, ast.Compare(n.left, [_NEGATED[type(n.ops[0])]()], n.comparators))


def comparison_boundary(n: ast.AST) -> Iterator[Mut]:
    """``<`` ↔ ``<=``, ``>`` ↔ ``>=`` (off by one)."""
    if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _BOUNDARY:
        yield _replace(n, ast.Compare(n.left, [_BOUNDARY[type(n.ops[0])]()], n.comparators))


def drop_operand(n: ast.AST) -> Iterator[Mut]:
    """``a and b`` → ``a``, ``b`` (a conjunct of a guard dropped; for ``or``, a case)."""
    if isinstance(n, ast.BoolOp):
        for i in range(len(n.values)):
            rest = n.values[:i] + n.values[i + 1:]
            yield _replace(n, rest[0] if len(rest) == 1 else ast.BoolOp(n.op, rest))


def swap_and_or(n: ast.AST) -> Iterator[Mut]:
    """``and`` ↔ ``or``."""
    if isinstance(n, ast.BoolOp):
        yield _replace(n, ast.BoolOp(ast.Or() if isinstance(n.op, ast.And) else ast.And(),
                                     n.values))


def drop_not(n: ast.AST) -> Iterator[Mut]:
    """``not a`` → ``a``."""
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        yield _replace(n, n.operand)


def condition_constant(n: ast.AST) -> Iterator[Mut]:
    """The test of an ``if``, a conditional expression, a comprehension's filter or a
    ``case`` guard made always true (the guard removed) or, for ``if``, always false."""
    match n:
        case ast.If(test=t) | ast.IfExp(test=t):
            yield _replace(t, "True")
            yield _replace(t, "False")
        case ast.comprehension(ifs=ifs):
            for t in ifs:
                yield _replace(t, "True")
        case ast.match_case(guard=g) if g is not None:
            yield _replace(g, "True")


def skip_case(n: ast.AST) -> Iterator[Mut]:
    """An arm of a ``match`` never taken (a rule of the table forgotten)."""
    if isinstance(n, ast.match_case) and not (isinstance(n.pattern, ast.MatchAs)
                                              and n.pattern.pattern is None):
        if n.guard is not None:
            yield _replace(n.guard, "False")
        else:
            yield Mut(n, "False")


def arithmetic(n: ast.AST) -> Iterator[Mut]:
    """``+`` ↔ ``-``, ``*`` ↔ ``/``, ``&`` ↔ ``|`` ... (also in ``+=``)."""
    if isinstance(n, ast.BinOp) and type(n.op) in _ARITH:
        yield _replace(n, ast.BinOp(n.left, _ARITH[type(n.op)](), n.right))
    if isinstance(n, ast.AugAssign) and type(n.op) in _ARITH:
        yield _replace(n, ast.AugAssign(n.target, _ARITH[type(n.op)](), n.value))


def constant(n: ast.AST) -> Iterator[Mut]:
    """``True`` ↔ ``False``; a number ``0`` → ``1``, ``1`` → ``0``, ``n`` → ``n + 1``."""
    if isinstance(n, ast.Constant) and not isinstance(n.value, str | bytes):
        v = n.value
        if isinstance(v, bool):
            yield _replace(n, repr(not v))
        elif isinstance(v, int | float):
            yield _replace(n, repr(type(v)(1 if v == 0 else 0 if v == 1 else v + 1)))


def drop_element(n: ast.AST) -> Iterator[Mut]:
    """An element left out of a set display (``{k, v}`` → ``{k}``: a binder forgotten) or
    of a tuple of named constants (a rule's side condition dropped from its table)."""
    named = isinstance(n, ast.Tuple) and isinstance(n.ctx, ast.Load) and n.elts and all(
        isinstance(e, ast.Name) and e.id.isupper() for e in n.elts)
    if (isinstance(n, ast.Set) and len(n.elts) > 1) or named:
        assert isinstance(n, ast.Set | ast.Tuple)
        for i in range(len(n.elts)):
            rest = n.elts[:i] + n.elts[i + 1:]
            text = ("{" + ", ".join(ast.unparse(e) for e in rest) + "}"
                    if isinstance(n, ast.Set) else
                    "(" + "".join(ast.unparse(e) + ", " for e in rest) + ")")
            yield Mut(n, text)


def delete_statement(n: ast.AST) -> Iterator[Mut]:
    """A call made for its effect, an update of a field or an entry, or an augmented
    assignment, left out (replaced by ``pass``)."""
    effect = (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and not (
        isinstance(n.value.func, ast.Name) and n.value.func.id == "assert_never")) or isinstance(
        n, ast.AugAssign) or (isinstance(n, ast.Assign) and all(
            isinstance(t, ast.Subscript | ast.Attribute) for t in n.targets))
    if effect:
        yield Mut(n, "pass")


_GUARD_CALLS = ("is", "_is", "all", "any", "not", "_has", "_independent")


def guard_true(n: ast.AST) -> Iterator[Mut]:
    """A side condition written as a ``lambda`` (a rule's guard) always true."""
    if isinstance(n, ast.Lambda):
        b = n.body
        boolean = isinstance(b, ast.Compare | ast.BoolOp) or (
            isinstance(b, ast.UnaryOp) and isinstance(b.op, ast.Not)) or (
            isinstance(b, ast.Call) and isinstance(b.func, ast.Name)
            and b.func.id.startswith(_GUARD_CALLS))
        if boolean:
            yield _replace(b, "True")


# ---- issue 30's classes: what the generators once never reached ----------------------------


def lookup_inserts(n: ast.AST) -> Iterator[Mut]:
    """A lookup with a default that inserts the key it misses (``d.get(k, z)`` →
    ``d.setdefault(k, z)``): a dictionary iterated afterwards has one entry more."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
            n.func.attr == "get" and len(n.args) == 2 and not n.keywords:
        yield _replace(n, ast.Call(ast.Attribute(n.func.value, "setdefault", ast.Load()),
                                   n.args, []))


def kept_zero(n: ast.AST) -> Iterator[Mut]:
    """A zero that is kept: a test ``is_zero(x)`` that never holds, so an entry that
    cancelled (or a singleton of zero) stays in its dictionary."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "is_zero":
        yield _replace(n, "False")


def no_shadow(n: ast.AST) -> Iterator[Mut]:
    """A binder that does not shadow: ``{**env, x: v}`` → ``{x: v, **env}``, where an
    outer binding of the same name wins."""
    if isinstance(n, ast.Dict) and len(n.keys) > 1 and n.keys[0] is None and \
            all(k is not None for k in n.keys[1:]):
        rest = ", ".join(f"{ast.unparse(k)}: {ast.unparse(v)}"  # type: ignore[arg-type]
                         for k, v in zip(n.keys[1:], n.values[1:], strict=True))
        yield Mut(n, "{" + rest + ", **" + ast.unparse(n.values[0]) + "}")


def start_ignored(n: ast.AST) -> Iterator[Mut]:
    """A dense array's or a view's start read as 0 (``a.start`` → ``0``)."""
    if isinstance(n, ast.Attribute) and n.attr == "start" and isinstance(n.ctx, ast.Load):
        yield _replace(n, "0")


OPERATORS: dict[str, Operator] = {
    "negate-comparison": negate_comparison,
    "comparison-boundary": comparison_boundary,
    "drop-operand": drop_operand,
    "swap-and-or": swap_and_or,
    "drop-not": drop_not,
    "condition-constant": condition_constant,
    "skip-case": skip_case,
    "arithmetic": arithmetic,
    "constant": constant,
    "drop-element": drop_element,
    "delete-statement": delete_statement,
    "guard-true": guard_true,
    "lookup-inserts": lookup_inserts,
    "kept-zero": kept_zero,
    "no-shadow": no_shadow,
    "start-ignored": start_ignored,
}


# ---- where to mutate ---------------------------------------------------------------------


def _excluded(tree: ast.Module) -> set[int]:
    """ids of nodes not to mutate, nor anything under them."""
    out: set[int] = set()

    def skip(n: ast.AST | None) -> None:
        if n is not None:
            out.update(id(x) for x in ast.walk(n))

    for n in ast.walk(tree):
        match n:
            case ast.Module(body=b) | ast.FunctionDef(body=b) | ast.ClassDef(body=b) if (
                    b and isinstance(b[0], ast.Expr) and isinstance(b[0].value, ast.Constant)):
                skip(b[0])  # a docstring
        match n:
            case ast.Assert() | ast.JoinedStr() | ast.match_case():
                if isinstance(n, ast.match_case):
                    skip(n.pattern)
                else:
                    skip(n)
            case ast.ClassDef():
                for d in n.decorator_list:
                    skip(d)
            case ast.FunctionDef() | ast.AsyncFunctionDef():
                for d in n.decorator_list:
                    skip(d)
                skip(n.returns)
                for a in ast.walk(n.args):
                    if isinstance(a, ast.arg):
                        skip(a.annotation)
            case ast.AnnAssign():
                skip(n.annotation)
            case ast.If(test=ast.Name(id="TYPE_CHECKING")):
                skip(n)
    return out


def edits(source: str, tree: ast.Module | None = None) -> list[Edit]:
    """Every mutant of a module's source (whose tree may be given), in source order."""
    tree = tree or ast.parse(source)
    lines = source.splitlines()
    skipped = _excluded(tree)
    pragma = {i + 1 for i, line in enumerate(lines) if "pragma: no mutate" in line}
    found: list[Edit] = []

    def visit(n: ast.AST, scope: str, in_function: bool) -> None:
        if id(n) not in skipped:
            for name, op in OPERATORS.items():
                for m in op(n):
                    s = site(m)
                    if s.start[0] in pragma:
                        continue
                    original = segment(lines, s.start, s.end) or "case " + segment(
                        lines, *_span(m.target.pattern))  # type: ignore[attr-defined]
                    found.append(Edit(name, s, original, scope, not in_function, m))
        for child in ast.iter_child_nodes(n):
            match n:
                case ast.FunctionDef(name=f) | ast.AsyncFunctionDef(name=f) | ast.ClassDef(
                        name=f):
                    inner = f"{scope}.{f}" if scope else f
                    body = child in n.body  # decorators and defaults run at definition
                    inside = in_function or (body and not isinstance(n, ast.ClassDef))
                    visit(child, inner if body else scope, inside)
                case ast.Lambda():
                    visit(child, scope, in_function or child is n.body)
                case _:
                    visit(child, scope, in_function)

    visit(tree, "", False)
    found.sort(key=lambda e: (e.site.start, e.site.end, e.operator, e.site.text))
    return found


def segment(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source between two ``ast`` positions (byte columns)."""
    raw = [ln.encode() for ln in lines[start[0] - 1:end[0]]]
    if len(raw) == 1:
        return raw[0][start[1]:end[1]].decode()
    return b"\n".join([raw[0][start[1]:], *raw[1:-1], raw[-1][:end[1]]]).decode()


def apply(source: str, site: Site) -> str:
    """``source`` with the site's text spliced in."""
    lines = source.splitlines(keepends=True)
    (l1, c1), (l2, c2) = site.start, site.end
    first, last = lines[l1 - 1].encode(), lines[l2 - 1].encode()
    new = first[:c1] + site.text.encode() + last[c2:]
    return "".join(lines[:l1 - 1]) + new.decode() + "".join(lines[l2:])

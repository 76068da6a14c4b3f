"""Rewrite rules as data (Fig. fig:trans), and the matcher the passes use.

Each rule is a named entry: the family and figure it comes from, a left side and a
right side written in SDQLite's own syntax, and side conditions.  In a pattern

* an identifier listed in ``metavars`` matches any expression (the same one wherever it
  repeats); an identifier bound by a pattern's ``sum``/``let`` matches any binder name;
* a metavariable named ``Z`` or ``Z1``, ``Z2``, ... matches a zero constant: ``zero[T]``
  (``{}``), ``0.0`` or the integer ``0``;
* on the right side, ``Z`` is the zero of the type of the matched expression (a
  rewrite keeps the type), and a rule may instead build its right side in Python
  (substitution, the variadic sums of normalization).

Conditions are named predicates.  A ``typing`` condition holds of every well-typed
match (the paper states it; the checker guarantees it); a ``semantic`` one is a real
guard, and ``properties/test_rules.py`` shows a wrong rewrite without it; a ``scope``
one keeps a sound rule to the products the paper writes it for (without it the rule
rewrites more programs, still soundly: the tensor product is associative).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Literal

from sdqlite.check.typecheck import Ctx, synth
from sdqlite.syntax import sugar
from sdqlite.syntax.ast import (
    Add,
    Empty,
    Expr,
    IntConst,
    Let,
    Mul,
    RealConst,
    Single,
    Sum,
    Var,
    free_vars,
    map_children,
)
from sdqlite.syntax.names import NameSupply, rename, substitute
from sdqlite.syntax.ops import total
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.types import REAL, DictT, IntT, RealT, Type, scalar_of


@dataclass
class Match:
    """A successful match: metavariable → expression, pattern binder → actual name, and
    the typing context and type at the matched node."""

    exprs: dict[str, Expr]
    binders: dict[str, str]
    ctx: Ctx
    type: Type

    def type_of(self, metavar: str) -> Type:
        """The type of a matched sub-expression (which lives in the matched node's scope
        only when it is not under a pattern binder — true of every use here)."""
        return synth(self.ctx, self.exprs[metavar])[1]


@dataclass(frozen=True)
class Condition:
    name: str
    kind: Literal["typing", "semantic", "scope"]
    text: str
    holds: Callable[[Match], bool]


Builder = Callable[[Match, NameSupply], Expr]


@dataclass(frozen=True)
class Rule:
    name: str
    family: str
    source: str
    lhs: str
    rhs: str | Builder
    metavars: tuple[str, ...]
    conditions: tuple[Condition, ...] = ()
    rhs_text: str = ""  # how the paper writes a right side that is built in Python
    notes: str = ""
    #: the metavariable the right side moves past another factor's layers (or to the
    #: other side of a product): a scalar wherever the conditions hold, which is what
    #: makes the rewrite an equality; asserted, so the conditions cannot drift
    moves: str = ""

    @cached_property
    def pattern(self) -> Expr:
        return parse_expr(self.lhs)

    @cached_property
    def template(self) -> Expr | None:
        return parse_expr(self.rhs) if isinstance(self.rhs, str) else None

    def match(self, e: Expr, ctx: Ctx, *, check: bool = True) -> Match | None:
        """Match ``e`` (typed in ``ctx``) against the left side; with ``check``, the
        conditions must hold too (``check=False`` is for showing a guard is needed)."""
        exprs: dict[str, Expr] = {}
        binders: dict[str, str] = {}
        if not _match(self.pattern, e, set(self.metavars), exprs, binders):
            return None
        m = Match(exprs, binders, ctx, synth(ctx, e)[1])
        if check and not all(c.holds(m) for c in self.conditions):
            return None
        assert not check or not self.moves or _is_scalar(m.type_of(self.moves)), \
            f"{self.name} moves {self.moves}, which is not a scalar"
        return m

    def apply(self, m: Match, names: NameSupply) -> Expr:
        if self.template is None:
            assert callable(self.rhs)
            return self.rhs(m, names)
        return _instantiate(self.template, m)

    def show(self) -> str:
        rhs = self.rhs if isinstance(self.rhs, str) else self.rhs_text
        conds = "; ".join(f"{c.text} ({c.kind})" for c in self.conditions)
        return f"{self.name}: {self.lhs}  ~>  {rhs}" + (f"   if {conds}" if conds else "")


def is_zero_constant(e: Expr) -> bool:
    match e:
        case Empty():
            return True
        case RealConst(r):
            return r == 0.0
        case IntConst(n):
            return n == 0
        case _:
            return False


def _is_zero_var(name: str) -> bool:
    return name == "Z" or (name.startswith("Z") and name[1:].isdigit())


def _match(p: Expr, e: Expr, metavars: set[str], exprs: dict[str, Expr],
           binders: dict[str, str]) -> bool:
    if isinstance(p, Var) and p.name in metavars:
        if _is_zero_var(p.name) and not is_zero_constant(e):
            return False
        if p.name in exprs:
            return exprs[p.name] == e
        exprs[p.name] = e
        return True
    if isinstance(p, Var):  # a pattern binder used as a variable
        return isinstance(e, Var) and binders.get(p.name) == e.name
    if type(p) is not type(e):
        return False
    match p, e:
        case Empty(pt), Empty(t) if pt is not None and pt != t:  # zero[T]: T is syntax
            return False
        case Sum(pk, pv, pd, pb), Sum(k, v, d, b):
            if (pk == "_" != k) or (pv == "_" != v):  # ``_`` binds nothing: it matches ``_``
                return False
            if binders.get(pk, k) != k or binders.get(pv, v) != v:  # one binder, one name
                return False
            binders.update({pk: k, pv: v})
            return _match(pd, d, metavars, exprs, binders) and _match(
                pb, b, metavars, exprs, binders)
        case Let(px, pr, pb), Let(x, r, b):
            if binders.get(px, x) != x:  # a pattern binder names one binder of the program
                return False
            binders[px] = x
            return _match(pr, r, metavars, exprs, binders) and _match(
                pb, b, metavars, exprs, binders)
    for f in fields(p):
        if f.name in ("span", "ty"):
            continue
        pv, ev = getattr(p, f.name), getattr(e, f.name)
        if isinstance(pv, tuple):
            if len(pv) != len(ev) or not all(
                    _match(a, b, metavars, exprs, binders) for a, b in zip(pv, ev, strict=True)):
                return False
        elif hasattr(pv, "span"):
            if not _match(pv, ev, metavars, exprs, binders):
                return False
        elif pv != ev:
            return False
    return True


def _instantiate(t: Expr, m: Match) -> Expr:
    match t:
        case Var("Z"):
            return sugar.zero(m.type)
        case Var(x) if x in m.exprs:
            return m.exprs[x]
        case Var(x) if x in m.binders:
            return Var(m.binders[x])
        case Sum(k, v, d, b):
            return Sum(m.binders.get(k, k), m.binders.get(v, v), _instantiate(d, m),
                       _instantiate(b, m))
        case Let(x, r, b):
            return Let(m.binders.get(x, x), _instantiate(r, m), _instantiate(b, m))
    return map_children(t, lambda c: _instantiate(c, m))


# ---- conditions -------------------------------------------------------------------------


def _is_scalar(t: Type) -> bool:
    return isinstance(t, RealT | IntT)


def _has_dense(t: Type) -> bool:
    return isinstance(t, DictT) and (t.dense or _has_dense(t.val))


def _is_tensor(t: Type) -> bool:
    """tensor n for n > 0: a sparse real dictionary type (Logical SDQLite)."""
    return isinstance(t, DictT) and scalar_of(t) == REAL and not _has_dense(t)


WELL_TYPED = Condition("well-typed", "typing", "the types agree (must have e1 : D1)",
                       lambda m: True)
NO_DENSE_RESULT = Condition(
    "no-dense-result", "semantic", "the product's type has no dense layer",
    lambda m: not _has_dense(m.type))
LEFT_TENSOR = Condition(
    "e1-tensor", "semantic", "e1 : tensor n, n > 0", lambda m: _is_tensor(m.type_of("e1")))
RIGHT_TENSOR = Condition(
    "e2-tensor", "semantic", "e2 : tensor n, n > 0", lambda m: _is_tensor(m.type_of("e2")))

TOTAL_E1 = Condition("e1-total", "semantic", "e1 fails nowhere (dropped, its failure would be)",
                     lambda m: total(m.exprs["e1"]))
TOTAL_E2 = Condition("e2-total", "semantic", "e2 fails nowhere (dropped, its failure would be)",
                     lambda m: total(m.exprs["e2"]))
LEFT_REAL = Condition("e1-real", "semantic", "e1 : real",
                      lambda m: isinstance(m.type_of("e1"), RealT))
BINDERS_FRESH = Condition(  # (a larger e1 is named outside the sum first: nothing captured)
    "binders-fresh", "semantic", "e1 is not a variable named k or v",
    lambda m: not (isinstance(m.exprs["e1"], Var)
                   and m.exprs["e1"].name in (m.binders["k"], m.binders["v"])))
REAL_PRODUCT = Condition("real-product", "scope", "the product is a real",
                         lambda m: isinstance(m.type, RealT))
LET_BINDER_FRESH = Condition(
    "let-binder-fresh", "semantic", "x is not free in e1",
    lambda m: m.binders["x"] not in free_vars(m.exprs["e1"]))


# ---- right sides built in Python ------------------------------------------------------


def _inline_zero(m: Match, names: NameSupply) -> Expr:
    """let x = zero[D] in e2  ~>  e2[x := zero[D]]"""
    return substitute(m.exprs["e2"], m.binders["x"], m.exprs["Z1"])


def _scalars(e: Expr, t: Type, names: NameSupply, leaf: Callable[[Expr], Expr]) -> Expr:
    """sum(<i_1,v_2> in e) ... sum(<i_n,v> in v_n) {i_1 -> ... {i_n -> leaf(v)} ...}"""
    if not isinstance(t, DictT):
        assert _is_scalar(t), "the entry the other factor meets is a scalar"
        return leaf(e)
    i, v = names.fresh("i"), names.fresh("v")
    return Sum(i, v, e, Single(Var(i), _scalars(Var(v), t.val, names, leaf)))


def _normalize_left(m: Match, names: NameSupply) -> Expr:
    e1, e2 = m.exprs["e1"], m.exprs["e2"]
    return _named(e2, names, lambda s: _scalars(e1, m.type_of("e1"), names,
                                                lambda v: Mul(v, s)))


def _normalize_right(m: Match, names: NameSupply) -> Expr:
    e1, e2 = m.exprs["e1"], m.exprs["e2"]
    return _named(e1, names, lambda s: _scalars(e2, m.type_of("e2"), names,
                                                lambda v: Mul(s, v)))


def _named(e: Expr, names: NameSupply, body: Callable[[Expr], Expr]) -> Expr:
    """``body(e)``, with ``e`` named first where it can fail (``ops.total``): moved into
    the loops over the other factor, it would not be evaluated when they run no time."""
    if total(e):
        return body(e)
    s = names.fresh("s")
    return Let(s, e, body(Var(s)))


def _scale_into_sum(right: bool) -> Builder:
    """e1 * sum(<k,v> in e2) e3 ~> sum(<k,v> in e2) e1 * e3 (e3 * e1 on the right), e1
    named first unless it is a variable or a constant: it is computed once, not once per
    entry (logistic regression's exp of a row's product, in the loop over the row)."""
    def build(m: Match, names: NameSupply) -> Expr:
        e1, e2, e3 = m.exprs["e1"], m.exprs["e2"], m.exprs["e3"]
        k, v = m.binders["k"], m.binders["v"]
        if isinstance(e1, Var | RealConst | IntConst):
            return Sum(k, v, e2, Mul(e3, e1) if right else Mul(e1, e3))
        t = names.fresh("s")
        return Let(t, e1, Sum(k, v, e2, Mul(e3, Var(t)) if right else Mul(Var(t), e3)))
    return build


def _fuse_sums(m: Match, names: NameSupply) -> Expr:
    """Two loops over one domain become one: the bodies over fresh binders (no capture)."""
    key, val = names.fresh("k"), names.fresh("v")

    def body(e: Expr, k: str, v: str) -> Expr:  # the value first: it shadows a same-named key
        return rename(rename(e, m.binders[v], val), m.binders[k], key)

    return Sum(key, val, m.exprs["e1"], Add(body(m.exprs["e2"], "k", "v"),
                                            body(m.exprs["e3"], "k2", "v2")))


# ---- the table of Fig. fig:trans ---------------------------------------------------------

SPARSITY = "sparsity propagation"
NORMALIZATION = "multiplication normalization"
FIG = "Fig. fig:trans"

RULES: tuple[Rule, ...] = (
    Rule("zero-mul-left", SPARSITY, FIG, "Z1 * e2", "Z", ("Z1", "e2"),
         (NO_DENSE_RESULT, TOTAL_E2),
         notes="zero[D1] * e2 ~> zero[D1 ⊗ D2]; a scalar 0 times a dense array keeps its "
               "positions, so the result must have no dense layer"),
    Rule("zero-mul-right", SPARSITY, FIG, "e1 * Z2", "Z", ("e1", "Z2"),
         (NO_DENSE_RESULT, TOTAL_E1),
         notes="e1 * zero[D2] ~> zero[D1 ⊗ D2]"),
    Rule("add-zero-right", SPARSITY, FIG, "e1 + Z1", "e1", ("e1", "Z1"), (WELL_TYPED,)),
    Rule("add-zero-left", SPARSITY, FIG, "Z1 + e2", "e2", ("Z1", "e2"), (WELL_TYPED,)),
    Rule("zero-lookup", SPARSITY, FIG, "Z1(e2)", "Z", ("Z1", "e2"), (WELL_TYPED, TOTAL_E2),
         notes="zero[tensor n](e2) ~> zero[tensor (n-1)]; n > 0 holds of a lookup"),
    Rule("let-zero", SPARSITY, FIG, "let x = Z1 in e2", _inline_zero, ("Z1", "e2"),
         rhs_text="e2[x := zero[D]]", notes="the constant propagation sparsity needs"),
    Rule("sum-zero", SPARSITY, FIG, "sum(<k, v> in Z1) e2", "Z", ("Z1", "e2"), (WELL_TYPED,),
         notes="sum(<k,v> in zero[D]) e2 ~> zero[D2]"),
    # Before an outer product is expanded, a scalar factor moves inwards to the scalar
    # products (STOREL's algebra, research/storel-rules.md), as §5.4's normalized BATAX.
    Rule("scale-into-sum", NORMALIZATION, "STOREL sum-fact-inv-1",
         "e1 * sum(<k, v> in e2) e3", _scale_into_sum(right=False), ("e1", "e2", "e3"),
         (NO_DENSE_RESULT, BINDERS_FRESH),
         rhs_text="sum(<k, v> in e2) e1 * e3 (e1 named first when it is not a variable or "
                  "a constant)"),
    Rule("scale-into-let", NORMALIZATION, "STOREL let-floating",
         "e1 * let x = e2 in e3", "let x = e2 in e1 * e3", ("e1", "e2", "e3"),
         (LET_BINDER_FRESH,),
         notes="a factor moves into a let body (storage composition leaves §5.4's "
               "`let r = <a CSR row> in r * r` under beta)"),
    Rule("scale-into-single", NORMALIZATION, "STOREL sing-mult-4",
         "e1 * {e2 -> e3}", "{e2 -> e1 * e3}", ("e1", "e2", "e3"), (LEFT_REAL,), moves="e1"),
    # the same on the right: a row times a scalar (least squares' r * row) is scaled in
    # place, not first built as a dictionary and then iterated
    Rule("scale-into-sum-right", NORMALIZATION, "STOREL sum-fact-inv-2",
         "(sum(<k, v> in e2) e3) * e1", _scale_into_sum(right=True), ("e1", "e2", "e3"),
         (NO_DENSE_RESULT, BINDERS_FRESH),
         rhs_text="sum(<k, v> in e2) e3 * e1 (e1 named first, as on the left)"),
    Rule("scale-into-single-right", NORMALIZATION, "STOREL sing-mult-1",
         "{e2 -> e3} * e1", "{e2 -> e3 * e1}", ("e1", "e2", "e3"), (WELL_TYPED,),
         notes="a singleton's layer stays the outer one whatever e1 is"),
    # once products are loops, a sum of two loops over one domain is one loop (the two
    # halves of d(r * r) = r * dr + dr * r in least squares), its singletons one singleton,
    # and a scalar product added to its mirror image twice the product
    Rule("sum-add-fuse", NORMALIZATION, "horizontal fusion",
         "(sum(<k, v> in e1) e2) + (sum(<k2, v2> in e1) e3)", _fuse_sums,
         ("e1", "e2", "e3"), (WELL_TYPED,),
         rhs_text="sum(<k', v'> in e1) e2[k, v := k', v'] + e3[k2, v2 := k', v'] (k', v' fresh)",
         notes="sums distribute over +; fresh binders, so neither body captures a name"),
    Rule("single-add", NORMALIZATION, "STOREL (disabled there)",
         "{e1 -> e2} + {e1 -> e3}", "{e1 -> e2 + e3}", ("e1", "e2", "e3"), (WELL_TYPED,)),
    Rule("double-product", NORMALIZATION, "commutative scaling",
         "e1 * e2 + e2 * e1", "2.0 * (e1 * e2)", ("e1", "e2"), (LEFT_REAL,),
         notes="a real scales the same on either side", moves="e1"),
    Rule("scalar-assoc", NORMALIZATION, "STOREL mult-assoc2",
         "e1 * (e2 * e3)", "(e1 * e2) * e3", ("e1", "e2", "e3"), (REAL_PRODUCT,),
         notes="scalar products are kept left-nested, as the paper writes beta * v1 * v2"),
    Rule("mul-normalize-left", NORMALIZATION, FIG, "e1 * e2", _normalize_left, ("e1", "e2"),
         (LEFT_TENSOR,),
         rhs_text="sum(<i_1,v_2> in e1) ... sum(<i_n,v> in v_n) {i_1 -> ... {i_n -> v * e2}}",
         notes="the paper prints v * e1 in the innermost singleton; v is e1's entry, so the "
               "product is v * e2"),
    Rule("mul-normalize-right", NORMALIZATION, FIG, "e1 * e2", _normalize_right, ("e1", "e2"),
         (LEFT_REAL, RIGHT_TENSOR),
         rhs_text="sum(<i_1,v_2> in e2) ... sum(<i_n,v> in v_n) {i_1 -> ... {i_n -> e1 * v}}",
         moves="e1"),
)

RULES_BY_NAME = {r.name: r for r in RULES}


def family(name: str) -> tuple[Rule, ...]:
    return tuple(r for r in RULES if r.family == name)




"""Hypothesis generators: well-typed programs in a context, values of a type, and
ill-typed programs.

``programs()`` draws a context Γ of inputs, a type T and an expression e with
Γ ⊢ e : T, type-directed: for the wanted type it picks among the productions of
Fig. fig:langs (and the Physical constructs) that can produce it, leaves first so that
Hypothesis shrinks towards small programs.  Sizes are kept small (depth ≤ 4, at most 4
entries per dictionary, ranges of at most 4 positions) so that the suite stays fast.
Unary operations get arguments inside their domain (``log(1.0 + e * e)``), so every
generated program evaluates.

The AD theorems hold at generic points, so by default no entry cancels and no zero is
written on purpose.  The compiled code must agree with the interpreter at every point:
``NONGENERIC`` (and ``LOGICAL_NONGENERIC``) add productions that reach the others
(issue 30): ``e + (-1.0) * e``, whose entries cancel to exactly zero; ``0.0`` in
singletons and arrays; ``sum(<k, v> in e) 1.0``, which counts the entries a dictionary
stores (a kept zero counts); and a lookup at a key no dictionary has, ``d(9)``, of a
dictionary iterated afterwards (a lookup that inserted its key would be counted):
``let m = d(9) in m + sum(<k, v> in d) 1.0``.

By default names collide (issue 30, class 2): inputs are named like generated C++
(``result``, ``kernel``, ``std``, ``main``, ``errno``, ...) or like an earlier input's
flat arrays in a storage format (``V1_pos``), and binders of sums, maps, lets and
storage definitions are often an input's or an outer binder's name, which they shadow
(``flat_named`` renames a case's input after another's flat array, both read), also
where the lowering needs a value: ``(let x = e0 in x + e1) * e2`` rebinds a name x in
scope inside an operand (the production ``shadow``). Dense
arrays are often views, and views of views, of inputs, literals and ranges that start
elsewhere than 0 (class 3), and dictionaries of arrays (``ARRAYS``) are inputs, domains
and results (class 4). ``FRESH`` and ``LOGICAL_FRESH`` are the programs without these,
on which the coverage properties' thresholds were set.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, cast

from hypothesis import strategies as st

from sdqlite.ad.gradient import checked
from sdqlite.check.typecheck import typecheck
from sdqlite.storage.formats import Format, formats_for, resolve
from sdqlite.syntax.ast import (
    Add,
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
    Single,
    SubArray,
    Sum,
    Unique,
    UnOp,
    Var,
    free_vars,
    subterms,
)
from sdqlite.syntax.names import rename
from sdqlite.syntax.types import (
    BOOL,
    INT,
    REAL,
    BoolT,
    DictT,
    IntT,
    RealT,
    Type,
    is_semiring,
    scalar_of,
    splits,
)
from semantics.extents import check_extents
from semantics.values import Value, dense, is_zero

Draw = Any  # hypothesis' draw function
Ctx = dict[str, Type]

SPARSE1, SPARSE2 = DictT(REAL), DictT(DictT(REAL))
DENSE_REAL, DENSE_INT = DictT(REAL, dense=True), DictT(INT, dense=True)
DENSE_MATRIX = DictT(DENSE_REAL, dense=True)
#: a dictionary of arrays: dense inside sparse (issue 30, classes 3 and 4), its arrays
#: often views that start at different positions
ARRAYS = DictT(DENSE_REAL)
#: the types of inputs and of intermediate results the generator uses
INPUT_TYPES: list[Type] = [REAL, SPARSE1, SPARSE2, INT, DENSE_REAL, DENSE_INT, DENSE_MATRIX,
                           ARRAYS]
DOMAIN_TYPES: list[Type] = [SPARSE1, SPARSE2, DENSE_REAL, DENSE_INT, DictT(INT), ARRAYS]
RESULT_TYPES: list[Type] = [REAL, SPARSE1, SPARSE2, INT, BOOL, DENSE_REAL, DENSE_INT, ARRAYS]
REALS = [1.5, -2.0, 0.5, 3.0, -0.25, 2.0, 1.0]


@dataclass(frozen=True)
class Lang:
    """Which fragment to generate: the types in play and whether Physical constructs
    (ranges, sub-arrays, unique, array literals, dense arrays) may appear."""

    inputs: list[Type]
    domains: list[Type]
    results: list[Type]
    physical: bool
    generic: bool = True  # no entry made to cancel, no zero written, no key missed
    collide: bool = True  # names from small pools: binders shadow, inputs named like C++
    nested: bool = True  # views of views


PHYSICAL = Lang(INPUT_TYPES, DOMAIN_TYPES, RESULT_TYPES, physical=True)
#: Logical SDQLite (Fig. fig:langs, upper half): what differentiation is defined on
LOGICAL = Lang([REAL, SPARSE1, SPARSE2, INT], [SPARSE1, SPARSE2],
               [REAL, SPARSE1, SPARSE2, INT, BOOL], physical=False)
#: the same, reaching the points where entries cancel, zeros are written and keys missed
NONGENERIC, LOGICAL_NONGENERIC = replace(PHYSICAL, generic=False), \
    replace(LOGICAL, generic=False)
#: every binder fresh, the inputs named x, V1, M, s', y, no dictionary of arrays and no
#: view of a view: what the coverage properties count rules on (their thresholds were set
#: on these programs)
FRESH = Lang([t for t in INPUT_TYPES if t != ARRAYS], [t for t in DOMAIN_TYPES if t != ARRAYS],
             [t for t in RESULT_TYPES if t != ARRAYS], physical=True, collide=False,
             nested=False)
LOGICAL_FRESH = replace(LOGICAL, collide=False, nested=False)
#: a key no generated dictionary has (keys are 0..5, ranges and arrays shorter)
MISSING_KEY = 9
MAX_DEPTH = 4

# Unary operations with an argument wrapper that keeps them inside their domain.
_ONE = RealConst(1.0)


def _square_plus_one(e: Expr) -> Expr:
    return Add(_ONE, Mul(e, e))


OP_ARGS = {
    "sin": lambda e: e,
    "cos": lambda e: e,
    "tanh": lambda e: e,
    "exp": lambda e: UnOp("sin", e),
    "log": _square_plus_one,
    "sqrt": _square_plus_one,
    "inv": _square_plus_one,
}


class Names:
    """An explicit name supply (no global counter: shrinking stays reproducible)."""

    def __init__(self) -> None:
        self.n = 0

    def fresh(self, draw: Draw, stem: str) -> str:
        self.n += 1
        prime = "'" if draw(st.integers(0, 4)) == 0 else ""
        return f"{stem}{self.n}{prime}"


@dataclass(frozen=True)
class Generated:
    """A well-typed program: Γ ⊢ expr : type."""

    ctx: Ctx
    expr: Expr
    type: Type


# ---- values -----------------------------------------------------------------------------


def values(t: Type, *, exact: bool = False, nonzero: bool = True) -> st.SearchStrategy[Value]:
    """Canonical values of type ``t``; reals are Fractions when ``exact``.

    Dictionary entries are non-zero (generic points); dense arrays may hold zeros."""
    match t:
        case RealT():
            if exact:
                q = st.builds(lambda n, d, sign: Fraction(sign * n, d), st.integers(1, 6),
                              st.integers(1, 4), st.sampled_from([1, -1]))
                return q if nonzero else st.one_of(st.just(Fraction(0)), q)
            r = st.sampled_from([0.5, -1.25, 2.0, 1.5, -0.75, 3.0, 0.1])
            return r if nonzero else st.one_of(st.just(0.0), r)
        case IntT():
            return st.integers(0, 4)
        case BoolT():
            return st.booleans()
        case DictT(val, True):
            return st.lists(values(val, exact=exact, nonzero=False), max_size=4).map(dense)
        case DictT(val, False):
            return st.dictionaries(st.integers(0, 5), values(val, exact=exact), max_size=4).map(
                lambda d: {k: x for k, x in d.items() if not is_zero(x)})
    raise AssertionError(t)


#: the inputs' usual names, by position (shrinking goes there)
INPUT_NAMES = ["x", "V1", "M", "s'", "y"]
#: names of generated C++: the entry point's parameters and locals, the C and C++
#: libraries' namespaces, functions and macros
CPP_NAMES = ["result", "kernel", "std", "main", "errno", "data", "stdin", "size", "out",
             "lens", "next", "assert"]


def _flat_names(x: str, t: Type) -> list[str]:
    """The names of x's flat arrays in the formats its type admits (an input A in CSR is
    A_len, A_pos, A_idx and A_val once composed)."""
    return sorted({f"{x}_{p}" for f in formats_for(t) for p, _ in resolve(f, t).params})


@st.composite
def contexts(draw: Draw, max_inputs: int = 3, lang: Lang = PHYSICAL) -> Ctx:
    """Γ: up to ``max_inputs`` inputs, the first of a real type. When ``lang.collide``,
    an input may be named like generated C++ or like an earlier input's flat array in a
    storage format (``V1_pos`` beside ``V1``)."""
    n = draw(st.integers(1, max_inputs))
    real = [t for t in lang.inputs if t in (REAL, SPARSE1, SPARSE2)]  # one input is real
    ctx: Ctx = {}
    for i in range(n):
        name = INPUT_NAMES[i]
        if lang.collide:
            flat = [y for x, t in ctx.items() if "'" not in x for y in _flat_names(x, t)]
            name = draw(st.one_of(st.just(name), st.sampled_from(CPP_NAMES),
                                  *([st.sampled_from(flat)] if flat else [])))
            name = INPUT_NAMES[i] if name in ctx else name
        ctx[name] = draw(st.sampled_from(real if i == 0 else lang.inputs))
    return ctx


@st.composite
def flat_named(draw: Draw, g: Generated, env: dict[str, Value], formats: dict[str, str],
               keep: str | None = None) -> tuple[Generated, dict[str, Value], dict[str, str]]:
    """The same case with one input renamed after another's flat array in the format it
    is stored in (``Y`` → ``X_pos``, X in CSR), both read by the program; unchanged where
    the program reads no two such inputs; ``keep`` (what the case differentiates by) keeps
    its name. (``contexts`` names inputs so too, but seldom has the program read both.)"""
    used = sorted(free_vars(g.expr) & set(g.ctx))
    wrt = {e.var for e in subterms(g.expr) if isinstance(e, Gradient)} | {keep}
    options = [(y, f"{x}_{p}") for x in used if "'" not in x
               for p, _ in resolve(formats[x], g.ctx[x]).params
               for y in used if y != x and y not in wrt and f"{x}_{p}" not in g.ctx]
    if not options:
        return g, env, formats
    old, new = draw(st.sampled_from(options))

    def renamed(m: dict[str, Any]) -> dict[str, Any]:
        return {new if x == old else x: v for x, v in m.items()}

    return (Generated(renamed(g.ctx), rename(g.expr, old, new), g.type), renamed(env),
            renamed(formats))


@st.composite
def environments(draw: Draw, ctx: Ctx, exact: bool = False) -> dict[str, Value]:
    return {x: draw(values(t, exact=exact)) for x, t in ctx.items()}


# ---- expressions ------------------------------------------------------------------------


def _vars(ctx: Ctx, t: Type) -> list[str]:
    return [x for x, s in ctx.items() if s == t]


def _small_int(draw: Draw, lo: int = 0) -> Expr:
    return IntConst(draw(st.integers(lo, lo + 3)))


def _view(draw: Draw, a: Expr) -> Expr:
    """a(lo:hi), a view; half the time a view of a view, ``a(lo0:hi0)(lo:hi)``, whose
    positions are read through both starts (issue 30, class 3)."""
    lo = draw(st.integers(0, 2))
    hi = lo + draw(st.integers(1, 4))
    if draw(st.booleans()):  # the outer view mostly inside the inner one (its positions
        a = SubArray(a, IntConst(lo), IntConst(hi))  # shared), sometimes past its end
        lo = draw(st.integers(lo, hi - 1))
        hi = draw(st.integers(lo + 1, hi + 1))
    return SubArray(a, IntConst(lo), IntConst(hi))


def _leaf(draw: Draw, ctx: Ctx, t: Type, lang: Lang = PHYSICAL) -> Expr:
    vs = _vars(ctx, t)
    if vs and draw(st.integers(0, 3)) > 0:  # mostly inputs and bound variables
        x = Var(draw(st.sampled_from(vs)))
        if lang.nested and isinstance(t, DictT) and t.dense and draw(st.integers(0, 2)) == 0:
            return _view(draw, x)
        return x
    match t:
        case RealT():
            if not lang.generic and draw(st.integers(0, 3)) == 0:
                return RealConst(0.0)  # a zero written into a singleton or an array
            return RealConst(draw(st.sampled_from(REALS)))
        case IntT():
            return IntConst(draw(st.integers(0, 3)))
        case BoolT():
            return BoolConst(draw(st.booleans()))
        case DictT(val, False):
            if draw(st.booleans()):
                return Empty(t)
            return Single(IntConst(draw(st.integers(0, 4))), _leaf(draw, ctx, val, lang))
        case DictT(IntT(), True) if draw(st.booleans()):
            lo = draw(st.integers(0, 2))
            rng = Range(IntConst(lo), IntConst(lo + draw(st.integers(0, 3))))
            return _view(draw, rng) if lang.nested and draw(st.booleans()) else rng
        case DictT(val, True):
            n = draw(st.integers(1, 3))
            lit = ArrayLit(tuple(_leaf(draw, ctx, val, lang) for _ in range(n)))
            if draw(st.integers(0, 2)) > 0:
                return lit
            # positions that start elsewhere than 0, some past the literal's end (zeros)
            if draw(st.integers(0, 3)) == 0:  # [] where its type is known: + [] adds nothing
                return Add(lit, ArrayLit(()))
            if lang.nested:
                return _view(draw, lit)
            lo = draw(st.integers(0, 2))
            return SubArray(lit, IntConst(lo), IntConst(lo + draw(st.integers(0, 3))))
    raise AssertionError(t)


def _binder(draw: Draw, names: Names, stem: str, ctx: Ctx, lang: Lang,
            taken: tuple[str, ...] = ()) -> str:
    """A binder's name: mostly fresh; when ``lang.collide``, one time in four the stem
    itself or a name in scope (an input or an outer binder, shadowed in the body), so that
    names collide where sizes, lookups, fusion and the C++ reason about them."""
    pool = [x for x in [stem, *sorted(ctx)] if x not in taken]
    if lang.collide and pool and draw(st.integers(0, 3)) == 0:
        return cast(str, draw(st.sampled_from(pool)))
    return names.fresh(draw, stem)


def _shadowable(ctx: Ctx, t: Type) -> list[tuple[Type, Type, str]]:
    """The ways to write t as t1 * t2 with a name of type t1 in scope to rebind."""
    if not is_semiring(t):
        return []
    return [(t1, t2, x) for t1, t2 in splits(t) for x in sorted(ctx) if ctx[x] == t1]


def _bind(ctx: Ctx, **binds: Type) -> Ctx:
    return {**ctx, **{x: t for x, t in binds.items() if x != "_"}}


def gen(draw: Draw, ctx: Ctx, t: Type, depth: int, names: Names,
        lang: Lang = PHYSICAL) -> Expr:
    """An expression e with ctx ⊢ e : t (one production per construct)."""
    if depth <= 0:
        return _leaf(draw, ctx, t, lang)
    d = depth - 1

    def rec(ctx: Ctx, t: Type) -> Expr:  # a sub-expression, one level down
        return gen(draw, ctx, t, d, names, lang)

    options: list[str] = ["leaf", "let"]  # "leaf" first: shrinking goes there
    if is_semiring(t):
        options += ["if", "sum", "sum", "lookup", "add", "mul", "mul"]
    match t:
        case RealT():
            options += ["unop"]
        case IntT():
            options += ["unique"] if lang.physical else []
        case BoolT():
            options += ["eq", "not"]
        case DictT(_, False):
            options += ["single", "map"] + (["storage"] if lang.physical else [])
        case DictT(_, True):
            options += ["subarray", "array"] + (["range"] if t == DENSE_INT else [])
    if _projectable(ctx, t):
        options += ["project", "project"]
    if _gradient_splits(ctx, t):
        options += ["gradient"]
    if not lang.generic and is_semiring(t) and scalar_of(t) == REAL:
        options += ["cancel"] + (["count", "miss"] if t == REAL else [])
    if lang.collide and _shadowable(ctx, t):
        options += ["shadow"]
    choice = draw(st.sampled_from(options))
    match choice:
        case "leaf":
            return _leaf(draw, ctx, t, lang)
        case "cancel":  # e + (-1.0) * e: every entry cancels to exactly zero
            e = rec(ctx, t)
            return Add(e, Mul(RealConst(-1.0), e))
        case "count":  # sum(<k, v> in e) 1.0: how many entries e stores
            dom_t = draw(st.sampled_from(lang.domains))
            k = _binder(draw, names, "k", ctx, lang)
            return Sum(k, _binder(draw, names, "v", ctx, lang, (k,)), rec(ctx, dom_t),
                       RealConst(1.0))
        case "miss":  # let d = e in let m = d(9) in m + sum(<k, v> in d) f(v): a key
            # missed, then d iterated (m is bound first: the lookup runs before the loop)
            dom_t = draw(st.sampled_from([u for u in lang.domains if scalar_of(u) == REAL]))
            assert isinstance(dom_t, DictT)
            x, m, k, v = (names.fresh(draw, stem) for stem in ("d", "m", "k", "v"))
            missed: Expr = Lookup(Var(x), IntConst(MISSING_KEY))
            if isinstance(dom_t.val, DictT):
                missed = Lookup(missed, IntConst(0))
            body: Expr = UnOp("cos", Var(v)) if dom_t.val == REAL and draw(st.booleans()) \
                else RealConst(1.0)  # (cos 0 = 1: a kept zero or an inserted key counts)
            return Let(x, rec(ctx, dom_t), Let(m, missed, Add(Var(m), Sum(k, v, Var(x), body))))
        case "let":  # let x = e1 in e2; x sometimes a name in scope, shadowed in e2
            s = draw(st.sampled_from(lang.results))
            x = (draw(st.sampled_from(sorted(ctx))) if ctx and draw(st.integers(0, 4)) == 0
                 else names.fresh(draw, "t"))
            rhs = rec(ctx, s)
            return Let(x, rhs, rec(_bind(ctx, **{x: s}), t))
        case "if":  # if c then e
            return If(rec(ctx, BOOL), rec(ctx, t))
        case "sum":  # sum(<k,v> in e1) e2
            dom_t = draw(st.sampled_from(lang.domains))
            assert isinstance(dom_t, DictT)
            k = "_" if draw(st.integers(0, 5)) == 0 else _binder(draw, names, "k", ctx, lang)
            v = "_" if draw(st.integers(0, 5)) == 0 else \
                _binder(draw, names, "v", ctx, lang, (k,))
            storage = lang.physical and not dom_t.dense and draw(st.integers(0, 3)) == 0
            dom = _storage(draw, ctx, dom_t, rec, names, lang) if storage else rec(ctx, dom_t)
            inner = _bind(ctx, **{k: INT, v: dom_t.val})
            scaled = [d2 for d1, d2 in splits(t) if d1 == dom_t.val]
            if storage and v != "_" and scaled:  # v * e: zero when v is (what fusion needs)
                return Sum(k, v, dom, Mul(Var(v), rec(inner, draw(st.sampled_from(scaled)))))
            return Sum(k, v, dom, rec(inner, t))
        case "lookup":  # e1(e2)
            dense_dict = lang.physical and draw(st.booleans())
            return Lookup(rec(ctx, DictT(t, dense_dict)),
                          rec(ctx, INT))
        case "add":
            return Add(rec(ctx, t), rec(ctx, t))
        case "mul":  # e1 * e2 : D1 ⊗ D2
            t1, t2 = draw(st.sampled_from(splits(t)))
            return Mul(rec(ctx, t1), rec(ctx, t2))
        case "shadow":  # (let x = e0 in x + e1) * e2, x a name in scope: a let where DPS
            # needs its value (an operand), rebinding a name its body reads
            t1, t2, x = draw(st.sampled_from(_shadowable(ctx, t)))
            return Mul(Let(x, rec(ctx, t1), Add(Var(x), rec(ctx, t1))), rec(ctx, t2))
        case "unop":
            op = draw(st.sampled_from(sorted(OP_ARGS)))
            return UnOp(op, OP_ARGS[op](rec(ctx, REAL)))
        case "unique":
            return Unique(rec(ctx, INT))
        case "eq":
            s = draw(st.sampled_from([INT, BOOL]))
            return Eq(rec(ctx, s), rec(ctx, s))
        case "not":
            return Not(rec(ctx, BOOL))
        case "map":  # §3: sum(<k,v> in e) {k -> f(v)}, the identity map when f(v) = v
            assert isinstance(t, DictT)
            dom_t = DictT(t.val, dense=lang.physical and draw(st.booleans()))
            k = _binder(draw, names, "k", ctx, lang)
            v = _binder(draw, names, "v", ctx, lang, (k,))
            body = Var(v) if draw(st.booleans()) else rec(_bind(ctx, **{k: INT, v: t.val}),
                                                          t.val)
            return Sum(k, v, rec(ctx, dom_t), Single(Var(k), body))
        case "storage":
            return _storage(draw, ctx, t, rec, names, lang)
        case "single":  # {e1 -> e2}
            assert isinstance(t, DictT)
            return Single(rec(ctx, INT), rec(ctx, t.val))
        case "array":  # [e1, ..., en], each element computed
            assert isinstance(t, DictT)
            return ArrayLit(tuple(rec(ctx, t.val) for _ in range(draw(st.integers(1, 3)))))
        case "subarray":  # e(lo:hi), small (with nested, a view of a view half the time)
            if lang.nested:
                return _view(draw, rec(ctx, t))
            lo = draw(st.integers(0, 2))
            return SubArray(rec(ctx, t), IntConst(lo),
                            IntConst(lo + draw(st.integers(0, 3))))
        case "project":  # sum(<k,v> in X) ... v : an input of a larger type, summed down to t
            x = draw(st.sampled_from(_projectable(ctx, t)))
            return _project(Var(x), ctx[x], t, names, draw, ctx, lang)
        case "gradient":  # gradient e x : T ⊗ τ_x, e of Logical SDQLite
            x, body_t = draw(st.sampled_from(_gradient_splits(ctx, t)))
            logical = replace(LOGICAL, generic=lang.generic, collide=lang.collide,
                              nested=lang.nested)
            return Gradient(gen(draw, ctx, body_t, d, names, logical), x)
        case "range":  # (lo:hi), small
            return Range(_small_int(draw), _small_int(draw, 2))
    raise AssertionError(choice)


def _storage(draw: Draw, ctx: Ctx, t: Type, rec: Callable[[Ctx, Type], Expr],
             names: Names, lang: Lang) -> Expr:
    """Fig. storage_spec's shape: sum(<k,v> in (lo:hi)) {unique(key) -> e}, with a key
    that keeps the promise (v, k or (lo:hi)(k): positions of the range)."""
    assert isinstance(t, DictT)
    rng = Range(IntConst(draw(st.integers(0, 2))), IntConst(draw(st.integers(0, 4))))
    k = _binder(draw, names, "k", ctx, lang)
    v = _binder(draw, names, "v", ctx, lang, (k,))
    key = draw(st.sampled_from([Var(v), Var(k), Lookup(rng, Var(k))]))
    return Sum(k, v, rng, Single(Unique(key), rec(_bind(ctx, **{k: INT, v: INT}), t.val)))


def _projectable(ctx: Ctx, t: Type) -> list[str]:
    """Inputs of type {int -> ... {int -> t}} (sparse), that a sum can bring down to t."""
    out = []
    for x, s in ctx.items():
        while isinstance(s, DictT) and not s.dense:
            s = s.val
            if s == t and is_semiring(t):
                out.append(x)
                break
    return sorted(out)


def _gradient_splits(ctx: Ctx, t: Type) -> list[tuple[str, Type]]:
    """(x, T) with x a real tensor input and T ⊗ type(x) = t."""
    real = (REAL, SPARSE1, SPARSE2)
    return [(x, body_t) for x in sorted(ctx) if ctx[x] in real
            for body_t, tau in splits(t) if tau == ctx[x] and body_t in real]


def _project(e: Expr, s: Type, t: Type, names: Names, draw: Draw, ctx: Ctx, lang: Lang
             ) -> Expr:
    if s == t:
        return e
    assert isinstance(s, DictT)
    k = _binder(draw, names, "k", ctx, lang)
    v = _binder(draw, names, "v", ctx, lang, (k,))
    return Sum(k, v, e, _project(Var(v), s.val, t, names, draw, _bind(ctx, **{k: INT, v: s.val}),
                                   lang))


def nongeneric(e: Expr) -> dict[str, bool]:
    """Which of ``NONGENERIC``'s points a program reaches (for the properties' events)."""
    subs = list(subterms(e))
    return {
        "entries made to cancel": any(isinstance(x, Mul) and x.left == RealConst(-1.0)
                                      for x in subs),
        "a zero written": any(x == RealConst(0.0) for x in subs),
        "a key missed": any(isinstance(x, Lookup) and x.key == IntConst(MISSING_KEY)
                            for x in subs),
        "entries counted": any(isinstance(x, Sum) and x.body == RealConst(1.0) for x in subs)}


@st.composite
def programs(draw: Draw, ctx: Ctx | None = None, type: Type | None = None,
             max_depth: int = MAX_DEPTH, lang: Lang = PHYSICAL) -> Generated:
    """A well-typed program Γ ⊢ e : T (of Logical SDQLite with ``lang=LOGICAL``)."""
    ctx = draw(contexts(lang=lang)) if ctx is None else ctx
    t = draw(st.sampled_from(lang.results)) if type is None else type
    depth = draw(st.integers(min(2, max_depth), max_depth))
    return Generated(ctx, gen(draw, ctx, t, depth, Names(), lang), t)


# ---- ill-typed programs -----------------------------------------------------------------

_NON_DICT = [REAL, INT, BOOL]


@st.composite
def ill_typed(draw: Draw) -> tuple[Ctx, Expr, str]:
    """A program that breaks exactly one typing rule, inside a well-typed context.

    Returns (Γ, e, the rule broken).  Operands are variables, so no literal can
    make the program well-typed by being checked against another type."""
    g = draw(programs(max_depth=2))
    ctx = dict(g.ctx)
    pool: list[Type] = [REAL, INT, BOOL, SPARSE1, DENSE_REAL]

    def var(t: Type) -> Var:
        name = f"w{len(ctx)}"
        ctx[name] = t
        return Var(name)

    def two_types() -> tuple[Type, Type]:
        a = draw(st.sampled_from([t for t in pool if is_semiring(t)]))
        b = draw(st.sampled_from([t for t in pool if t != a]))
        return a, b

    rule = draw(st.sampled_from([
        "add", "lookup-dict", "lookup-key", "sum-dom", "if-cond", "not", "op", "eq", "mul",
        "single-key", "single-val", "unbound", "range", "subarray",
    ]))
    bad: Expr
    match rule:
        case "add":
            a, b = two_types()
            bad = Add(var(a), var(b))
        case "lookup-dict":
            bad = Lookup(var(draw(st.sampled_from(_NON_DICT))), IntConst(0))
        case "lookup-key":
            bad = Lookup(var(SPARSE1), var(draw(st.sampled_from([REAL, BOOL, SPARSE1]))))
        case "sum-dom":
            bad = Sum("k", "v", var(draw(st.sampled_from(_NON_DICT))), RealConst(1.0))
        case "if-cond":
            bad = If(var(draw(st.sampled_from([REAL, INT, SPARSE1]))), RealConst(1.0))
        case "not":
            bad = Not(var(draw(st.sampled_from([REAL, INT, SPARSE1]))))
        case "op":
            bad = UnOp("sin", var(draw(st.sampled_from([INT, BOOL, SPARSE1]))))
        case "eq":
            t = draw(st.sampled_from([REAL, SPARSE1, DENSE_REAL]))
            bad = Eq(var(t), var(t))
        case "mul":
            bad = Mul(var(REAL), var(draw(st.sampled_from([INT, BOOL, DENSE_INT]))))
        case "single-key":
            bad = Single(var(draw(st.sampled_from([REAL, BOOL]))), RealConst(1.0))
        case "single-val":
            bad = Single(IntConst(0), var(BOOL))
        case "unbound":
            bad = Var("nowhere")
        case "range":
            bad = Range(var(draw(st.sampled_from([REAL, BOOL]))), IntConst(2))
        case "subarray":
            bad = SubArray(var(SPARSE1), IntConst(0), IntConst(1))
        case _:
            raise AssertionError(rule)
    where = draw(st.sampled_from(["top", "let", "sum"]))
    if where == "let":
        bad = Let("z", bad, g.expr)
    elif where == "sum":
        bad = Sum("k", "v", Single(IntConst(1), RealConst(1.0)), Let("z", bad, RealConst(2.0)))
    return ctx, bad, rule


@st.composite
def programs_with_env(draw: Draw, exact: bool = False) -> tuple[Generated, dict[str, Value]]:
    """A well-typed program and values for its inputs."""
    g = draw(programs())
    return g, draw(environments(g.ctx, exact=exact))


@st.composite
def seeds(draw: Draw, x_value: Value, x_type: Type, tau: Type) -> Value:
    """A seed tensor of type ``x_type ⊗ tau`` supported on the stored entries of ``x``
    (directions keep the input's shape, as the paper's differentials do)."""
    from semantics.oracle import nested, real_leaves
    from semantics.values import add

    acc: Value = {} if isinstance(x_type, DictT) or isinstance(tau, DictT) else Fraction(0)
    for q, _ in real_leaves(x_value, x_type):
        acc = add(acc, nested(q, draw(values(tau, exact=True))))
    return acc


# ---- inputs with declared sizes ----------------------------------------------------------

#: inputs with declared sizes: x dense with n positions, X2 a dense m×n matrix, V1's keys
#: and M's columns below n, M's rows below m
SIZED_CTX: Ctx = {"x": DictT(REAL, dense=True, extent="n"), "V1": DictT(REAL, extent="n"),
                  "M": DictT(DictT(REAL, extent="n"), extent="m"), "s'": REAL,
                  "X2": DictT(DictT(REAL, dense=True, extent="n"), dense=True, extent="m")}


@st.composite
def sized_environments(draw: Draw, nonempty: bool = False) -> dict[str, Value]:
    """ρ obeying SIZED_CTX's sizes (x may hold zeros: every position is stored); with
    ``nonempty``, n ≥ 2, m from 1 to 6, every sparse vector an entry (m is often above n:
    a key of M's rows need not be a position of x)."""
    n = draw(st.integers(2 if nonempty else 0, 4))
    m = draw(st.integers(1, 6) if nonempty else st.integers(0, 5))
    q = values(REAL, exact=True)

    def vector() -> dict[int, Value]:
        keys = draw(st.sets(st.integers(0, n - 1), min_size=int(nonempty), max_size=n)) \
            if n else set()
        return {k: draw(q) for k in sorted(keys)}

    def dense_vector() -> Value:
        return dense([draw(values(REAL, exact=True, nonzero=False)) for _ in range(n)])

    rows = draw(st.sets(st.integers(0, m - 1), min_size=int(nonempty), max_size=m)) \
        if m else set()
    env: dict[str, Value] = {
        "x": dense_vector(), "V1": vector(), "M": {i: r for i in sorted(rows) if (r := vector())},
        "s'": draw(q), "X2": dense([dense_vector() for _ in range(m)])}
    check_extents({x: (t, env[x], None) for x, t in SIZED_CTX.items()})  # it obeys them
    return env


@st.composite
def sized_programs(draw: Draw) -> tuple[Expr, str]:
    """An elaborated program over SIZED_CTX and a dense input to differentiate it by: a
    generated program, or one that reads x (or X2) at keys iterated from sized layers,
    where lookups within an extent apply: ``sum(<k, v> in D) let w = x(k) in G`` for
    D = V1, M(c) or a row of M, or ``sum(<i, r> in M) sum(<k, v> in r) let w = X2(i)(k)
    in G``; G generated.  Or one where they do not: k iterates M's rows, whose declared
    size m is not x's n (``sum(<k, r> in M) sum(<i, v> in r) let w = x(k) in G``)."""
    ctx = dict(SIZED_CTX)
    wrt = draw(st.sampled_from(["x", "X2"]))
    if draw(st.booleans()):
        return checked(draw(programs(ctx=ctx, lang=PHYSICAL)).expr, ctx)[0], wrt
    g = draw(programs(ctx={**ctx, "k": INT, "v": REAL, "w": REAL},
                      type=draw(st.sampled_from([REAL, DictT(REAL)])), lang=PHYSICAL))
    read = Lookup(Lookup(Var("X2"), Var("i")), Var("k")) if wrt == "X2" else \
        Lookup(Var("x"), Var("k"))
    inner = Let("w", read, Mul(Var("w"), g.expr) if draw(st.booleans()) else g.expr)
    match draw(st.sampled_from(["V1", "M(c)", "rows of M", "keys of M"])) if wrt == "x" \
            else draw(st.sampled_from(["rows of M", "keys of M"])):
        case "V1":
            e: Expr = Sum("k", "v", Var("V1"), inner)
        case "M(c)":
            e = Sum("k", "v", Lookup(Var("M"), IntConst(draw(st.integers(0, 2)))), inner)
        case "rows of M":
            e = Sum("i", "r", Var("M"), Sum("k", "v", Var("r"), inner))
        case _:  # k iterates M's rows (extent m), not a layer of x's extent n
            e = Sum("k", "r", Var("M"), Sum("i", "v", Var("r"), inner))
    return checked(e, ctx)[0], wrt


# ---- storage formats ----------------------------------------------------------------------


def coo(v: Value, t: Type) -> tuple[list[Any], Any]:
    """Every stored entry's keys (one array per layer) and values, of a value of ``t``."""
    from codegen.data import encode, to_coo

    return to_coo(encode(v, t), t)


def flat_values(flat: dict[str, Any], fmt: Format) -> dict[str, Value]:
    """A format's flat arrays as the interpreter's values (ints, dense arrays)."""
    import numpy as np

    out: dict[str, Value] = {}
    for p, t in fmt.params:
        x = flat[p]
        out[p] = int(x) if t == INT else dense(np.asarray(x).tolist())
    return out


# ---- the shapes the rules' guards are about ---------------------------------------------

#: inputs of the guard-shaped programs: a sparse vector and matrix, a dense vector, a
#: real and an int, whose names binders may shadow
SHAPE_CTX: Ctx = {"V": SPARSE1, "M": SPARSE2, "a": DENSE_REAL, "s": REAL, "n": INT}


@st.composite
def guard_shapes(draw: Draw, wider: bool = True) -> Generated:
    """A program around a left side of a guarded rule, with holes generated in their
    scopes, in the variations the guards tell apart (issue: the generators never made
    the programs on which a weakened guard is wrong):

    * vertical fusion ``sum(<k1,v1> in sum(<k2,v2> in D) {key -> b1}) b2``: b1 often
      zero for some entries, b2 strict in v1 or not, or the sum of a strict and a
      non-strict operand; the key k2, unique(k2) or unique(v2);
    * sum-to-get ``sum(<k,v> in D) if k = i then b``: i independent of the binders or
      reading k or v, b strict in v or not;
    * sum factorization ``sum(<k,v> in D) f1 * f2`` and ``sum(<k,v> in D) {i -> b}``
      (sometimes ``f * {i -> b}`` or ``{i -> b} * f``): factors and keys that use the key
      only, the value only, both or neither;
    * ranges whose bounds depend on an outer binder, ``sum(<k,v> in (j+c1 : j+c2)) b``
      with b reading ``(k+c1 : k+c2)(k)`` or ``(j+c1 : j+c2)(k)``, at a key other than k
      too, and ranges ``(c1 : c2)`` whose bounds read no binder; the lookup sometimes in
      an inner sum's domain, which that sum's binders do not cover;
    * binders that shadow an input (``sum(<k, s> in V) ...`` where s is real outside);
    * a lookup of a sum, ``(sum(<k,v> in D) {key -> b})(i)``, the singleton sometimes
      scaled;
    * horizontal fusion ``(sum(<k,v> in D) b1) + (sum(<k2,v2> in D) b2)``, the second
      loop's binders often other names, sometimes an input's; ``{key -> b1} + {key -> b2}``
      and ``f * b + b * f`` in a loop;
    * half of them inside ``sum(<o, u> in V) ...``, their holes and keys reading o and u:
      the terms rules move in and out of binders then have indices to shift;
    * when ``wider`` (issue 30, classes 4 and 5), dense inside sparse where the guards
      look: W2, a dictionary of arrays, iterated; inner dictionaries whose values are
      arrays (fusion's b1, a singleton's value); bodies that iterate a value that is a
      dictionary or an array (``sum(<j, w> in v) 1.0`` counts its positions: zero on the
      empty array, not on an array of zeros, which a dictionary drops); and products
      whose factors are both tensors where rules move a factor out of a sum or past
      another (``sum(<k, v> in D) f1 * f2`` for vectors f1 and f2, a singleton scaled by
      a vector, ``f * b + b * f`` for vectors f and b).
    """
    names = Names()
    inputs = {**SHAPE_CTX, "W2": ARRAYS} if wider else dict(SHAPE_CTX)
    ctx = dict(inputs)
    o = ou = None
    if draw(st.booleans()):  # inside a sum whose binders the holes read: what rules shift
        o, ou = names.fresh(draw, "o"), names.fresh(draw, "u")
        outer: dict[str, Type] = {o: INT, ou: REAL}
        ctx = _bind(ctx, **outer)

    def g(scope: Ctx, t: Type, depth: int = 2) -> Expr:
        return gen(draw, scope, t, draw(st.integers(0, depth)), names, FRESH)  # (binder() collides)

    def binder(stem: str) -> str:  # sometimes an input's name: a shadowed binder
        return draw(st.sampled_from(["s", "n", "V"])) if draw(st.integers(0, 5)) == 0 \
            else names.fresh(draw, stem)

    def domain() -> tuple[Expr, Type]:
        return draw(st.sampled_from([  # type: ignore[no-any-return]
            (Var("V"), REAL), (Var("a"), REAL), (Lookup(Var("M"), IntConst(1)), REAL),
            (Var("M"), SPARSE1), (Range(IntConst(0), IntConst(3)), INT)] + (
            [(Var("W2"), DENSE_REAL), (Var("W2"), DENSE_REAL)] if wider else [])))

    def scalar(scope: Ctx, v: str, vt: Type, t: Type) -> Expr:
        """Of type t: strict in v, not, or a sum of both; when ``wider``, sometimes a sum
        over v (a dictionary or an array)."""
        strict = Mul(Var(v), g(scope, t)) if vt == REAL else (
            Mul(Lookup(Var(v), IntConst(draw(st.integers(0, 2)))), g(scope, t))
            if vt in (SPARSE1, DENSE_REAL) else g(scope, t))
        other = g(scope, t)
        options = [strict, other, Add(strict, other), Add(other, strict)]
        if wider and isinstance(vt, DictT) and is_semiring(t):
            j, w = names.fresh(draw, "j"), names.fresh(draw, "w")
            options.append(Sum(j, w, Var(v), g(_bind(scope, **{j: INT, w: vt.val}), t, 1)))
        chosen: Expr = draw(st.sampled_from(options))
        return chosen

    def valued() -> list[Type]:  # the types of values put in a dictionary
        return [REAL, SPARSE1, DENSE_REAL] if wider else [REAL, SPARSE1]

    def factor_type() -> Type:  # a scalar, or (when wider) a vector: what sing-mult moves
        return draw(st.sampled_from([REAL, SPARSE1])) if wider else REAL

    # "range" twice: its counterexamples need the bounds, the lookup and the data to agree;
    # "horizontal" twice: its singletons come in one of its halves
    kind = draw(st.sampled_from(["fusion", "sum-to-get", "factor", "range", "range",
                                 "shadow", "lookup-sum", "horizontal", "horizontal"]))
    t = draw(st.sampled_from([REAL, SPARSE1]))
    dom, vt = domain()
    k, v = names.fresh(draw, "k"), binder("v")
    inner = _bind(ctx, **{k: INT, v: vt})
    unshadowed = {x: s for x, s in ctx.items() if x not in (k, v)}  # for independent holes
    n = [Var(x) for x in ("n", o) if x in unshadowed]  # ints independent of k and v
    match kind:
        case "fusion":
            t1 = draw(st.sampled_from(valued()))
            b1 = scalar(inner, v, vt, t1)
            if draw(st.booleans()):  # zero at the other keys: entries the inner sum drops
                at = Eq(Var(k), IntConst(draw(st.integers(0, 2))))
                b1 = Mul(If(at, RealConst(1.0)), b1) if t1 == DENSE_REAL \
                    else If(at, b1)  # (an array of zeros keeps its positions)
            key = draw(st.sampled_from([Var(k), Unique(Var(k)), Unique(Var(k))] + (
                [Unique(Var(v))] if vt == INT else [])))
            k1, v1 = names.fresh(draw, "k"), binder("v")
            scope = _bind(ctx, **{k1: INT, v1: t1})
            b2 = scalar(scope, v1, t1, t)
            if t1 == DENSE_REAL and draw(st.booleans()):  # an array's positions iterated
                j, w = names.fresh(draw, "j"), names.fresh(draw, "w")
                b2 = Sum(j, w, Var(v1), g({**scope, j: INT, w: REAL}, t, 1))
            e: Expr = Sum(k1, v1, Sum(k, v, dom, Single(key, b1)), b2)
        case "sum-to-get":
            i = draw(st.sampled_from([IntConst(draw(st.integers(0, 2))), *n,
                                      Add(Var(k), IntConst(1))] + (
                [Var(v)] if vt == INT else [])))
            e = Sum(k, v, dom, If(Eq(Var(k), i), scalar(inner, v, vt, t)))
        case "factor":
            def factor(ft: Type) -> Expr:
                uses = draw(st.sampled_from(["none", "key", "value", "both"]))
                base = g(unshadowed, ft)
                by_key = If(Eq(Var(k), IntConst(draw(st.integers(0, 2)))), base)
                return {"none": base, "key": by_key, "value": scalar(inner, v, vt, ft),
                        "both": Add(by_key, scalar(inner, v, vt, ft))}[uses]
            if draw(st.booleans()):  # (when wider, sometimes two vectors: a matrix)
                pt = SPARSE2 if wider and t == SPARSE1 and draw(st.booleans()) else t
                t1, t2 = draw(st.sampled_from(splits(pt)))
                e = Sum(k, v, dom, Mul(factor(t1), factor(t2)))
            else:
                key = draw(st.sampled_from([IntConst(draw(st.integers(0, 2))), *n,
                                            Var(k), Add(Var(k), IntConst(1))]))
                single = Single(key, factor(draw(st.sampled_from(valued()))))
                # sometimes scaled, on either side: what sing-mult moves inside
                scaled = draw(st.sampled_from(["left", "right", "no"]))
                e = Sum(k, v, dom, Mul(factor(factor_type()), single) if scaled == "left"
                        else Mul(single, factor(factor_type())) if scaled == "right"
                        else single)
        case "range":
            j, u = names.fresh(draw, "j"), names.fresh(draw, "u")
            c1 = draw(st.integers(0, 2))
            c2 = c1 + draw(st.integers(0, 3))  # empty a quarter of the time
            outer = _bind(ctx, **{j: INT, u: vt})
            scope = _bind(outer, **{k: INT, v: INT})

            fixed = draw(st.booleans())  # bounds that read no binder

            def rng(x: str) -> Expr:
                return Range(IntConst(c1), IntConst(c2)) if fixed else Range(
                    Add(Var(x), IntConst(c1)), Add(Var(x), IntConst(c2)))
            at = draw(st.sampled_from([(k, k), (j, k), (k, j), (j, j)]))
            at_key: Expr = draw(st.sampled_from(  # or not k: in the range or past it
                [Var(at[1]), IntConst(c1), IntConst(c2 + 1)]))
            lookup, value = Lookup(rng(at[0]), at_key), g(scope, REAL, 1)
            if draw(st.integers(0, 3)) == 0:  # the lookup in a sum's domain: binders over
                k2, v2 = names.fresh(draw, "k"), names.fresh(draw, "v")  # its body only
                inside: Expr = Sum(k2, v2, Single(IntConst(0), lookup), Single(Var(v2), value))
            else:
                inside = Single(Var(v) if draw(st.integers(0, 3)) == 0 else lookup, value)
            e = Sum(j, u, dom, Sum(k, v, rng(j), inside))
        case "horizontal":  # two loops over one domain added, or two singletons at a key
            k2, v2 = binder("k"), binder("v")  # often another name, sometimes an input's
            b1 = scalar(inner, v, vt, t)
            variant = draw(st.sampled_from(["loops", "singletons", "mirror"]))
            if variant == "loops":
                b2 = scalar(_bind(ctx, **{k2: INT, v2: vt}), v2, vt, t)
                e = Add(Sum(k, v, dom, b1), Sum(k2, v2, dom, b2))
            elif variant == "singletons":
                key = draw(st.sampled_from([Var(k), IntConst(draw(st.integers(0, 2))), *n]))
                e = Sum(k, v, dom, Add(Single(key, b1), Single(key, scalar(inner, v, vt, t))))
            else:  # a product and its mirror image: what d(r * r) is
                f = scalar(inner, v, vt, factor_type())
                e = Sum(k, v, dom, Add(Mul(f, b1), Mul(b1, f)))
        case "lookup-sum":  # (sum(<k,v> in D) {key -> b})(i): lookup is linear
            key = draw(st.sampled_from([Var(k), IntConst(draw(st.integers(0, 2))), *n]))
            i = draw(st.sampled_from([IntConst(draw(st.integers(0, 2))), *n]))
            single = Single(key, scalar(inner, v, vt, t))
            e = Lookup(Sum(k, v, dom, Mul(g(inner, REAL), single) if draw(st.booleans())
                           else single), i)
        case _:
            x = draw(st.sampled_from(["s", "n"]))
            xt = ctx[x]
            b = g(_bind(ctx, **{k: INT, x: vt}), t)
            outside = g(ctx, REAL)
            e = Mul(Mul(Var("s"), outside), Sum(k, x, dom, b)) if xt == REAL else \
                Add(Sum(k, x, dom, b), g(ctx, t))
    if o is not None and ou is not None:
        e = Sum(o, ou, Var("V"), e)
    return Generated(inputs, e, typecheck(e, inputs)[1])


@st.composite
def lookup_shapes(draw: Draw) -> Generated:
    """A lookup of a one-hot-like sum at a key, what the iterated-key lookup rewrites,
    with binder names drawn from a small pool that holds the inputs' names, so binders
    shadow inputs, each other and the variables of the domains they iterate (the
    freshness sets of the pass, ``{k, v}`` and a let's name, are what tell these apart):

        sum(<k1, v1> in P) [let d = sum(<k2, v2> in Q) {k2 -> b} in]
            [sum(<k3, v3> in R)] {i -> d(j)}

    P, Q and R paths (``V``, ``M``, ``M(c)``, ``M(x)``, a row bound before), the
    one-hot sometimes written in place of ``d``, i and j ints in scope; b strict in v2
    or not, sometimes a sum or a let whose binders are pool names too (``_entry`` must not
    let them capture the key or the entry it substitutes)."""
    names = Names()
    ctx = dict(SHAPE_CTX)
    pools = {"k": ["i", "j"], "v": ["r", "M", "V", "i", "w"], "d": ["d", "M", "V", "i"]}

    def name(stem: str, avoid: tuple[str, ...] = (), t: Type = INT) -> str:
        """A binder of type t: two times in three a name of the pool for its role, so
        that binders often meet (V and M only for a dictionary, so that some path stays
        in scope), else a fresh one."""
        if not (isinstance(t, DictT) and not t.dense):
            avoid = (*avoid, "V", "M")
        pool = [p for p in pools[stem] if p not in avoid]
        if pool and draw(st.integers(0, 2)) > 0:
            x: str = draw(st.sampled_from(pool))
            return x
        return names.fresh(draw, stem)

    def ints(scope: Ctx) -> list[str]:
        return [x for x, t in scope.items() if t == INT]

    def path(scope: Ctx) -> tuple[Expr, DictT]:
        """A dictionary of the scope, or one looked up at an int of the scope."""
        options: list[tuple[Expr, DictT]] = []
        for x, t in scope.items():
            if isinstance(t, DictT) and not t.dense:
                options.append((Var(x), t))
                if isinstance(t.val, DictT):
                    options += [(Lookup(Var(x), Var(y)), t.val) for y in ints(scope)]
                    options.append((Lookup(Var(x), IntConst(draw(st.integers(0, 2)))), t.val))
        chosen: tuple[Expr, DictT] = draw(st.sampled_from(options))
        return chosen

    def real(scope: Ctx) -> Expr:  # (its binders fresh: the pools above do the colliding)
        return gen(draw, scope, REAL, draw(st.integers(0, 1)), names, FRESH)

    def onehot(scope: Ctx, at: tuple[Expr, DictT] | None = None) -> Sum:
        q, qt = at if at is not None and draw(st.booleans()) else path(scope)
        k2 = name("k")
        v2 = name("v", (k2,), qt.val)
        inner = _bind(scope, **{k2: INT, v2: qt.val})
        read: Expr = Var(v2) if qt.val == REAL else Lookup(Var(v2), IntConst(
            draw(st.integers(0, 2))))  # strict in v2
        kb = name("k", (k2, v2))
        rb, rbt = path(inner)
        vb = name("v", (k2, v2, kb), rbt.val)
        b = draw(st.sampled_from([
            Mul(read, real(inner)), Add(real(inner), RealConst(1.0)),
            Sum(kb, vb, rb, Mul(read, real(_bind(inner, **{kb: INT, vb: rbt.val})))),
            Let(kb, real(inner), Mul(read, Var(kb)))]))  # a let named as a key, too
        return Sum(k2, v2, q, Single(Var(k2), b))

    p, pt = path(ctx)
    k1 = name("k")
    v1 = name("v", (k1,), pt.val)
    scope = _bind(ctx, **{k1: INT, v1: pt.val})
    d = name("d", (), DictT(REAL)) if draw(st.booleans()) else None
    defined = onehot(scope) if d is not None else None
    if d is not None:
        scope = _bind(scope, **{d: DictT(REAL)})
    avoid = (d,) if d is not None else ()
    wrap = draw(st.booleans())
    keys = [k1]  # often the key looked up: one iterated from a path, as the pass needs
    r, rt = path(scope)
    if defined is not None and d not in free_vars(defined.dom) and draw(st.booleans()):
        r, rt = defined.dom, typecheck(defined.dom, scope)[1]  # type: ignore[assignment]
    if wrap:
        k3 = name("k", avoid)
        v3 = name("v", (*avoid, k3), rt.val)
        scope = _bind(scope, **{k3: INT, v3: rt.val})
        keys = [k3]
    same = (r, rt) if wrap else (p, pt)  # the path the key iterates, if not shadowed
    shadowed = free_vars(same[0]) & ({k3, v3} if wrap else {k1, v1})
    looked = Var(d) if d is not None else onehot(scope, None if shadowed else same)
    keys = [x for x in keys if scope[x] == INT]  # (unless a later binder shadows it)
    at = draw(st.sampled_from(keys if keys and draw(st.booleans()) else ints(scope)))
    body: Expr = Single(Var(draw(st.sampled_from(ints(scope)))), Lookup(looked, Var(at)))
    if wrap:
        body = Sum(k3, v3, r, body)
    if d is not None and defined is not None:
        body = Let(d, defined, body)
    e = Sum(k1, v1, p, body)
    return Generated(ctx, e, typecheck(e, ctx)[1])


#: a one-hot's body b, its value binder, and its singleton's key (k: a one-hot; n, an
#: input: no one-hot, every entry's b at n); the bodies with binders of their own come last
LOOKUP_BODIES: list[tuple[str, str, str]] = [
    ("a * 1.5", "a", "k"), ("s + 1.0", "a", "k"), ("a * a1", "a", "k"), ("a * 1.5", "a", "n"),
    ("V(k) * 1.5", "_", "k"), ("sum(<i, x> in V) x * a", "a", "k"),
    ("let i = 2.0 in a * i", "a", "k"), ("let i = 2.0 in V(k) * i", "_", "k")]
#: the bodies with no binder of their own: nothing can capture the key there
BINDER_FREE = 5


def lookup_family() -> Iterator[tuple[int, str]]:
    """Every program of a small family around the iterated-key lookup, bounded
    exhaustively rather than sampled: each unsound weakening of the pass's bookkeeping
    needs several names to meet at once (a key binder named as an outer one whose
    domain reads it, a value binder named as a key...), which random programs almost
    never do.  Over SHAPE_CTX, some ill-typed (the caller skips those):

        sum(<k1, v1> in P) [let d = sum(<k, a> in Q) {k -> b} in]
            [sum(<k3, v3> in R)] {n -> d(key)}

    names from {i, j, r, w, d}; P = M or V; Q = P, M(k1), M(0) or v1 (a row of M, through
    a name that k1 bound anew makes stale); R = Q, M(k1) or P; v3 = d hiding the let's
    one-hot; the
    one-hot in place of d or let-bound; key = k1 or k3; b (``LOOKUP_BODIES``) strict in
    a, not strict, or a sum or a let binding i around a or without a value binder (which
    ``_entry`` must not let capture the key), or ``a * a1`` under a value binder a1, the
    name a fresh a would get, or a singleton keyed by n, no one-hot; and k1 bound anew
    between the let and the lookup (where the let's one-hot reads the old k1).  Yields
    each program with the index of its b in ``LOOKUP_BODIES``."""
    seen = set()
    for k1, v1, p, q, let, wrap, r, k3, v3, key, body, rebind in itertools.product(
            ["i", "j"], ["r", "i", "a1"], ["M", "V"], ["{p}", "M({k1})", "M(0)", "{v1}"],
            [True, False], [False, True], ["{q}", "M({k1})", "{p}"], ["i", "j"],
            ["w", "i", "d"], ["{k1}", "{k3}"], range(len(LOOKUP_BODIES)), [False, True]):
        b, value, single = LOOKUP_BODIES[cast(int, body)]
        if v1 == k1 or v3 == k3 or (not wrap and key == "{k3}") or (v1 == "a1") != (
                b == "a * a1") or (rebind and not (let and wrap)) or (
                q == "{v1}" and p != "M") or (v3 == "d" and not let):
            continue
        dom = str(q).format(p=p, k1=k1, v1=v1)
        onehot = f"sum(<k, {value}> in {dom}) {{{single} -> {b}}}"
        look = f"{{n -> {'d' if let else '(' + onehot + ')'}({str(key).format(k1=k1, k3=k3)})}}"
        if wrap:
            look = f"sum(<{k3}, {v3}> in {str(r).format(q=dom, p=p, k1=k1)}) {look}"
        if rebind:  # k1 bound anew between the one-hot's let and its lookup
            look = f"sum(<{k1}, x> in V) {look}"
        text = f"sum(<{k1}, {v1}> in {p}) " + (f"let d = {onehot} in {look}" if let else look)
        if text not in seen:
            seen.add(text)
            yield cast(int, body), text


#: SIZED_CTX and two inputs of no declared size: y dense, W sparse
FAMILY_CTX: Ctx = {**SIZED_CTX, "y": DictT(REAL, dense=True), "W": DictT(REAL)}


def sized_lookup_family() -> Iterator[tuple[str, str]]:
    """Every program of a small family around the declared-extent lookup, over FAMILY_CTX
    (x and V1 of size n, M sparse m×n, X2 dense m×n, y and W unsized), with its
    one-hot's domain Q (every one well-typed):

        sum(<k1, v1> in P) [let d = sum(<k, a> in Q) {k -> b} in]
            sum(<k3, v3> in R) {0 -> d(key)}

    P = x, V1, M, X2, W or unique(X2) (the keys of X2, no path); Q a vector: x, V1, y, a
    row of M or X2 at k1 or at 0; R the same, W, P, or a row bound by ``let r = M(k1)``
    or ``let r = X2(0)`` (a lookup's keys keep its size, stored or not); key = k1 or k3;
    b strict in a or not. Whether ``key`` is stored in Q turns on every part of the
    reason: Q dense (V1 is not), Q's size that of the layer ``key`` iterates (m for P =
    M or X2, n for x, V1 and rows, none for y and W: two unknown sizes are not the
    same), and, for a row of X2, the row itself stored, so k1 a key of X2's (a row of X2
    at a key of size n is empty when n > m); and, over M, ``let x = V1 * 2.0`` around
    it: a sparse vector hiding the dense input x."""
    for p, q, let, r, key, b, shadow in itertools.product(
            ["x", "V1", "M", "X2", "W", "unique(X2)"],
            ["x", "V1", "y", "M(k1)", "X2(k1)", "X2(0)"],
            [True, False], ["x", "V1", "W", "M(k1)", "X2(k1)", "X2(0)", "P", "let M(k1)",
                            "let X2(0)"], ["k1", "k3"],
            ["a * 1.5", "s' + 1.0"], [False, True]):
        if shadow and p != "M":
            continue
        onehot = f"sum(<k, a> in {q}) {{k -> {b}}}"
        d = "d" if let else f"({onehot})"
        over = p if r == "P" else "r" if r.startswith("let ") else r
        look = f"sum(<k3, v3> in {over}) {{0 -> {d}({key})}}"
        if r.startswith("let "):  # a let-bound row: its keys keep the row's size
            look = f"let r = {r[4:]} in {look}"
        body = f"let d = {onehot} in {look}" if let else look
        if shadow:  # a sparse vector named x hides the dense input x
            body = f"let x = V1 * 2.0 in {body}"
        yield q, f"sum(<k1, v1> in {p}) {body}"

"""Destination-passing style (§5.5, "Destination-Passing Style & C++ Code Generation").

A Physical SDQLite program becomes statements that *add its value into a destination*:
the generated function receives its destination (``result``), a singleton inside a sum
becomes ``dest[k] += v``, and nested singletons are pushed into the innermost loop —
the paper's blue listing, ``result[iv1.first][iv2.first] += beta * v1 * v2`` — so that
no intermediate dictionary is built per iteration.  Without DPS (``dps=False``, the
paper's red listing) every sum builds its own accumulator and adds its body's *value*.

The statements form a small imperative IR; their expressions are *pure* SDQLite
expressions (no ``sum``/``let``: those became statements), with every binder renamed
apart.  ``codegen/emit.py`` prints the IR as C++; ``codegen/execute.py`` runs it in
Python, which is how the properties check this lowering on its own.

    into(e, dest)   statements that add e's value into dest:
      sum(<k,v> in d) b   for (k, v) in d: into(b, dest)                  (a loop)
      {k -> v}            into(v, dest[k])                                 (DPS)
      e1 + e2             into(e1, dest); into(e2, dest)                   (DPS)
      e1 * e2             dest += e1 * e2 without building e1 * e2         (DPS)
      if c then b         if c: into(b, dest)
      let x = r in b      x = r; into(b, dest)
      zero[T]             nothing
      e                   dest += value(e)
    value(e)        statements and a pure expression for e's value; a sum, or an ``if``
                    whose body needs statements, gets an accumulator:  T acc{}; into(e, acc)

A destination written in place may hold entries that became zero; ``Prune`` drops them
before the value is used (dictionaries never store zeros, DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import assert_never

from sdqlite.check.sizes import Size
from sdqlite.errors import NOT_EXPANDED, CodegenError
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
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type, erase, otimes

# ---- the IR --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dest:
    """A place to add into: a variable, or an entry of one (``res[k1][k2]``)."""

    root: str
    keys: tuple[Expr, ...] = ()

    def at(self, key: Expr) -> Dest:
        return Dest(self.root, (*self.keys, key))


@dataclass(frozen=True)
class Decl:
    """``T name{}``: an accumulator, zero to start with; ``keys`` bounds its first layer's
    keys (``sdqlite.check.sizes.accumulator_sizes``: a declared size's name), if known."""

    name: str
    type: Type
    keys: Size = None


@dataclass(frozen=True)
class Bind:
    """``name = value`` (the value is not copied)."""

    name: str
    value: Expr
    type: Type


@dataclass(frozen=True)
class Loop:
    """``for (key, val) in dom: body`` — a counted loop over a range ``(lo:hi)`` or a
    sub-array ``a(lo:hi)``, a for-each over a dictionary, every position of an array."""

    key: str
    val: str
    dom: Expr
    dom_type: DictT
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class When:
    """``if cond: body``"""

    cond: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class AddInto:
    """``dest += value``"""

    dest: Dest
    value: Expr
    type: Type  # of the value (and of the destination entry)


@dataclass(frozen=True)
class MulAddInto:
    """``dest += left * right`` (the tensor product, not built)"""

    dest: Dest
    left: Expr
    right: Expr
    left_type: Type
    right_type: Type


@dataclass(frozen=True)
class Enter:
    """``name = dest`` by reference: the entry (created if missing) becomes a destination."""

    name: str
    dest: Dest
    type: Type


@dataclass(frozen=True)
class Prune:
    """Drop the entries of the accumulator ``name`` that became zero."""

    name: str


@dataclass(frozen=True)
class Assign:
    """``dest = value`` (a boolean result: not a semiring, nothing to add to)."""

    dest: Dest
    value: Expr


Stmt = Decl | Bind | Loop | When | AddInto | MulAddInto | Enter | Prune | Assign

RESULT = "%result"  # not an SDQLite name: an input may be called result


@dataclass(frozen=True)
class Lowered:
    """``body`` adds the program's value into ``result`` (of ``type``); ``inputs`` are the
    free variables of the program with their types, in the order of the signature."""

    body: tuple[Stmt, ...]
    type: Type
    inputs: tuple[tuple[str, Type], ...]


# ---- lowering -------------------------------------------------------------------------------

Scope = dict[str, tuple[str, Type]]  # SDQLite name -> (IR name, type)


def lower(e: Expr, ctx: Mapping[str, Type], t: Type, *, dps: bool,
          sizes: Mapping[int, list[Size]] | None = None) -> Lowered:
    """The statements of an elaborated program ``ctx ⊢ e : t`` (Physical SDQLite);
    ``sizes``: its sums' layers' sizes, by node (``accumulator_sizes``)."""
    inputs = tuple((x, erase(ctx[x])) for x in sorted(free_vars(e)))
    low = _Lowering({x for x, _ in inputs} | {RESULT}, dps, dict(sizes or {}))
    scope: Scope = {x: (x, t) for x, t in inputs}
    if t == BOOL:
        stmts, x, _ = low.value(e, scope)
        body = [*stmts, Assign(Dest(RESULT), x)]
    else:
        body = low.into(e, scope, Dest(RESULT), t)
        if isinstance(t, DictT) and not t.dense:
            body.append(Prune(RESULT))
    return Lowered(tuple(body), t, inputs)


@dataclass
class _Lowering:
    taken: set[str]  # every name is bound once in the generated code
    dps: bool
    sizes: dict[int, list[Size]]

    def decl(self, name: str, e: Sum) -> Decl:
        """The accumulator of the sum ``e``."""
        assert e.ty is not None, "elaborated"
        return Decl(name, e.ty, next(iter(self.sizes.get(id(e), [])), None))

    def fresh(self, stem: str) -> str:
        """``stem`` itself when it is free, else ``stem1``, ``stem2``, ... (primes kept)."""
        base = stem.rstrip("'")
        primes = stem[len(base):]
        name, n = stem, 0
        while name in self.taken:
            n += 1
            name = f"{base}{n}{primes}"
        self.taken.add(name)
        return name

    # value(e): statements, a pure expression, its type
    def value(self, e: Expr, scope: Scope) -> tuple[list[Stmt], Expr, Type]:
        match e:
            case Var(x):  # (lower() put every free variable in scope: ctx[x])
                name, t = scope[x]
                return [], Var(name, span=e.span), t
            case IntConst():
                return [], e, INT
            case RealConst():
                return [], e, REAL
            case BoolConst():
                return [], e, BOOL
            case Empty(zt):
                assert zt is not None, "elaborated"
                return [], e, zt
            case Sum(_, _, _, _, _, ty) if ty is not None:  # an accumulator
                acc = self.fresh("acc")
                return [self.decl(acc, e), *self.into(e, scope, Dest(acc), ty),
                        *_prune(acc, ty)], Var(acc), ty
            case Let(x, rhs, body):
                s1, rt, name = self._bind(x, rhs, scope)
                s2, b, bt = self.value(body, {**scope, x: (name, rt)})
                return [*s1, *s2], b, bt
            case If(c, body, _, ty) if ty is not None:
                sc, c2, _ = self.value(c, scope)
                sb, b, _ = self.value(body, scope)
                if not sb:
                    return sc, replace(e, cond=c2, body=b), ty
                acc = self.fresh("acc")
                return [*sc, Decl(acc, ty), When(c2, tuple(self.into(body, scope, Dest(acc), ty))),
                        *_prune(acc, ty)], Var(acc), ty
            case Single(k, v):
                sk, k2, _ = self.value(k, scope)
                sv, v2, vt = self.value(v, scope)
                return [*sk, *sv], replace(e, key=k2, val=v2), DictT(vt)
            case Lookup(d, k, _, ty) if ty is not None:
                sd, d2, _ = self.value(d, scope)
                sk, k2, _ = self.value(k, scope)
                return [*sd, *sk], replace(e, dict=d2, key=k2), ty
            case Not(a):
                sa, a2, _ = self.value(a, scope)
                return sa, replace(e, arg=a2), BOOL
            case Eq(a, b):
                sa, a2, _ = self.value(a, scope)
                sb, b2, _ = self.value(b, scope)
                return [*sa, *sb], replace(e, left=a2, right=b2), BOOL
            case Add(a, b):
                sa, a2, t = self.value(a, scope)
                sb, b2, _ = self.value(b, scope)
                return [*sa, *sb], replace(e, left=a2, right=b2), t
            case Mul(a, b):
                sa, a2, ta = self.value(a, scope)
                sb, b2, tb = self.value(b, scope)
                prod = otimes(ta, tb)
                assert prod is not None, "well typed"
                return [*sa, *sb], replace(e, left=a2, right=b2), prod
            case UnOp(_, a):
                sa, a2, _ = self.value(a, scope)
                return sa, replace(e, arg=a2), REAL
            case Range(lo, hi):
                sl, lo2, _ = self.value(lo, scope)
                sh, hi2, _ = self.value(hi, scope)
                return [*sl, *sh], replace(e, lo=lo2, hi=hi2), DictT(INT, dense=True)
            case SubArray(a, lo, hi):
                sa, a2, t = self.value(a, scope)
                sl, lo2, _ = self.value(lo, scope)
                sh, hi2, _ = self.value(hi, scope)
                return [*sa, *sl, *sh], replace(e, arr=a2, lo=lo2, hi=hi2), t
            case Unique(a):  # the identity
                return self.value(a, scope)
            case ArrayLit(elems, _, ty) if ty is not None:
                stmts: list[Stmt] = []
                out = []
                for elem in elems:
                    sx, x2, _ = self.value(elem, scope)
                    stmts += sx
                    out.append(x2)
                return stmts, replace(e, elems=tuple(out)), DictT(ty, dense=True)
            case Sum() | If() | Lookup() | ArrayLit():
                raise CodegenError("the program was not elaborated by the type checker", e.span)
            case Gradient():
                raise CodegenError(NOT_EXPANDED, e.span)
            case _:
                assert_never(e)

    # into(e, dest): statements that add e's value into dest (of type t)
    def into(self, e: Expr, scope: Scope, dest: Dest, t: Type) -> list[Stmt]:
        match e:
            case Sum(k, v, dom, body):
                sd, dom2, dt = self._domain(dom, scope)
                key, val = self.fresh(k if k != "_" else "k"), self.fresh(v if v != "_" else "v")
                inner = {**scope, k: (key, INT), v: (val, dt.val)}
                if self.dps:
                    stmts = self.into(body, inner, dest, t)
                else:  # the body's value is built, then added
                    sb, b, _ = self.value(body, inner)
                    stmts = [*sb, *_add(dest, b, t)]
                return [*sd, Loop(key, val, dom2, dt, tuple(stmts))]
            case Single(k, v) if self.dps:  # {k -> v} into dest: v into dest[k]
                assert isinstance(t, DictT)
                sk, k2, _ = self.value(k, scope)
                if _pure(v):  # no statements: the path grows (res[k][k2] += 1.0)
                    return [*sk, *self.into(v, scope, dest.at(k2), t.val)]
                entry = self.fresh("d")
                return [*sk, Enter(entry, dest.at(k2), t.val),
                        *self.into(v, scope, Dest(entry), t.val)]
            case Add(a, b) if self.dps:
                return [*self.into(a, scope, dest, t), *self.into(b, scope, dest, t)]
            case Mul(a, b) if self.dps:
                sa, a2, ta = self.value(a, scope)
                sb, b2, tb = self.value(b, scope)
                return [*sa, *sb, MulAddInto(dest, a2, b2, ta, tb)]
            case If(c, body):
                sc, c2, _ = self.value(c, scope)
                return [*sc, When(c2, tuple(self.into(body, scope, dest, t)))]
            case Let(x, rhs, body):
                sr, rt, name = self._bind(x, rhs, scope)
                return [*sr, *self.into(body, {**scope, x: (name, rt)}, dest, t)]
            case Unique(a):
                return self.into(a, scope, dest, t)
            case Empty():  # adding zero
                return []
            case _:
                s, pure, _ = self.value(e, scope)
                return [*s, *_add(dest, pure, t)]

    def _bind(self, x: str, rhs: Expr, scope: Scope) -> tuple[list[Stmt], Type, str]:
        """``let x = rhs``: a sum accumulates into x itself, anything else is bound."""
        name = self.fresh(x)
        if isinstance(rhs, Sum) and rhs.ty is not None:
            return [self.decl(name, rhs), *self.into(rhs, scope, Dest(name), rhs.ty),
                    *_prune(name, rhs.ty)], rhs.ty, name
        s, r, rt = self.value(rhs, scope)
        return [*s, Bind(name, r, rt)], rt, name

    def _domain(self, dom: Expr, scope: Scope) -> tuple[list[Stmt], Expr, DictT]:
        """A sum's domain: a range or sub-array stays one (a counted loop); anything else
        is evaluated once and named."""
        match dom:
            case Unique(a):
                return self._domain(a, scope)
            case Range() | SubArray() | Single():  # (a singleton: its entry, if not zero)
                s, d, t = self.value(dom, scope)
                assert isinstance(t, DictT)
                return s, d, t
        s, d, t = self.value(dom, scope)
        assert isinstance(t, DictT), "the checker made it a dictionary"
        if isinstance(d, Var):
            return s, d, t
        name = self.fresh("dom")
        return [*s, Bind(name, d, t)], Var(name), t


def _pure(e: Expr) -> bool:
    """``e`` lowers to an expression alone: no ``sum`` or ``let`` in it."""
    return not any(isinstance(x, Sum | Let) for x in subterms(e))


def _add(dest: Dest, x: Expr, t: Type) -> list[Stmt]:
    return [] if isinstance(x, Empty) else [AddInto(dest, x, t)]


def _prune(name: str, t: Type) -> list[Stmt]:
    return [Prune(name)] if isinstance(t, DictT) and not t.dense else []

"""Which declared size bounds each layer of a program's result (a static analysis).

For ``Γ ⊢ e : T`` with sizes declared on inputs (``sdqlite.syntax.types``), ``result_sizes``
names, for each dictionary layer of T, a size n such that every key stored in that
layer lies in ``0 .. n-1`` — or None when nothing says so.  Keys come from somewhere:
a singleton's key that is the key of a sum over a layer declared ``int[n]`` (or
``dense_int[n]``) lies below n; a lookup, a sum or a product passes its operands' layers
on; ``+`` keeps a size both sides share.  The compiled backend uses it to give results
a shape (``scipy.sparse``, numpy) where the data fix the sizes.

After storage composition keys also come out of a format's index arrays (CSR's ``idx``
holds keys of its matrix's second layer): ``values`` names such an array's bound, and the
value of a sum over it, or a lookup into it, is a key below that bound.
``accumulator_sizes`` gives the same for every sum of a program, each where it stands:
the compiled backend keeps a sum's accumulator in an array where its keys are bounded
(``codegen/results.py``, workspaces).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import assert_never

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
)
from sdqlite.syntax.types import DictT, Type, order

#: a layer's size: a declared name, None (unknown), or NO_KEYS (the layer stores none)
Size = str | None
NO_KEYS = "\0no keys"


def declared(t: Type) -> list[Size]:
    out: list[Size] = []
    while isinstance(t, DictT):
        out.append(t.extent)
        t = t.val
    return out


def result_sizes(e: Expr, ctx: Mapping[str, Type]) -> list[Size]:
    """One entry per dictionary layer of ``e``'s type (``e`` elaborated)."""
    return _Sizes({}, None).of(e, {x: declared(t) for x, t in ctx.items()}, {})


def accumulator_sizes(e: Expr, ctx: Mapping[str, Type], values: Mapping[str, Size]
                      ) -> dict[int, list[Size]]:
    """The sizes of every ``sum`` in ``e``, by the id of its node; ``values``: the inputs
    whose entries are keys below a size (``index_bounds``: a format's index arrays)."""
    seen: dict[int, list[Size]] = {}
    _Sizes(dict(values), seen).of(e, {x: declared(t) for x, t in ctx.items()}, {})
    return seen


def index_bounds(flat: Mapping[str, Mapping[str, str]], keys: Mapping[str, Mapping[str, int]],
                 ctx: Mapping[str, Type]) -> dict[str, Size]:
    """The bound of each flat index array's entries: for input x laid out in flat arrays
    ``flat[x]`` (parameter -> name), whose format keys layer l by parameter p
    (``keys[x][p] = l``: ``Format.keys``), the size ``ctx[x]`` declares for layer l."""
    return {flat[x][p]: declared(ctx[x])[layer]
            for x in flat for p, layer in keys[x].items() if p in flat[x]}


def _join(a: list[Size], b: list[Size]) -> list[Size]:
    return [y if x == NO_KEYS else x if y == NO_KEYS or x == y else None
            for x, y in zip(a, b, strict=True)]


class _Sizes:
    def __init__(self, values: dict[str, Size], seen: dict[int, list[Size]] | None) -> None:
        self.values = values  # an input -> the bound of its entries (keys)
        self.seen = seen

    def of(self, e: Expr, env: dict[str, list[Size]], keys: dict[str, Size]) -> list[Size]:
        out = self._of(e, env, keys)
        if self.seen is not None and isinstance(e, Sum):
            self.seen[id(e)] = out
        return out

    def _of(self, e: Expr, env: dict[str, list[Size]], keys: dict[str, Size]) -> list[Size]:
        def go(x: Expr) -> list[Size]:
            return self.of(x, env, keys)

        match e:
            case Var(x):
                return env.get(x, [])
            case IntConst() | RealConst() | BoolConst() | Eq() | Not() | UnOp():
                return []
            case Empty(t):
                return [NO_KEYS] * (order(t) if t is not None else 0)
            case Sum(k, v, dom, body):  # k iterates dom's first layer, v is one of its entries
                d = go(dom)
                inner = {n: s for n, s in keys.items() if n not in (k, v)} | \
                    {k: d[0] if d else None}
                if (bound := self._entries(dom)) is not None:  # v: a key below it
                    inner[v] = bound
                return self.hiding(k, v).of(body, {**env, k: [], v: d[1:]}, inner)
            case Single(key, val):
                return [self._key(key, keys), *go(val)]
            case Lookup(d, _):
                return go(d)[1:]
            case Let(x, rhs, body):
                return self.hiding(x).of(body, {**env, x: go(rhs)},
                                         {n: s for n, s in keys.items() if n != x})
            case If(_, body):
                return go(body)
            case Add(a, b):
                return _join(go(a), go(b))
            case Mul(a, b):  # D1 ⊗ D2: the layers of both, in order
                return [*go(a), *go(b)]
            case Unique(a):
                return go(a)
            case Range() | SubArray() | ArrayLit() | Gradient():
                return [None] * _layers(e, env)
            case _:
                assert_never(e)

    def hiding(self, *names: str) -> _Sizes:
        """The analysis under binders of ``names``: an index array they shadow is not one."""
        if not set(names) & self.values.keys():
            return self
        return _Sizes({x: b for x, b in self.values.items() if x not in names}, self.seen)

    def _entries(self, a: Expr) -> Size:
        """The bound of the entries of ``a``: an index array, whole or a part of it."""
        match a:
            case Var(x) if x in self.values:
                return self.values[x]
            case SubArray(arr) | Unique(arr):
                return self._entries(arr)
        return None

    def _key(self, key: Expr, keys: dict[str, Size]) -> Size:
        match key:
            case Var(k):
                return keys.get(k)
            case Unique(a):
                return self._key(a, keys)
            case Lookup(a, _):  # an entry of an index array
                return self._entries(a)
        return None


def _layers(e: Expr, env: dict[str, list[Size]]) -> int:
    match e:
        case Range():
            return 1
        case SubArray(a):
            return max(1, len(_Sizes({}, None).of(a, env, {})))
        case ArrayLit(_, _, t):
            return 1 + (order(t) if t is not None else 0)
    return 0

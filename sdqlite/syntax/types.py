"""SDQLite types (Fig. fig:langs) and the derived forms on types.

    T ::= I | bool | D                D ::= real | int | { I -> D }
    I ::= int | dense_int | int[n] | dense_int[n]

``{int -> D}`` is a sparse dictionary (a free-vector-space element: zero entries are
never stored); ``{dense_int -> D}`` is a dense array that keeps every position
(Physical SDQLite).  ``tensor n`` and ``D1 ⊗ D2`` are derived forms computed here.

Declared extents (our addition, for rewrites that need a key to lie in a dense
array): an input may declare ``{dense_int[n] -> D}`` — a dense array holding exactly
the positions ``0 .. n-1`` — or ``{int[n] -> D}`` — a dictionary whose keys all lie in
``0 .. n-1``.  Every use of a size name ``n`` denotes the same number, fixed by the
data (``semantics.extents``).  Extents are facts about inputs, not part of a type's
identity: ``{int[n] -> real} == {int -> real}``, and the checker erases them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never


@dataclass(frozen=True, slots=True)
class IntT:
    def __str__(self) -> str:
        return "int"


@dataclass(frozen=True, slots=True)
class RealT:
    def __str__(self) -> str:
        return "real"


@dataclass(frozen=True, slots=True)
class BoolT:
    def __str__(self) -> str:
        return "bool"


@dataclass(frozen=True, slots=True)
class DictT:
    """``{int -> val}`` (sparse) or, with ``dense=True``, ``{dense_int -> val}``;
    ``extent`` names a declared size (``int[n]``), ignored by equality."""

    val: Type
    dense: bool = False
    extent: str | None = field(default=None, compare=False)
    semiring: bool = field(init=False, compare=False, repr=False)  # see is_semiring
    hashed: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:  # computed once: checking asks at every node, and a
        # compiled call looks its plan up by its inputs' types
        object.__setattr__(self, "semiring", is_semiring(self.val))
        object.__setattr__(self, "hashed", hash((self.val, self.dense)))

    def __hash__(self) -> int:
        return self.hashed

    def __str__(self) -> str:
        key = ("dense_int" if self.dense else "int") + (f"[{self.extent}]" if self.extent else "")
        return f"{{{key} -> {self.val}}}"


Type = IntT | RealT | BoolT | DictT

INT = IntT()
REAL = RealT()
BOOL = BoolT()


def tensor(n: int) -> Type:
    """Fig. fig:langs: ``tensor 0 = real``, ``tensor n = {int -> tensor (n-1)}``."""
    t: Type = REAL
    for _ in range(n):
        t = DictT(t)
    return t


def is_semiring(t: Type) -> bool:
    """Types with a zero, ``+`` and ``*``: real, int and dictionaries of those."""
    match t:
        case RealT() | IntT():
            return True
        case BoolT():
            return False
        case DictT():
            return t.semiring
        case _:
            assert_never(t)


def scalar_of(t: Type) -> Type:
    """The scalar leaf of a (nested) dictionary type."""
    while isinstance(t, DictT):
        t = t.val
    return t


def order(t: Type) -> int:
    """The number of dictionary layers of ``t`` (the ``n`` of ``tensor n``)."""
    n = 0
    while isinstance(t, DictT):
        t, n = t.val, n + 1
    return n


def otimes(d1: Type, d2: Type) -> Type | None:
    """Fig. fig:langs, definition of ⊗: ``real ⊗ D = D``, ``{I -> D1} ⊗ D2 = {I -> D1 ⊗ D2}``.

    ``int`` is a semiring too (``int ⊗ int = int`` for index arithmetic).  Returns None
    where the product is undefined (mixed scalar fields, booleans)."""
    if not (is_semiring(d1) and is_semiring(d2)) or scalar_of(d1) != scalar_of(d2):
        return None
    match d1:
        case RealT() | IntT():
            return d2
        case DictT(val, dense):
            inner = otimes(val, d2)
            return None if inner is None else DictT(inner, dense)
        case BoolT():
            return None
        case _:
            assert_never(d1)


def splits(t: Type) -> list[tuple[Type, Type]]:
    """All pairs ``(D1, D2)`` with ``D1 ⊗ D2 = t`` (used by generators)."""
    if not is_semiring(t):
        return []
    layers: list[bool] = []
    leaf = t
    while isinstance(leaf, DictT):
        layers.append(leaf.dense)
        leaf = leaf.val
    out: list[tuple[Type, Type]] = []
    for cut in range(len(layers) + 1):
        d1: Type = leaf
        for dense in reversed(layers[:cut]):
            d1 = DictT(d1, dense)
        d2: Type = leaf
        for dense in reversed(layers[cut:]):
            d2 = DictT(d2, dense)
        out.append((d1, d2))
    return out


def erase(t: Type) -> Type:
    """``t`` without declared extents."""
    if isinstance(t, DictT):
        return DictT(erase(t.val), t.dense)
    return t


def has_extents(t: Type) -> bool:
    return isinstance(t, DictT) and (t.extent is not None or has_extents(t.val))


# ---- tangent types (Fig. fig:diffrules on types; the checker types gradient e x with them)


def tangent_type(t: Type, tau: Type) -> Type:
    """D_τ[T] (Fig. fig:diffrules, on types): ``T ⊗ τ``, and ``real`` for discrete T.

    Tangents are sparse: a dense layer ``{dense_int -> D}`` of T has the tangent layer
    ``{int -> ...}`` (on Logical SDQLite this is exactly the figure).  A dense identity
    could not be built for ``onehot``; a sparse one over every position of a dense
    variable can, and it gives the gradient that covers every position (DESIGN.md)."""
    if is_discrete(t):
        return REAL
    out = otimes(sparse(t), tau)
    assert out is not None, (t, tau)
    return out


def sparse(t: Type) -> Type:
    """``t`` with every dense layer made a sparse dictionary."""
    return DictT(sparse(t.val)) if isinstance(t, DictT) else t


def is_discrete(t: Type) -> bool:
    """int, bool, and dictionaries/arrays of them: their tangent is the real 0."""
    return isinstance(scalar_of(t), IntT | BoolT)

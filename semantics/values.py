"""Semantic values and the semiring operations on them (DESIGN.md, "Semantics decisions").

* ``real`` — a scalar of the chosen field (``float``, ``Fraction`` or a sympy expression);
  ``int`` — a Python ``int``; ``bool`` — a Python ``bool``.
* ``{int -> D}`` — a Python ``dict`` that never stores a zero of ``D``: construction and
  ``+`` drop entries that become zero, so equality is structural.
* ``{dense_int -> D}`` — a ``DenseArray``: every position is kept, zeros included.
  Its ``zero`` (the identity of ``+``) is the empty array; but as a *dictionary entry* an
  array whose every position holds zero counts as zero and is dropped — otherwise
  ``(0 * {0 -> 1}) * [0]`` and ``0 * ({0 -> 1} * [0])`` would differ, and ``*`` would not
  be associative (found by properties/test_semiring_laws.py).

``add`` and ``mul`` are ``+`` and the tensor product ``*`` of Fig. fig:langs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, assert_never

from sdqlite.syntax.types import BoolT, DictT, IntT, RealT, Type


@dataclass(frozen=True, slots=True)
class DenseArray:
    """A dense array ``{dense_int -> D}``: position ``start + i`` holds ``items[i]``.

    Positions are an interval, so a sub-array ``arr(st:en)`` keeps the positions of
    ``arr`` as its keys.  Build with ``dense`` (the empty array always starts at 0)."""

    items: tuple[Value, ...]
    start: int = 0

    def __iter__(self) -> Iterator[Value]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def end(self) -> int:
        return self.start + len(self.items)


def dense(items: tuple[Value, ...] | list[Value], start: int = 0) -> DenseArray:
    """The canonical dense array with ``items`` from position ``start``."""
    items = tuple(items)
    return DenseArray(items, start if items else 0)


def zero_like(x: Value) -> Value:
    """The zero of the type of ``x``."""
    if isinstance(x, dict):
        return {}
    if isinstance(x, DenseArray | _OwnedArray):
        return dense(())
    if isinstance(x, bool):
        return False
    return x * 0 + 0  # + 0: -1.5 * 0 is -0.0, which a sub-array's padding printed


Scalar = Any  # float | Fraction | sympy.Expr: the interpreter is generic over the field
Value = Any  # Scalar | int | bool | dict[int, Value] | DenseArray


def is_sympy(x: object) -> bool:
    return type(x).__module__.startswith("sympy")


def is_zero(v: Value) -> bool:
    """Is ``v`` zero, i.e. dropped as a dictionary entry?  The empty dict; a dense array
    whose positions all hold zero (the empty array included); a zero scalar."""
    if isinstance(v, dict):
        return not v
    if isinstance(v, DenseArray | _OwnedArray):
        return all(is_zero(x) for x in v.items)
    if isinstance(v, float | int | Fraction):  # bool is an int: not v
        return not v
    if is_sympy(v):
        import sympy

        return bool(v == 0 or sympy.expand(v) == 0)
    return bool(v == 0)


def zero_of(t: Type, field: Field) -> Value:
    """``zero[T]``."""
    match t:
        case RealT():
            return field.zero
        case IntT():
            return 0
        case BoolT():
            return False
        case DictT(_, dense):
            return DenseArray(()) if dense else {}  # the empty dense array is its zero
        case _:
            assert_never(t)


def single(k: int, v: Value) -> dict[int, Value]:
    """``{k -> v}``, canonical: ``{k -> zero}`` is ``{}``."""
    return {} if is_zero(v) else {k: v}


def add(a: Value, b: Value) -> Value:
    """``a + b`` in the semiring of their (common) type."""
    if isinstance(a, dict):
        out = dict(a)
        for k, v in b.items():
            s = add(out[k], v) if k in out else v
            if is_zero(s):
                out.pop(k, None)
            else:
                out[k] = s
        return out
    if isinstance(a, DenseArray):
        if not b.items:
            return a
        if not a.items:
            return b
        lo, hi = min(a.start, b.start), max(a.end, b.end)
        z = zero_like(a.items[0])
        return dense([add(lookup(a, p, z), lookup(b, p, z)) for p in range(lo, hi)], lo)
    return a + b


class Accumulator:
    """A sum ``zero + v1 + v2 + ...`` built in place: ``add(v)`` for each ``v``, then
    ``value``.  It equals folding ``add`` from ``zero`` (entries that become zero are
    dropped at each step, as ``add`` drops them) without copying the sum so far at every
    step, which made a ``sum`` quadratic: the parts of the sum this accumulator made are
    updated in place; a part taken from an added value is shared until it is first
    written (then copied once).  Values stay immutable outside."""

    def __init__(self, zero: Value) -> None:
        self._sum = zero

    def add(self, v: Value) -> None:
        self._sum = _add_owned(self._sum, v)

    @property
    def value(self) -> Value:
        return _freeze(self._sum)


class _OwnedDict(dict[int, Any]):
    """A dictionary of an accumulator's sum, updated in place."""


@dataclass(slots=True)
class _OwnedArray:
    """A dense array of an accumulator's sum, updated in place."""

    items: list[Any]
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.items)


def _add_owned(a: Value, b: Value) -> Value:
    """``a + b`` as ``add`` computes it, reusing ``a``'s owned parts."""
    if isinstance(a, dict):
        out = a if isinstance(a, _OwnedDict) else _OwnedDict(a)
        for k, v in b.items():
            if k in out:
                s = _add_owned(out[k], v)
                if is_zero(s):
                    del out[k]
                else:
                    out[k] = s
            else:
                out[k] = v
        return out
    if isinstance(a, DenseArray | _OwnedArray):
        if not b.items:
            return a
        if not a.items:
            return b
        z = zero_like(a.items[0])
        arr = a if isinstance(a, _OwnedArray) else _OwnedArray(list(a.items), a.start)
        if b.start < arr.start:  # positions of b before a's: zero in a
            arr.items[:0] = [z] * (arr.start - b.start)
            arr.start = b.start
        arr.items.extend([z] * (b.end - arr.end))
        for p, v in enumerate(b.items, b.start - arr.start):
            arr.items[p] = _add_owned(arr.items[p], v)
        return arr
    return a + b


def _freeze(v: Value) -> Value:
    """An accumulator's sum as a value: its owned parts made immutable."""
    if isinstance(v, _OwnedDict):
        return {k: _freeze(x) for k, x in v.items()}
    if isinstance(v, _OwnedArray):
        return dense([_freeze(x) for x in v.items], v.start)
    return v


def mul(a: Value, b: Value) -> Value:
    """``a * b``, the tensor product: ``{k -> x} * b = {k -> x * b}``, scalars scale."""
    if isinstance(a, dict):
        out: dict[int, Value] = {}
        for k, v in a.items():
            out.update(single(k, mul(v, b)))
        return out
    if isinstance(a, DenseArray):
        return DenseArray(tuple(mul(v, b) for v in a.items), a.start)
    return scale(a, b)


def scale(s: Scalar, b: Value) -> Value:
    """``s * b`` for a scalar ``s``."""
    if isinstance(b, dict):
        out: dict[int, Value] = {}
        for k, v in b.items():
            out.update(single(k, scale(s, v)))
        return out
    if isinstance(b, DenseArray):
        return DenseArray(tuple(scale(s, v) for v in b.items), b.start)
    return s * b


def lookup(d: Value, k: int, default: Value) -> Value:
    """``d(k)``: the stored value, or ``default`` (= zero) for a missing key / out of range."""
    if isinstance(d, DenseArray):
        return d.items[k - d.start] if d.start <= k < d.end else default
    return d.get(k, default)


def entries(d: Value) -> list[tuple[int, Value]]:
    """What ``sum`` iterates: stored entries of a dict (in key order), every position of an
    array (in order)."""
    if isinstance(d, DenseArray):
        return list(enumerate(d.items, d.start))
    return sorted(d.items(), key=lambda kv: kv[0])


# ---- the scalar field ---------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """The field the interpreter computes ``real`` in: how literals and zero look in it."""

    name: str
    zero: Scalar

    def literal(self, r: float) -> Scalar:
        """A real literal in this field; rational fields read its shortest decimal text."""
        if self.name == "float":
            return float(r)
        q = Fraction(repr(float(r)))
        if self.name == "fraction":
            return q
        import sympy

        return sympy.Rational(q.numerator, q.denominator)


FLOAT = Field("float", 0.0)
FRACTION = Field("fraction", Fraction(0))


def sympy_field() -> Field:
    import sympy

    return Field("sympy", sympy.Integer(0))


# ---- typing of values ---------------------------------------------------------------


def not_a_value(name: str, v: object) -> str | None:
    """Why ``v``, given as input ``name``, is not an SDQLite value (its outer layer:
    linear checks belong to ``has_type``), or None."""
    if isinstance(v, bool | int | float | Fraction | dict | DenseArray) or is_sympy(v):
        return None
    kind = f"{type(v).__module__.split('.')[0]}.{type(v).__name__}".removeprefix("builtins.")
    return (f"input {name} is a {kind}, not an SDQLite value (a number, a dict of them, a "
            "DenseArray): sdqlite.evaluate and sdqlite.grad read numpy and scipy data, or "
            "convert it with semantics.convert.from_numpy / from_scipy")


def has_type(v: Value, t: Type) -> bool:
    """Is ``v`` a canonical value of type ``t``? (No stored zeros in dictionaries.)"""
    match t:
        case BoolT():
            return isinstance(v, bool)
        case IntT():
            return isinstance(v, int) and not isinstance(v, bool)
        case RealT():
            return isinstance(v, float | Fraction) or is_sympy(v)  # (a bool is an int)
        case DictT(val, dense):
            if dense:
                return (isinstance(v, DenseArray) and (bool(v.items) or v.start == 0)
                        and all(has_type(x, val) for x in v))
            return isinstance(v, dict) and all(
                isinstance(k, int) and not isinstance(k, bool) and has_type(x, val)
                and not is_zero(x)
                for k, x in v.items()
            )
        case _:
            assert_never(t)


def stored_zero(v: Value) -> tuple[int, ...] | None:
    """The keys of an entry a dictionary in ``v`` stores as zero (which no canonical value
    does), if there is one: for an error that says where."""
    if isinstance(v, dict):
        for k, x in v.items():
            if is_zero(x):
                return (k,)
            if (inner := stored_zero(x)) is not None:
                return (k, *inner)
    if isinstance(v, DenseArray):
        for i, x in enumerate(v.items, v.start):
            if (inner := stored_zero(x)) is not None:
                return (i, *inner)
    return None


def data_mismatch(name: str, v: Value, want: Type, found: Type | None) -> str:
    """Why input ``name``'s data ``v`` (of type ``found``, when known) is no value of the
    declared ``want``: where it stores a zero, when that is all, else the two types."""
    path = stored_zero(v) if found in (want, None) else None
    if path is not None:
        at = "".join(f"({k})" for k in path)
        return (f"input {name} stores a zero at {name}{at}: a dictionary holds only its "
                "nonzero entries (leave that entry out)")
    return (f"input {name} is declared {want} but its data is "
            f"{found if found is not None else 'of another type'}")


def type_of(v: Value) -> Type | None:
    """The type of a value when its data determine it (None for an empty dictionary)."""
    if isinstance(v, bool):
        return BoolT()
    if isinstance(v, int):
        return IntT()
    if isinstance(v, float | Fraction) or is_sympy(v):
        return RealT()
    items = list(v.values()) if isinstance(v, dict) else list(v.items)
    types = {t for x in items if (t := type_of(x)) is not None}
    if len(types) != 1:
        return None
    (inner,) = types
    return DictT(inner, isinstance(v, DenseArray))


# ---- semantic equality -----------------------------------------------------------------


def values_equal(a: Value, b: Value, *, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Structural equality of values; reals within ``rel_tol``/``abs_tol`` (exact by default).

    With a tolerance, a dictionary entry present on one side only must be within
    ``abs_tol`` of zero on the other."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        return all(
            values_equal(a[k], b[k], rel_tol=rel_tol, abs_tol=abs_tol) if k in a and k in b
            else _near_zero(a.get(k, b.get(k)), abs_tol)
            for k in keys
        )
    if isinstance(a, DenseArray) and isinstance(b, DenseArray):
        return a.start == b.start and len(a) == len(b) and all(
            values_equal(x, y, rel_tol=rel_tol, abs_tol=abs_tol)
            for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict | DenseArray) or isinstance(b, dict | DenseArray):
        return False
    if is_sympy(a) or is_sympy(b):
        import sympy

        return bool(sympy.simplify(a - b) == 0)
    if rel_tol == 0.0 and abs_tol == 0.0:
        return bool(a == b)
    return math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=abs_tol)


def _near_zero(v: Value, abs_tol: float) -> bool:
    if isinstance(v, dict):
        return all(_near_zero(x, abs_tol) for x in v.values())
    if isinstance(v, DenseArray):
        return all(_near_zero(x, abs_tol) for x in v)
    return abs(float(v)) <= abs_tol


def inner_extents_forgotten(v: Value, *, under_dict: bool = False) -> Value:
    """``v`` with every dense array stored under a dictionary key read as the function of
    its positions (the dictionary of its non-zero positions).

    An all-zero array is zero inside a dictionary and is dropped, and with it its extent:
    so ``+`` on such dictionaries is associative only pointwise (``({0 -> [0, 1]} +
    {0 -> [0, -1]}) + {0 -> [5]}`` keeps one position, ``{0 -> [0, 1]} + ({0 -> [0, -1]}
    + {0 -> [5]})`` two).  Whatever sums in another order (destination-passing style, the
    C++ backend's hash maps) agrees with the interpreter on these values pointwise."""
    if isinstance(v, dict):
        return {k: inner_extents_forgotten(x, under_dict=True) for k, x in v.items()}
    if isinstance(v, DenseArray):
        items = [inner_extents_forgotten(x, under_dict=under_dict) for x in v.items]
        if not under_dict:
            return DenseArray(tuple(items), v.start)
        return {p: x for p, x in enumerate(items, v.start) if not is_zero(x)}
    return v

"""Declared extents checked against data (see ``sdqlite.syntax.types``).

A size name denotes one number for all inputs of a program.  A dense layer
``{dense_int[n] -> D}`` fixes it: the array holds exactly the positions ``0 .. n-1``.
A sparse layer ``{int[n] -> D}`` needs every stored key in ``0 .. n-1``; where no dense
layer fixes ``n`` the keys need only be non-negative (some ``n`` above them exists).
A sparse layer of data that have a shape (a ``scipy.sparse`` matrix) fixes ``n`` as well,
as scipy's own operations read a shape: a 5 x 4 matrix ``A`` and a 5-entry ``x`` in
``A @ x`` are an error, not a sum over the first four entries.
These are the facts the optimizer's extent rewrites rely on, so data breaking them is an
error, not a silent wrong answer.

The rules run on *facts* about each layer of each input (``Layer``): one per array or
dictionary of a value (``facts``, one step per entry), or one per layer of a numpy
array or a ``scipy.sparse`` matrix, summarised without per-entry Python work (the
compiled backend's ``codegen/api.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from sdqlite.errors import DataError, Span
from sdqlite.syntax.types import DictT, Type
from semantics.values import DenseArray, Value


@dataclass(frozen=True)
class Layer:
    """What data say about one layer of an input: for a dense layer its positions (the
    first and the count); for a sparse one its smallest and largest stored key (None
    when it stores none); ``bound``, a size the data's shape gives (numpy, scipy)."""

    type: DictT
    path: str  # where it sits: "A", "A(3)", or "A(*)" for every row at once
    start: int = 0
    count: int = 0
    keys: tuple[int, int] | None = None
    bound: int | None = None


def facts(t: Type, v: Value, path: str) -> Iterator[Layer]:
    """Every dictionary layer of a value of type ``t``, with where it sits (``A(3)``)."""
    if not isinstance(t, DictT):
        return
    if isinstance(v, DenseArray):
        yield Layer(t, path, start=v.start, count=len(v))
        entries: Iterable[tuple[int, Value]] = enumerate(v.items, v.start)
    elif isinstance(v, dict):
        yield Layer(t, path, keys=(min(v), max(v)) if v else None)
        entries = v.items()
    else:
        return
    for k, x in entries:
        yield from facts(t.val, x, f"{path}({k})")


def check_layers(inputs: Mapping[str, tuple[Iterable[Layer], Span | None]]) -> dict[str, int]:
    """The sizes the dense layers and the shapes of sparse data fix (name → number); a
    ``DataError`` at the declaration of the first input whose data break a declared
    extent."""
    fixed: dict[str, tuple[int, str]] = {}  # size name → (number, the layer that fixed it)
    listed = {name: (list(ls), span) for name, (ls, span) in inputs.items()}
    for layers, span in listed.values():  # a sparse layer's shape (scipy) fixes its size,
        for f in layers:  # as scipy's own operations take it: first, so that a vector
            n = f.type.extent  # whose length differs is the one blamed
            if f.type.dense or not n or f.bound is None:
                continue
            if n in fixed and fixed[n][0] != f.bound:
                size, source = fixed[n]
                raise DataError(f"input {f.path}: its shape gives {n} = {f.bound}, but "
                                f"{n} = {size} (from {source})", span)
            fixed.setdefault(n, (f.bound, f"the shape of {f.path}"))
    for layers, span in listed.values():  # dense layers fix sizes
        for f in layers:
            n = f.type.extent
            if not (f.type.dense and n):
                continue
            if f.count and f.start != 0:
                raise DataError(f"input {f.path} is declared dense_int[{n}] but its positions "
                                f"start at {f.start}, not 0", span)
            if n in fixed and fixed[n][0] != f.count:
                size, source = fixed[n]
                raise DataError(f"input {f.path} has {f.count} positions but {n} = {size} "
                                f"(from {source})", span)
            fixed.setdefault(n, (f.count, f.path))
    for layers, span in listed.values():  # sparse layers' keys lie below them
        for f in layers:
            n = f.type.extent
            if f.type.dense or n is None or f.keys is None:
                continue
            bound_at = fixed.get(n)
            for k in f.keys:
                if k < 0 or (bound_at is not None and k >= bound_at[0]):
                    bound = (f"{n} = {bound_at[0]}, from {bound_at[1]}" if bound_at
                             else f"keys of int[{n}] are 0 or more")
                    raise DataError(f"input {f.path} has key {k} outside int[{n}] ({bound})",
                                    span)
    return {n: size for n, (size, _) in fixed.items()}


def check_extents(inputs: Mapping[str, tuple[Type, Value, Span | None]]) -> dict[str, int]:
    """``check_layers`` on the facts of values."""
    return check_layers({name: (facts(t, v, name), span)
                         for name, (t, v, span) in inputs.items()})


def size_bounds(layers: Iterable[Layer], fixed: Mapping[str, int]) -> dict[str, int]:
    """For each size name, a number every key of its layers lies below: the fixed size,
    else the largest of the shapes' bounds and the largest stored key plus one."""
    out = dict(fixed)
    for f in layers:
        n = f.type.extent
        if n is None or n in fixed:
            continue
        top = max(f.bound or 0, (f.keys[1] + 1) if f.keys else 0, f.start + f.count)
        out[n] = max(out.get(n, 0), top)
    return out

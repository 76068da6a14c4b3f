"""Declared extents checked against data (see ``sdqlite.types``).

A size name denotes one number for all inputs of a program.  A dense layer
``{dense_int[n] -> D}`` fixes it: the array holds exactly the positions ``0 .. n-1``.
A sparse layer ``{int[n] -> D}`` needs every stored key in ``0 .. n-1``; where no dense
layer fixes ``n`` the keys need only be non-negative (some ``n`` above them exists).
These are the facts the optimizer's extent rewrites rely on, so data breaking them is an
error, not a silent wrong answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from sdqlite.errors import DataError, Span
from sdqlite.types import DictT, Type
from semantics.values import DenseArray, Value


def check_extents(inputs: Mapping[str, tuple[Type, Value, Span | None]]) -> dict[str, int]:
    """The sizes the data fix (name → number); a ``DataError`` at the declaration of the
    first input whose data break a declared extent."""
    fixed: dict[str, tuple[int, str]] = {}  # size name → (number, the input that fixed it)
    for name, (t, v, span) in inputs.items():  # dense layers fix sizes
        for layer, x, path in _layers(t, v, name):
            if not (layer.dense and layer.extent and isinstance(x, DenseArray)):
                continue
            n = layer.extent
            if x.items and x.start != 0:
                raise DataError(f"input {path} is declared dense_int[{n}] but its positions "
                                f"start at {x.start}, not 0", span)
            if n in fixed and fixed[n][0] != len(x):
                size, source = fixed[n]
                raise DataError(f"input {path} has {len(x)} positions but {n} = {size} "
                                f"(from {source})", span)
            fixed.setdefault(n, (len(x), path))
    for name, (t, v, span) in inputs.items():  # sparse layers' keys lie below them
        for layer, x, path in _layers(t, v, name):
            if layer.dense or layer.extent is None or not isinstance(x, dict):
                continue
            n = layer.extent
            bound_at = fixed.get(n)
            for k in x:
                if k < 0 or (bound_at is not None and k >= bound_at[0]):
                    bound = (f"{n} = {bound_at[0]}, from {bound_at[1]}" if bound_at
                             else f"keys of int[{n}] are 0 or more")
                    raise DataError(f"input {path} has key {k} outside int[{n}] ({bound})",
                                    span)
    return {n: size for n, (size, _) in fixed.items()}


def _layers(t: Type, v: Value, path: str) -> Iterator[tuple[DictT, Value, str]]:
    """Every dictionary layer of a value of type ``t``, with where it sits (``A(3)``)."""
    if not isinstance(t, DictT):
        return
    yield t, v, path
    entries = (((v.start + i, x) for i, x in enumerate(v.items)) if isinstance(v, DenseArray)
               else v.items() if isinstance(v, dict) else ())
    for k, x in entries:
        yield from _layers(t.val, x, f"{path}({k})")

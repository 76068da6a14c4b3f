"""The sizes of a result's layers bound its keys (``sdqlite/sizes.py``).

For generated programs Γ ⊢ e : T over inputs with declared sizes (a dense x of size n, a
dense m×n X2, V1's keys and M's columns below n, M's rows below m) and data ρ obeying
them: wherever ``result_sizes(e, Γ)`` names a size s for layer l of T, every key stored
in layer l of ⟦e⟧ρ lies in 0 .. N-1, where N is the number the data give s — fixed by a
dense input, else the largest key of the layers declared with s, plus one
(``semantics.extents.size_bounds``).  This is what lets the compiled code accumulate such
a layer in an array of N positions (a dense destination).
"""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given

from properties.generators import SIZED_CTX, sized_environments, sized_programs
from sdqlite.ast import Expr
from sdqlite.sizes import NO_KEYS, result_sizes
from sdqlite.typecheck import typecheck
from semantics.extents import check_extents, facts, size_bounds
from semantics.interp import evaluate
from semantics.values import DenseArray, Value


def keys_by_layer(v: Value, level: int = 0) -> Iterator[tuple[int, int]]:
    """(layer, key) for every key stored in every layer of ``v``."""
    if isinstance(v, dict):
        for k, x in v.items():
            yield level, k
            yield from keys_by_layer(x, level + 1)
    elif isinstance(v, DenseArray):
        for k, x in enumerate(v.items, v.start):
            yield level, k
            yield from keys_by_layer(x, level + 1)


@given(sized_programs(), sized_environments())
def test_declared_sizes_bound_the_results_keys(case: tuple[Expr, str],
                                               env: dict[str, Value]) -> None:
    e, _ = case
    elab, _ = typecheck(e, SIZED_CTX)
    sizes = result_sizes(elab, SIZED_CTX)
    fixed = check_extents({x: (t, env[x], None) for x, t in SIZED_CTX.items()})
    bounds = size_bounds((f for x, t in SIZED_CTX.items() for f in facts(t, env[x], x)),
                         fixed)
    for level, k in keys_by_layer(evaluate(elab, env)):
        s = sizes[level] if level < len(sizes) else None
        if s is not None and s != NO_KEYS:
            assert 0 <= k < bounds.get(s, 0), (level, k, s, bounds)

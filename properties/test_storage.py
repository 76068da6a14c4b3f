"""Storage formats denote the values they store, and storage composition keeps meaning
(§5.3, Fig. fig:storage_spec; ``sdqlite/storage/formats.py``).

1. For every format F of the table and every value v of the logical type F stores
   (any sizes at least the data's), the interpreter evaluates F's definition, on the flat
   arrays ``layout(F, v)`` lays v out in, to v itself — exactly.
2. A positional layer (CSR's rows, a dense vector's positions) refuses a negative key
   with a DataError; ``dict`` and the COO formats store any key.
3. For generated programs Γ ⊢ e : T and any choice of a format per input that admits
   one, ``compose(e)`` — each input bound to its format's definition over its flat
   arrays — has e's type, and its value on the flat arrays of ρ is ⟦e⟧(ρ).
4. The lengths a format states of its arrays (``Format.lengths``, on which the compiled
   loops' unchecked reads rely) hold of every layout: ``n`` and ``n+1`` exactly, and for
   ``@p`` every entry of the pointer array p (monotone from 0) at most the length.
5. The index arrays whose entries a definition makes keys (``Format.keys``: CSR's idx,
   of layer 1) hold keys of that layer of every value laid out, so below its size (what
   the compiled code's workspaces rely on: ``sdqlite.check.sizes``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from properties.generators import Generated, coo, environments, flat_values, programs
from sdqlite.ad.gradient import checked
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import DataError
from sdqlite.storage.compose import compose
from sdqlite.storage.formats import FORMATS, TENSOR3, Format, formats_for, layout, resolve
from sdqlite.syntax.types import DictT
from semantics.interp import evaluate
from semantics.values import Value, values_equal

STORED = [f for f in FORMATS.values() if not f.identity]


@st.composite
def stored(draw: st.DrawFn) -> tuple[Format, Value, tuple[int | None, ...]]:
    from properties.generators import values

    fmt = draw(st.sampled_from(STORED))
    assert fmt.stores is not None
    v = draw(values(fmt.stores))
    keys, _ = coo(v, fmt.stores)
    sizes = tuple(draw(st.sampled_from([None, (int(k.max()) + 1 if len(k) else 0)
                                        + draw(st.integers(0, 2))])) for k in keys)
    return fmt, v, sizes


@given(stored())
def test_each_definition_denotes_the_value_it_stores(case: tuple[Format, Value, Any]) -> None:
    fmt, v, sizes = case
    assert fmt.stores is not None
    flat = layout(fmt, coo(v, fmt.stores), sizes)
    ctx = dict(fmt.params)
    elab, t = typecheck(fmt.program, ctx)
    assert t == fmt.stores
    assert evaluate(elab, flat_values(flat, fmt)) == v


def holds(flat: dict[str, Any], length: str, n: int) -> bool:
    """Does an array of ``n`` entries have the ``length`` a format states (law 4)?"""
    base = length.removeprefix("@").removesuffix("+1")
    extra = 1 if length.endswith("+1") else 0
    if not length.startswith("@"):
        return n == int(flat[base]) + extra
    p = np.asarray(flat[base])
    return bool(len(p) and p[0] == 0 and np.all(np.diff(p) >= 0)) and \
        int(p[-1]) + extra <= n


@given(stored())
def test_each_layout_has_the_lengths_its_format_states(case: tuple[Format, Value, Any]) -> None:
    fmt, v, sizes = case
    assert fmt.stores is not None
    flat = layout(fmt, coo(v, fmt.stores), sizes)
    for array, length in fmt.lengths:
        assert holds(flat, length, len(flat[array])), (fmt.name, array, length)


@given(stored())
def test_each_key_array_holds_keys_of_its_layer(case: tuple[Format, Value, Any]) -> None:
    fmt, v, sizes = case
    assert fmt.stores is not None
    keys, _ = coo(v, fmt.stores)
    flat = layout(fmt, coo(v, fmt.stores), sizes)
    for array, layer in fmt.keys.items():
        assert set(np.asarray(flat[array]).tolist()) <= set(keys[layer].tolist()), fmt.name


def test_the_key_arrays_are_those_fig_storage_spec_keys_by() -> None:
    """Read off the figure: CSR's idx keys columns, CSC's rows, COO's row (and col)."""
    assert {f.name: f.keys for f in STORED if f.keys} == {
        "coo": {"row": 0}, "csr": {"idx": 1}, "csc": {"idx": 0},
        "coo_matrix": {"row": 0, "col": 1}, "csf": {"idx1": 0, "idx2": 1, "idx3": 2}}


def test_the_lengths_name_arrays_and_counts_of_their_format() -> None:
    """Each stated length is an array's, counted by a scalar parameter or by a pointer
    array of the same format."""
    for fmt in STORED:
        params = dict(fmt.params)
        for array, length in fmt.lengths:
            base = length.removeprefix("@").removesuffix("+1")
            counter = params[base]
            assert isinstance(params[array], DictT), (fmt.name, array)
            assert isinstance(counter, DictT) == length.startswith("@"), (fmt.name, length)


@pytest.mark.parametrize("fmt", STORED, ids=lambda f: f.name)
def test_positional_layers_refuse_negative_keys(fmt: Format) -> None:
    assert fmt.stores is not None
    depth = len(fmt.positional)
    keys = [np.array([-1 if layer == 0 else 0]) for layer in range(depth)]
    entry = (keys, np.array([1.5]))
    if fmt.positional[0]:
        with pytest.raises(DataError, match="negative"):
            layout(fmt, entry, (None,) * depth)
    else:  # stored as it is: the definition gives back the key -1
        flat = layout(fmt, entry, (None,) * depth)
        value = evaluate(typecheck(fmt.program, dict(fmt.params))[0], flat_values(flat, fmt))
        assert -1 in value


def test_the_table_covers_figure_storage_spec() -> None:
    """Fig. storage_spec's formats, and their transposes the text mentions, plus CSF."""
    assert {"dense", "coo", "csr", "csc", "coo_matrix", "dense_matrix", "dense_col", "csf",
            "dict"} <= set(FORMATS)
    assert resolve("csf", TENSOR3).name == "csf"


@st.composite
def composed_cases(draw: st.DrawFn) -> tuple[Generated, dict[str, Value], dict[str, str]]:
    g = draw(programs())
    env = draw(environments(g.ctx))
    formats = {x: draw(st.sampled_from(formats_for(t))) for x, t in g.ctx.items()}
    return g, env, formats


@given(composed_cases())
def test_composition_keeps_meaning(case: tuple[Generated, dict[str, Value], dict[str, str]]
                                   ) -> None:
    g, env, names = case
    elab, t = checked(g.expr, g.ctx)
    formats = {x: resolve(f, g.ctx[x]) for x, f in names.items()}
    c = compose(elab, g.ctx, formats)
    elab2, t2 = typecheck(c.program, c.ctx)
    assert t2 == t
    flat_env = {x: v for x, v in env.items() if x not in c.flat}
    for x, params in c.flat.items():
        fmt = formats[x]
        assert fmt.stores is not None
        flat = flat_values(layout(fmt, coo(env[x], fmt.stores), (None,) * len(fmt.positional)),
                           fmt)
        flat_env.update({params[p]: flat[p] for p in params})
    assert values_equal(evaluate(elab2, flat_env), evaluate(elab, env))

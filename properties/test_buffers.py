"""Laws of the flat buffers that carry values across the C boundary (``codegen/data.py``;
the layout of ``codegen/sdqlite_runtime.h``).

1. *decode is the inverse of encode*: for every value v of every type T (real, int and
   bool leaves; up to three layers, each dense or sparse), ``decode(encode(v, T), T)`` is
   v, leaf for leaf and of the same Python type.
2. *The buffers are the runtime's layout*: 2L + 1 arrays; per layer a pointer array
   (int64, from 0, non-decreasing, one more than the layer's instances, ending at its
   entry count) and an index array (a sparse layer's keys, increasing within an
   instance; a dense layer's start per instance); then the leaves in the leaf's dtype.
3. *to_coo lists every leaf with its key path*, in the order of a depth-first walk of
   the value (written here independently).
4. *The vectorized readers agree with the value they stand for*: ``from_numpy(a)``,
   ``from_coo(keys, vals)`` and a scipy matrix read as it is (``codegen/api.py``: the
   entries of its canonical form) are the buffers ``encode`` gives the value
   ``semantics.convert`` (or the entries) read; ``to_numpy`` reads a rectangular
   value of dense layers starting at 0 back as the array, and refuses (None) any other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from codegen import api, inputs
from codegen import data as D
from properties.generators import values
from sdqlite.errors import DataError
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type, scalar_of
from semantics import convert
from semantics.values import DenseArray, Value, dense


@st.composite
def types(draw: st.DrawFn, depth: int = 3) -> Type:
    scalars: list[Type] = [REAL, INT, BOOL]
    t = draw(st.sampled_from(scalars))
    for _ in range(draw(st.integers(0, depth))):
        t = DictT(t, dense=draw(st.booleans()))
    return t


@st.composite
def typed_values(draw: st.DrawFn) -> tuple[Type, Value]:
    t = draw(types())
    v = draw(values(t))
    return t, draw(shifted(v))


def shifted(v: Value) -> st.SearchStrategy[Value]:
    """``v`` with its dense arrays starting anywhere (sub-arrays keep their positions)."""
    if isinstance(v, DenseArray):
        return st.tuples(st.integers(0, 3), *[shifted(x) for x in v.items]).map(
            lambda s: dense(list(s[1:]), s[0]))
    if isinstance(v, dict):
        keys = sorted(v)
        return st.tuples(*[shifted(v[k]) for k in keys]).map(
            lambda xs: dict(zip(keys, xs, strict=True)))
    return st.just(v)


#: the leaves' arrays, as the runtime declares them (float64, int64, and a byte for bool)
LEAF_DTYPES = {REAL: np.float64, INT: np.int64, BOOL: np.uint8}


def same(a: Value, b: Value) -> bool:
    """Equal, with leaves of the same Python type (1.0 is not 1, nor True)."""
    if isinstance(a, DenseArray) or isinstance(b, DenseArray):
        return (isinstance(a, DenseArray) and isinstance(b, DenseArray)
                and a.start == b.start and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a.items, b.items, strict=True)))
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b)
                and all(same(a[k], b[k]) for k in a))
    return type(a) is type(b) and a == b


def walk(v: Value, path: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Value]]:
    """Every leaf with its key path, depth first, keys in increasing order."""
    if isinstance(v, DenseArray):
        return [e for i, x in enumerate(v.items) for e in walk(x, (*path, v.start + i))]
    if isinstance(v, dict):
        return [e for k in sorted(v) for e in walk(v[k], (*path, k))]
    return [(path, v)]


def nested(v: Value) -> Any:
    """A value of dense layers as nested lists."""
    return [nested(x) for x in v.items] if isinstance(v, DenseArray) else v


def buffers_equal(a: D.Buffers, b: D.Buffers) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and np.array_equal(x, y)
                                    for x, y in zip(a, b, strict=True))


# ---- 1-3. encode, decode, to_coo -------------------------------------------------------------


@given(typed_values())
@example((DictT(REAL), {0: 0.5, 3: -1.25})).via("a real that is not an integer")
@example((DictT(BOOL, dense=True), dense([True, False], 2))).via("bools from position 2")
@example((DictT(INT), {0: 2**62 + 1, 1: -(2**63)})).via("ints exact to 64 bits")
def test_decode_inverts_encode_and_the_layout_is_the_runtimes(case: tuple[Type, Value]
                                                               ) -> None:
    t, v = case
    bufs = D.encode(v, t)
    assert same(D.decode(bufs, t), v)
    ls = D.layers(t)
    assert len(bufs) == 2 * len(ls) + 1
    instances = 1
    for level, layer in enumerate(ls):
        ptr, idx = bufs[2 * level], bufs[2 * level + 1]
        assert ptr.dtype == np.int64 and idx.dtype == np.int64
        assert len(ptr) == instances + 1 and ptr[0] == 0 and (np.diff(ptr) >= 0).all()
        entries = int(ptr[-1])
        if layer.dense:
            assert len(idx) == instances  # each instance's start position
        else:
            assert len(idx) == entries
            for i in range(instances):  # keys increase within an instance
                assert (np.diff(idx[ptr[i]:ptr[i + 1]]) > 0).all()
        instances = entries
    assert len(bufs[-1]) == instances and bufs[-1].dtype == LEAF_DTYPES[scalar_of(t)]
    keys, vals = D.to_coo(bufs, t)
    expected = walk(v)
    assert len(keys) == len(ls)
    assert [tuple(int(k[e]) for k in keys) for e in range(len(vals))] == [p for p, _ in expected]
    assert [x for _, x in expected] == vals.tolist()


# ---- 4. the vectorized readers ---------------------------------------------------------------

shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)


@given(hnp.arrays(st.sampled_from([np.float64, np.int64]), shapes,
                  elements=st.integers(-3, 3)))
@example(np.zeros((0, 3))).via("no rows")
@example(np.array([[0.5, 0.0], [0.0, -1.25]])).via("reals that are not integers")
def test_from_numpy_is_the_encoding_of_the_array_and_to_numpy_reads_it_back(a: Any) -> None:
    v, t = convert.from_numpy(a)
    bufs = D.from_numpy(a, t)
    assert buffers_equal(bufs, D.encode(v, t))
    back = D.to_numpy(bufs, t)
    assert back is not None and back.dtype == a.dtype
    assert back.shape == a.shape if a.size else back.size == 0
    assert np.array_equal(back.ravel(), a.ravel())


@given(typed_values())
@example((DictT(DictT(REAL, dense=True), dense=True),
          dense([dense([1.0]), dense([2.0, 3.0]), dense([])]))).via("ragged, from 0")
def test_to_numpy_reads_exactly_the_rectangular_arrays_from_0(case: tuple[Type, Value]
                                                               ) -> None:
    t, v = case
    if not all(layer.dense for layer in D.layers(t)):
        return
    arr = D.to_numpy(D.encode(v, t), t)

    def rectangular(x: Value, depth: int) -> list[int] | None:  # the shape, if all alike
        if not isinstance(x, DenseArray):
            return []
        if x.start != 0 and len(x):
            return None
        inner = [rectangular(y, depth - 1) for y in x.items]
        if any(s is None or s != inner[0] for s in inner):
            return None
        first = inner[0] if inner else None
        return [len(x), *(first if first is not None else [0] * (depth - 1))]

    shape = rectangular(v, len(D.layers(t)))
    assert (arr is not None) == (shape is not None)
    if arr is not None and shape is not None:
        assert list(arr.shape) == shape
        if arr.size:
            assert arr.dtype == D.leaf_dtype(t) and arr.tolist() == nested(v)


@given(hnp.arrays(np.float64, shapes, elements=st.just(1.0)), types())
def test_from_numpy_refuses_a_type_of_other_layers(a: Any, t: Type) -> None:
    ls = D.layers(t)
    if a.ndim == len(ls) and all(layer.dense for layer in ls):
        assert len(D.from_numpy(a, t)) == 2 * a.ndim + 1
    else:
        with pytest.raises(DataError, match=f"^a {a.ndim}-d array is not a value of type "):
            D.from_numpy(a, t)


@st.composite
def sparse_matrices(draw: st.DrawFn) -> Any:
    rows, cols = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    n = draw(st.integers(0, 12)) if rows and cols else 0
    i = draw(st.lists(st.integers(0, max(rows - 1, 0)), min_size=n, max_size=n))
    j = draw(st.lists(st.integers(0, max(cols - 1, 0)), min_size=n, max_size=n))
    x = draw(st.lists(st.sampled_from([0.0, 0.5, -1.25, 2.0]), min_size=n, max_size=n))
    m = scipy.sparse.coo_array((np.array(x), (np.array(i, dtype=np.int64),
                                              np.array(j, dtype=np.int64))),
                               shape=(rows, cols))  # duplicates and explicit zeros kept
    # and a CSR matrix as given, its rows' entries out of order and repeated
    raw = scipy.sparse.csr_array((np.array(x), np.array(j, dtype=np.int64),
                                  np.searchsorted(np.sort(i), np.arange(rows + 1))),
                                 shape=(rows, cols)) if n else m.tocsr()
    return draw(st.sampled_from([m, m.tocsr(), m.tocsc(), m.astype(np.int64).tocsr(), raw]))


@given(sparse_matrices())
def test_a_scipy_matrix_read_as_it_is_is_the_encoding_of_the_matrix(m: Any) -> None:
    v, t = convert.from_scipy(m)
    assert buffers_equal(api.as_is(inputs.read("m", m, None), t), D.encode(v, t))


@st.composite
def entries(draw: st.DrawFn) -> tuple[Type, dict[tuple[int, ...], float], list[int]]:
    depth = draw(st.integers(1, 3))
    t: Type = REAL
    for _ in range(depth):
        t = DictT(t)
    paths = draw(st.lists(st.tuples(*[st.integers(0, 4)] * depth), unique=True, max_size=12))
    vals = draw(st.lists(st.sampled_from([0.5, -1.25, 2.0, 3.0]), min_size=len(paths),
                         max_size=len(paths)))
    order = draw(st.permutations(range(len(paths))))
    return t, dict(zip(paths, vals, strict=True)), list(order)


@given(entries())
def test_from_coo_is_the_encoding_of_the_entries_in_any_order(
        case: tuple[Type, dict[tuple[int, ...], float], list[int]]) -> None:
    t, table, order = case
    paths = list(table)
    keys = [np.array([paths[e][level] for e in order], dtype=np.int64)
            for level in range(len(D.layers(t)))]
    vals = np.array([table[paths[e]] for e in order])
    value: dict[int, Any] = {}
    for path, x in table.items():
        node = value
        for k in path[:-1]:
            node = node.setdefault(k, {})
        node[path[-1]] = x
    assert buffers_equal(D.from_coo(keys, vals, t), D.encode(value, t))

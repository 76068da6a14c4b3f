"""Conversions from and to numpy, scipy.sparse and files keep values and types."""

from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sdqlite.errors import DataError
from sdqlite.syntax.types import INT, REAL, DictT
from semantics.convert import from_numpy, from_scipy, load, to_numpy, to_scipy
from semantics.values import dense, has_type


def test_npy_ranks(tmp_path: Path) -> None:
    for arr, t in [(np.array(2.5), REAL), (np.array([1.0, 0.0]), DictT(REAL, dense=True)),
                   (np.eye(2), DictT(DictT(REAL, dense=True), dense=True)),
                   (np.array([0, 3], dtype=np.int64), DictT(INT, dense=True))]:
        np.save(tmp_path / "a.npy", arr)
        v, got = load(tmp_path / "a.npy")
        assert got == t and has_type(v, t)
        assert np.array_equal(to_numpy(v), arr)


def test_dense_vector_keeps_zeros() -> None:
    v, _ = from_numpy(np.array([0.0, 1.0, 0.0]))
    assert v == dense([0.0, 1.0, 0.0])


def test_mtx_is_sparse_and_drops_explicit_zeros(tmp_path: Path) -> None:
    m = sp.coo_matrix((np.array([1.0, 0.0, 2.0]), (np.array([0, 1, 2]), np.array([1, 1, 0]))),
                      shape=(3, 3))
    scipy.io.mmwrite(tmp_path / "m.mtx", m)
    v, t = load(tmp_path / "m.mtx")
    assert t == DictT(DictT(REAL))
    assert v == {0: {1: 1.0}, 2: {0: 2.0}}
    assert (to_scipy(v, (3, 3)) != m.tocsr()).nnz == 0


def test_scipy_duplicates_are_summed() -> None:
    m = sp.coo_matrix((np.array([1.0, 2.0]), (np.array([0, 0]), np.array([1, 1]))),
                      shape=(2, 2))
    assert from_scipy(m)[0] == {0: {1: 3.0}}


@pytest.mark.parametrize("payload", [b"not numpy", b""])
def test_bad_files_are_data_errors(tmp_path: Path, payload: bytes) -> None:
    for name in ["x.npy", "x.mtx"]:
        (tmp_path / name).write_bytes(payload)
        with pytest.raises(DataError):
            load(tmp_path / name)


def test_non_finite_and_odd_dtypes_are_rejected() -> None:
    with pytest.raises(DataError, match="not finite"):
        from_numpy(np.array([1.0, np.nan]))
    with pytest.raises(DataError, match="dtype"):
        from_numpy(np.array(["a"]))

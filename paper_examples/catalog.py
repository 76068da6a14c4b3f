"""The paper's SDQLite listings of §2–3 and Fig. storage_spec as runnable examples.

Each example names its source file (next to this module), builds its inputs from
numpy/scipy data, and computes the expected result *independently*, with numpy/scipy
(never with the SDQLite interpreter).  ``python -m paper_examples`` (or
``sdqlite examples``) runs them all; ``tests/test_paper_examples.py`` checks them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from semantics.convert import from_numpy, from_scipy, sparse_vector
from semantics.run import Input
from semantics.values import Value

HERE = Path(__file__).parent
Data = dict[str, Any]  # the raw numpy / scipy objects an example is built from


@dataclass(frozen=True)
class Example:
    name: str
    title: str
    data: Callable[[np.random.Generator], Data]
    inputs: Callable[[Data], dict[str, Input]]
    expected: Callable[[Data], Value]
    rel_tol: float = 1e-12

    @property
    def path(self) -> Path:
        return HERE / f"{self.name}.sdql"


def _vec(rng: np.random.Generator, n: int = 12, density: float = 0.4) -> Any:
    """A random sparse vector as a dense numpy array with exact zeros."""
    v = rng.uniform(-2.0, 2.0, n)
    v[rng.random(n) > density] = 0.0
    return v


def _mat(rng: np.random.Generator, m: int, n: int, density: float = 0.35) -> Any:
    return sp.random(m, n, density=density, format="csr", random_state=rng,
                     data_rvs=lambda k: rng.uniform(-2.0, 2.0, k))


def _real(x: Any) -> Input:
    return Input(float(x))


def _int(x: Any) -> Input:
    return Input(int(x))


def _arr(a: Any) -> Input:
    value, t = from_numpy(a)
    return Input(value, t)


def _sparse_vec(v: Any) -> Input:
    return Input(sparse_vector(v))


def _sparse_mat(m: Any) -> Input:
    value, t = from_scipy(m)
    return Input(value, t)


def _two_vectors(rng: np.random.Generator) -> Data:
    return {"V1": _vec(rng), "V2": _vec(rng)}


def _dot_inputs(d: Data) -> dict[str, Input]:
    return {"V1": _sparse_vec(d["V1"]), "V2": _sparse_vec(d["V2"])}


def _coo_data(rng: np.random.Generator) -> Data:
    v = sp.coo_array(_vec(rng, 15).reshape(1, -1))
    return {"dense": v.toarray().ravel(), "row": v.col.astype(np.int64), "val": v.data}


def _csr_data(rng: np.random.Generator) -> Data:
    return {"A": _mat(rng, 6, 8)}


def _csc_data(rng: np.random.Generator) -> Data:
    return {"A": _mat(rng, 6, 8).tocsc()}


def _compressed_inputs(d: Data) -> dict[str, Input]:
    a = d["A"]
    n = a.shape[0] if a.format == "csr" else a.shape[1]
    return {"len": _int(n), "pos": _arr(a.indptr.astype(np.int64)),
            "idx": _arr(a.indices.astype(np.int64)), "val": _arr(a.data)}


def _dense_matrix_data(rng: np.random.Generator) -> Data:
    m = _mat(rng, 5, 4, 0.5).toarray()
    return {"M": m}


EXAMPLES: list[Example] = [
    Example(
        "dot_v1", "Example 1: dot product, iterating V1", _two_vectors, _dot_inputs,
        lambda d: float(d["V1"] @ d["V2"]),
    ),
    Example(
        "dot_v2", "Example 1: dot product, iterating V2", _two_vectors, _dot_inputs,
        lambda d: float(d["V1"] @ d["V2"]),
    ),
    Example(
        "scalar_vector", "Example 2: scalar-vector product s * V",
        lambda rng: {"s": 2.5, "V": _vec(rng)},
        lambda d: {"s": _real(d["s"]), "V": _sparse_vec(d["V"])},
        lambda d: sparse_vector(d["s"] * d["V"]),
    ),
    Example(
        "matmul", "§3: matrix-matrix product",
        lambda rng: {"M1": _mat(rng, 5, 6), "M2": _mat(rng, 6, 4)},
        lambda d: {"M1": _sparse_mat(d["M1"]), "M2": _sparse_mat(d["M2"])},
        lambda d: from_scipy(d["M1"] @ d["M2"])[0],
    ),
    Example(
        "map", "§3: map f over the values of a tensor (f = exp)",
        lambda rng: {"V": _vec(rng)},
        lambda d: {"V": _sparse_vec(d["V"])},
        lambda d: {int(i): float(np.exp(d["V"][i])) for i in np.flatnonzero(d["V"])},
    ),
    Example(
        "trace", "Example 3: trace of a matrix",
        lambda rng: {"M": _mat(rng, 7, 7, 0.5)},
        lambda d: {"M": _sparse_mat(d["M"])},
        lambda d: float(d["M"].diagonal().sum()),
    ),
    Example(
        "storage_coo_vector", "Fig. storage_spec: vector in COO format", _coo_data,
        lambda d: {"len": _int(len(d["row"])), "row": _arr(d["row"]), "val": _arr(d["val"])},
        lambda d: sparse_vector(d["dense"]),
    ),
    Example(
        "storage_dense_vector", "Fig. storage_spec: dense vector",
        lambda rng: {"V": _vec(rng, 10, 0.6)},
        lambda d: {"len": _int(len(d["V"])), "V": _arr(d["V"])},
        lambda d: sparse_vector(d["V"]),
    ),
    Example(
        "storage_csr_matrix", "Fig. storage_spec: matrix in CSR format", _csr_data,
        _compressed_inputs, lambda d: from_scipy(d["A"])[0],
    ),
    Example(
        "storage_dense_matrix", "Fig. storage_spec: dense row-major matrix",
        _dense_matrix_data,
        lambda d: {"rows": _int(d["M"].shape[0]), "cols": _int(d["M"].shape[1]),
                   "M": _arr(d["M"].ravel())},
        lambda d: from_scipy(sp.csr_matrix(d["M"]))[0],
    ),
    Example(
        "storage_csc_matrix", "Fig. storage_spec: matrix in CSC format", _csc_data,
        _compressed_inputs, lambda d: from_scipy(d["A"])[0],
    ),
]

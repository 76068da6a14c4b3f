"""§7's six gradients, and least squares' and logistic regression's (issue 27), written in
PyTorch, JAX and TensorFlow, densified and sparse.

Each maker takes a kernel's name and its data (``benchmarks.kernels``: scipy CSR
matrices, 1-d scipy COO vectors, numpy arrays) and returns a thunk computing the gradient
w.r.t. the dense variable, returned as a numpy array (or a scipy matrix).  The thunk's
first call traces/compiles; the harness times it apart.  The frameworks are imported here,
lazily: the tests and the main environment never need them.

Reverse mode (``jacrev``, ``GradientTape.jacobian``), as the paper runs the frameworks,
except VSM (one scalar input, n outputs) in PyTorch and JAX, where forward mode
(``jacfwd``) is the mode any user would pick (TensorFlow's ``GradientTape.jacobian`` and
torch's sparse tensors have reverse mode only: n passes).  The dense systems densify the
sparse input first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

Data = dict[str, Any]
Thunk = Callable[[], Any]


def dense(x: Any) -> Any:
    """A scipy matrix or 1-d array as a numpy array; numbers and arrays as they are."""
    return x.toarray() if hasattr(x, "toarray") else x


# -- PyTorch -------------------------------------------------------------------------

def torch_dense(kernel: str, data: Data) -> Thunk:
    """``torch.func.jacrev``/``jacfwd`` on dense tensors (eager: torch.compile skipped)."""
    import torch
    from torch.func import jacfwd, jacrev

    t = {k: torch.as_tensor(dense(v), dtype=torch.float64) for k, v in data.items()}
    fns: dict[str, tuple[Callable[..., Any], str]] = {
        "BATAX": (lambda x: t["beta"] * (t["A"].T @ (t["A"] @ x)), "X"),
        "SMMM": (lambda b: (t["A"] @ b).sum(), "B"),
        "SMVM": (lambda x: (t["A"] @ x).sum(), "X"),
        "VVA": (lambda v1: v1 + t["V2"], "V1"),
        "VVD": (lambda v1: v1 @ t["V2"], "V1"),
        "VSM": (lambda s: t["V"] * s * s, "s"),
        "LSQ": (lambda x: ((t["A"] @ x - t["b"]) ** 2).sum(), "x"),
        "LOGREG": (lambda x: torch.log1p(torch.exp(-t["b"] * (t["A"] @ x))).sum(), "x"),
    }
    f, wrt = fns[kernel]
    jac = (jacfwd if kernel == "VSM" else jacrev)(f)
    return lambda: jac(t[wrt]).numpy()


def torch_sparse(kernel: str, data: Data) -> Thunk:
    """``torch.autograd.functional.jacobian`` with the sparse input a torch CSR tensor
    (COO for vectors); the Jacobian it returns is dense."""
    import torch
    from torch.autograd.functional import jacobian

    def sparse(x: Any) -> Any:
        if x.ndim == 1:
            c = x.tocoo()
            idx = torch.as_tensor(np.asarray(c.coords[0])[None, :], dtype=torch.int64)
            return torch.sparse_coo_tensor(idx, torch.as_tensor(c.data), x.shape).coalesce()
        m = x.tocsr()
        return torch.sparse_csr_tensor(torch.as_tensor(m.indptr, dtype=torch.int64),
                                       torch.as_tensor(m.indices, dtype=torch.int64),
                                       torch.as_tensor(m.data), m.shape)

    t = {k: sparse(v) if hasattr(v, "toarray") else torch.as_tensor(v, dtype=torch.float64)
         for k, v in data.items()}
    if kernel == "BATAX":
        at = sparse(data["A"].T)  # CSR of Aᵀ: torch has no transpose of a CSR product
    if kernel == "VVD":
        row = sparse(sp.csr_array(data["V2"].reshape(1, -1)))  # V2 as a 1 x n CSR matrix
    fns: dict[str, tuple[Callable[..., Any], str]] = {
        "BATAX": (lambda x: t["beta"] * (at @ (t["A"] @ x)), "X"),
        "SMMM": (lambda b: (t["A"] @ b).sum(), "B"),
        "SMVM": (lambda x: (t["A"] @ x).sum(), "X"),
        "VVA": (lambda v1: v1 + t["V2"], "V1"),  # add(sparse, dense) is not supported
        "VVD": (lambda v1: (row @ v1).sum(), "V1"),  # no backward for sparse * dense vectors
        "VSM": (lambda s: (t["V"] * s * s).to_dense(), "s"),  # nor for a sparse output
        "LSQ": (lambda x: ((t["A"] @ x - t["b"]) ** 2).sum(), "x"),
        "LOGREG": (lambda x: torch.log1p(torch.exp(-t["b"] * (t["A"] @ x))).sum(), "x"),
    }
    f, wrt = fns[kernel]
    return lambda: _np(jacobian(f, t[wrt]))


def _np(x: Any) -> Any:
    return x.to_dense().numpy() if x.layout != x.to_dense().layout else x.numpy()


# -- JAX -----------------------------------------------------------------------------

def _jax() -> Any:
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def jax_dense(kernel: str, data: Data) -> Thunk:
    """``jax.jit(jax.jacrev(f))`` (``jacfwd`` for VSM) on dense arrays."""
    jax = _jax()
    import jax.numpy as jnp

    t = {k: jnp.asarray(dense(v), dtype=jnp.float64) for k, v in data.items()}
    fns: dict[str, tuple[Callable[..., Any], str]] = {
        "BATAX": (lambda x, a, beta: beta * (a.T @ (a @ x)), "X"),
        "SMMM": (lambda b, a: (a @ b).sum(), "B"),
        "SMVM": (lambda x, a: (a @ x).sum(), "X"),
        "VVA": (lambda v1, v2: v1 + v2, "V1"),
        "VVD": (lambda v1, v2: v1 @ v2, "V1"),
        "VSM": (lambda s, v: v * s * s, "s"),
        "LSQ": (lambda x, a, b: ((a @ x - b) ** 2).sum(), "x"),
        "LOGREG": (lambda x, a, b: jnp.log1p(jnp.exp(-b * (a @ x))).sum(), "x"),
    }
    return _jax_thunk(jax, kernel, fns, t)


def jax_bcoo(kernel: str, data: Data) -> Thunk:
    """The same, the sparse input a ``jax.experimental.sparse.BCOO`` array."""
    jax = _jax()
    import jax.numpy as jnp
    from jax.experimental import sparse as jsp

    def bcoo(x: Any) -> Any:
        c = x.tocoo()
        coords = np.stack(c.coords, axis=1) if x.ndim == 2 else np.asarray(c.coords[0])[:, None]
        return jsp.BCOO((jnp.asarray(c.data), jnp.asarray(coords)), shape=x.shape)

    t = {k: bcoo(v) if hasattr(v, "toarray") else jnp.asarray(v, dtype=jnp.float64)
         for k, v in data.items()}
    fns: dict[str, tuple[Callable[..., Any], str]] = {
        "BATAX": (lambda x, a, beta: beta * (a.T @ (a @ x)), "X"),
        "SMMM": (lambda b, a: (a @ b).sum(), "B"),
        "SMVM": (lambda x, a: (a @ x).sum(), "X"),
        "VVA": (lambda v1, v2: jsp.sparsify(jnp.add)(v2, v1), "V1"),
        "VVD": (lambda v1, v2: v2 @ v1, "V1"),
        "VSM": (lambda s, v: (v * (s * s)).todense(), "s"),
        "LSQ": (lambda x, a, b: ((a @ x - b) ** 2).sum(), "x"),
        "LOGREG": (lambda x, a, b: jnp.log1p(jnp.exp(-b * (a @ x))).sum(), "x"),
    }
    return _jax_thunk(jax, kernel, fns, t)


def _jax_thunk(jax: Any, kernel: str, fns: dict[str, tuple[Callable[..., Any], str]],
               t: dict[str, Any]) -> Thunk:
    f, wrt = fns[kernel]
    others = [v for k, v in t.items() if k != wrt]
    jac = jax.jit((jax.jacfwd if kernel == "VSM" else jax.jacrev)(f))
    return lambda: np.asarray(jac(t[wrt], *others).block_until_ready())


# -- TensorFlow ----------------------------------------------------------------------

def tf_dense(kernel: str, data: Data) -> Thunk:
    """``GradientTape.jacobian`` in a ``tf.function(jit_compile=True)`` (XLA)."""
    import tensorflow as tf

    t = {k: tf.constant(dense(v), dtype=tf.float64) for k, v in data.items()}
    fns: dict[str, tuple[Callable[..., Any], str]] = {
        "BATAX": (lambda x: t["beta"] * tf.linalg.matvec(t["A"], tf.linalg.matvec(t["A"], x),
                                                         transpose_a=True), "X"),
        "SMMM": (lambda b: tf.reduce_sum(t["A"] @ b), "B"),
        "SMVM": (lambda x: tf.reduce_sum(tf.linalg.matvec(t["A"], x)), "X"),
        "VVA": (lambda v1: v1 + t["V2"], "V1"),
        "VVD": (lambda v1: tf.tensordot(v1, t["V2"], 1), "V1"),
        "VSM": (lambda s: t["V"] * s * s, "s"),
        "LSQ": (lambda x: tf.reduce_sum((tf.linalg.matvec(t["A"], x) - t["b"]) ** 2), "x"),
        "LOGREG": (lambda x: tf.reduce_sum(tf.math.log1p(tf.exp(
            -t["b"] * tf.linalg.matvec(t["A"], x)))), "x"),
    }
    return _tf_thunk(tf, fns[kernel], t, jit=True)


def tf_sparse(kernel: str, data: Data) -> Thunk:
    """The same with the sparse input a ``tf.sparse.SparseTensor``, in a ``tf.function``
    without XLA (XLA has no kernels for sparse tensors)."""
    import tensorflow as tf

    def sparse(x: Any) -> Any:
        c = x.tocoo()
        coords = np.stack(c.coords, axis=1) if x.ndim == 2 else np.asarray(c.coords[0])[:, None]
        return tf.sparse.reorder(tf.sparse.SparseTensor(coords.astype(np.int64), c.data,
                                                        x.shape))

    t = {k: sparse(v) if hasattr(v, "toarray") else tf.constant(v, dtype=tf.float64)
         for k, v in data.items()}

    def mv(a: Any, x: Any, adjoint: bool = False) -> Any:
        return tf.sparse.sparse_dense_matmul(a, x[:, None], adjoint_a=adjoint)[:, 0]

    fns: dict[str, tuple[Callable[..., Any], str]] = {
        "BATAX": (lambda x: t["beta"] * mv(t["A"], mv(t["A"], x), adjoint=True), "X"),
        "SMMM": (lambda b: tf.reduce_sum(tf.sparse.sparse_dense_matmul(t["A"], b)), "B"),
        "SMVM": (lambda x: tf.reduce_sum(mv(t["A"], x)), "X"),
        "VVA": (lambda v1: tf.sparse.add(t["V2"], v1), "V1"),
        "VVD": (lambda v1: tf.sparse.reduce_sum(t["V2"] * v1), "V1"),
        "VSM": (lambda s: tf.sparse.to_dense(t["V"] * (s * s)), "s"),
        "LSQ": (lambda x: tf.reduce_sum((mv(t["A"], x) - t["b"]) ** 2), "x"),
        "LOGREG": (lambda x: tf.reduce_sum(tf.math.log1p(tf.exp(-t["b"] * mv(t["A"], x)))),
                   "x"),
    }
    return _tf_thunk(tf, fns[kernel], t, jit=False)


def _tf_thunk(tf: Any, fw: tuple[Callable[..., Any], str], t: dict[str, Any],
              jit: bool) -> Thunk:
    f, wrt = fw

    def jacobian(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return tape.jacobian(y, x)

    jac = tf.function(jacobian, jit_compile=jit)

    return lambda: jac(t[wrt]).numpy()


MAKERS: dict[str, Callable[[str, Data], Thunk]] = {
    "torch": torch_dense, "torch-sparse": torch_sparse,
    "jax": jax_dense, "jax-bcoo": jax_bcoo,
    "tf": tf_dense, "tf-sparse": tf_sparse,
}

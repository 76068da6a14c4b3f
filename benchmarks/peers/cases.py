"""The systems, the datasets and sweeps of §7, and what each case is predicted to cost.

A case is one kernel on one dataset; a run of a case is one system on it.  Every
prediction is made before a system is started, from the case's sizes alone: a run that
would exceed the memory budget or the time cap is marked with the reason instead.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io
import scipy.sparse as sp

from benchmarks.kernels import KERNELS, P

MATRIX_KERNELS = ("BATAX", "SMMM", "SMVM")
VECTOR_KERNELS = ("VVA", "VVD", "VSM")
LOSS_KERNELS = ("LSQ", "LOGREG")  # least squares, logistic regression (issue 27)
SQUARE_KERNELS = (*MATRIX_KERNELS, *LOSS_KERNELS)  # the sparse input an n x n matrix
KERNEL_ORDER = (*MATRIX_KERNELS, *LOSS_KERNELS, *VECTOR_KERNELS)
GiB = 2.0**30


@dataclass(frozen=True)
class System:
    name: str
    label: str  # as the figures' legends say it
    kind: str   # "sdqlite", "anchor", "interpreter", "dense" or "sparse" (a framework)
    module: str  # whose version the summary reports


SYSTEMS: dict[str, System] = {s.name: s for s in (
    System("sdqlite-dict", "∇SD (dict)", "sdqlite", "sdqlite"),
    System("sdqlite-arr", "∇SD (arr)", "sdqlite", "sdqlite"),
    System("sdqlite-arr-no-norm", "∇SD (arr, no normalization)", "sdqlite", "sdqlite"),
    System("sdqlite-arr-no-dps", "∇SD (arr, no DPS)", "sdqlite", "sdqlite"),
    System("interpreter", "reference interpreter", "interpreter", "sdqlite"),
    System("scipy", "scipy formula", "anchor", "scipy"),
    System("torch", "PyTorch jacrev (dense)", "dense", "torch"),
    System("torch-sparse", "PyTorch jacobian (sparse CSR)", "sparse", "torch"),
    System("jax", "JAX jit(jacrev) (dense)", "dense", "jax"),
    System("jax-bcoo", "JAX jit(jacrev) (BCOO)", "sparse", "jax"),
    System("tf", "TensorFlow XLA jacobian (dense)", "dense", "tensorflow"),
    System("tf-sparse", "TensorFlow jacobian (SparseTensor)", "sparse", "tensorflow"),
)}
FRAMEWORKS = tuple(s for s, v in SYSTEMS.items() if v.kind in ("dense", "sparse"))
BATAX_ONLY = ("sdqlite-arr-no-norm", "sdqlite-arr-no-dps")  # Fig. fig:batax:opt

# Combinations that do not run, found by trying them (the harness still catches failures).
UNSUPPORTED = {
    ("tf-sparse", "VSM"): "GradientTape.jacobian of SparseTensor * scalar w.r.t. the scalar "
                          "fails in pfor (SparseTensorDenseAdd: rank-0 tensors unsupported)",
}

# SuiteSparse matrices of Table tbl:datasets (dimension, stored entries). They cannot be
# downloaded here: the harness generates uniform random matrices of exactly these sizes.
PAPER_MATRICES = {
    "bcspwr10": (5_300, 21_842), "nopoly": (10_774, 70_842), "pdb1HYS": (36_417, 2_190_591),
    "rma10": (46_835, 2_374_001), "cant": (62_451, 2_034_917),
    "consph": (83_334, 3_046_907), "cop20k_A": (121_192, 1_362_087),
}


@dataclass(frozen=True)
class Case:
    sweep: str   # "density", "dimension", "datasets"
    panel: str   # the figure's panel: e.g. "n=1024" or "density=2^-7"
    kernel: str
    n: int
    nnz: int     # stored entries of the sparse input
    dataset: str = ""  # a named matrix (Table tbl:datasets or an .mtx file)
    mtx: str = ""      # the .mtx file it is read from, if real

    @property
    def density(self) -> float:
        return self.nnz / (self.n * self.n if self.kernel in SQUARE_KERNELS else self.n)

    @property
    def key(self) -> str:
        return f"{self.sweep}/{self.panel}/{self.kernel}/{self.dataset or self.n}/{self.nnz}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def nnz_of(kernel: str, n: int, density: float) -> int:
    return round(density * (n * n if kernel in SQUARE_KERNELS else n))


def sweeps(quick: bool, mtx_dir: Path | None) -> list[Case]:
    """The cases of the figures: density sweeps at a small and a large n, dimension sweeps
    at a high and a low density, and the datasets (quick mode: fewer, smaller)."""
    cases: list[Case] = []
    densities = [2.0**-e for e in (range(1, 14, 2) if quick else range(1, 14))]
    mat_n = [2**10] if quick else [2**10, 2**12]
    vec_n = [2**14] if quick else [2**12, 2**16]
    for kernels, ns in ((MATRIX_KERNELS, mat_n), (LOSS_KERNELS, mat_n), (VECTOR_KERNELS, vec_n)):
        for n in ns:
            for k in kernels:
                cases += [Case("density", f"n=2^{int(math.log2(n))}", k, n, nnz_of(k, n, d))
                          for d in densities]
    mat_d = [7] if quick else [4, 10]
    vec_d = [4] if quick else [1, 7]
    mat_dims = [2**e for e in ((8, 10, 11) if quick else (8, 10, 12, 14))]
    vec_dims = [2**e for e in ((10, 14, 18) if quick else (10, 12, 14, 16, 18, 20))]
    for kernels, ds, dims in ((MATRIX_KERNELS, mat_d, mat_dims), (LOSS_KERNELS, mat_d, mat_dims),
                              (VECTOR_KERNELS, vec_d, vec_dims)):
        for e in ds:
            for k in kernels:
                cases += [Case("dimension", f"density=2^-{e}", k, n, nnz_of(k, n, 2.0**-e))
                          for n in dims]
    named = list(PAPER_MATRICES.items())[:2] if quick else list(PAPER_MATRICES.items())
    for k in SQUARE_KERNELS:
        cases += [Case("datasets", "Table tbl:datasets (synthetic)", k, n, nnz, name)
                  for name, (n, nnz) in named]
        for path in sorted(mtx_dir.glob("*.mtx")) if mtx_dir else []:
            a = read_mtx(path)
            if a is not None:
                cases.append(Case("datasets", "real (.mtx)", k, a.shape[0], a.nnz,
                                  path.stem, str(path)))
    return cases


def read_mtx(path: Path) -> Any:
    """A square real matrix from a Matrix Market file, as CSR (symmetric ones expanded);
    None for anything else."""
    try:
        a: Any = scipy.io.mmread(str(path))
    except (ValueError, OSError):
        return None
    if not sp.issparse(a):
        return None
    m: Any = a
    if m.shape[0] != m.shape[1] or m.dtype.kind not in "fi":
        return None
    return sp.csr_array(m, dtype=np.float64)


def data_for(case: Case) -> dict[str, Any]:
    """The kernel's inputs, the same in every process: the seed is the case's key."""
    rng = np.random.default_rng(list(case.key.encode()))
    k = KERNELS[case.kernel]
    d = k.data(case.n, 0.0, rng)  # the dense inputs; the sparse one replaced below
    if case.mtx:
        d["A"] = read_mtx(Path(case.mtx))
    elif case.kernel in SQUARE_KERNELS:
        flat = rng.choice(case.n * case.n, size=case.nnz, replace=False)
        d["A"] = sp.csr_array((rng.uniform(-2, 2, case.nnz), np.divmod(flat, case.n)),
                              shape=(case.n, case.n))
    else:
        keys = np.sort(rng.choice(case.n, size=case.nnz, replace=False))
        d[k.sparse] = sp.coo_array((rng.uniform(-2, 2, case.nnz), (keys,)), shape=(case.n,))
    return d


# -- predictions ---------------------------------------------------------------------

def jacobian_shape(kernel: str, n: int) -> tuple[int, int]:
    """(outputs, inputs) of the Jacobian w.r.t. the dense variable."""
    return {"BATAX": (n, n), "SMMM": (1, n * P), "SMVM": (1, n),
            "VVA": (n, n), "VVD": (1, n), "VSM": (n, 1), "LSQ": (1, n), "LOGREG": (1, n)}[kernel]


# A framework's time is predicted as passes x overhead + operations / speed: the Jacobian
# takes one pass per output (reverse mode) or input (forward mode, VSM). The constants were
# measured once on this machine (single thread): dense BLAS runs at about 50 GFLOP/s
# (--gflops assumes less); sparse products far slower, and torch.autograd.functional.
# jacobian over sparse tensors loops over the passes in Python (70 µs to 3 ms a pass).
SPARSE_SPEED = {"torch-sparse": 5e7, "jax-bcoo": 1e8, "tf-sparse": 5e8}  # operations / s
PASS_OVERHEAD = {"torch-sparse": 7e-5}  # seconds / pass; the others vectorize the passes
# VSM (one input, n outputs) in forward mode: jacfwd. TensorFlow's GradientTape.jacobian
# and torch's sparse tensors (no forward mode: `_efficientzerotensor` has no sparse kernel)
# take n reverse passes.
FORWARD_VSM = ("torch", "jax", "jax-bcoo")


def predicted(system: str, case: Case, gflops: float) -> tuple[float, float]:
    """(bytes, seconds a call) a framework's run is expected to need."""
    n, nnz, k = case.n, case.nnz, case.kernel
    out, inp = jacobian_shape(k, n)
    forward = k == "VSM" and system in FORWARD_VSM
    passes = inp if forward else out  # jacfwd: one per input; jacrev: one per output
    jac = out * inp
    if SYSTEMS[system].kind == "dense":
        inputs = n * n if k in SQUARE_KERNELS else n
        # the densified input, the Jacobian, the basis of cotangents (passes x outputs),
        # and one intermediate of the Jacobian's size
        words = inputs + passes * (inp if forward else out) + 2 * jac
        per_pass = {"BATAX": 4 * n * n, "SMMM": 4 * n * n * P, "SMVM": 4 * n * n,
                    "LSQ": 4 * n * n, "LOGREG": 4 * n * n}.get(k, 2 * n)
        return 8.0 * words, passes * per_pass / (gflops * 1e9)
    words = 3 * nnz + passes * (inp if forward else out) + 2 * jac
    per_pass = {"BATAX": 4 * nnz + 2 * n, "SMMM": 4 * nnz * P}.get(k, 4 * nnz + 2 * n)
    if k == "VSM" and not forward:
        per_pass = 2 * n  # each reverse pass densifies the n outputs
    return 8.0 * words, passes * (PASS_OVERHEAD.get(system, 0.0)
                                  + per_pass / SPARSE_SPEED[system])


def skip_reason(system: str, case: Case, budget_gib: float, max_seconds: float,
                max_work: float, interp_work: float, gflops: float) -> str:
    """Why a run is not attempted ("" when it is)."""
    if (system, case.kernel) in UNSUPPORTED:
        return "unsupported: " + UNSUPPORTED[(system, case.kernel)]
    if system in BATAX_ONLY and case.kernel != "BATAX":
        return "only for BATAX (Fig. fig:batax:opt)"
    kind = SYSTEMS[system].kind
    work = KERNELS[case.kernel].work(case.n, case.density)
    if kind == "interpreter" and work > interp_work:
        return f"interpreter at small sizes only: about {work:.1e} entries > {interp_work:.0e}"
    if kind in ("sdqlite", "anchor") and work > max_work:
        return f"about {work:.1e} entries touched > --max-work {max_work:.0e}"
    if kind in ("dense", "sparse"):
        nbytes, secs = predicted(system, case, gflops)
        out, inp = jacobian_shape(case.kernel, case.n)
        if nbytes > budget_gib * GiB:
            return (f"predicted memory {nbytes / GiB:.1f} GiB (dense {out} x {inp} Jacobian"
                    f"{', densified input' if kind == 'dense' else ''}) > budget "
                    f"{budget_gib:g} GiB")
        if secs > max_seconds:
            return f"predicted time: about {secs:.3g} s a call > cap {max_seconds:g} s"
    return ""

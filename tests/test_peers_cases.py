"""The peers harness's cases (benchmarks/peers/cases.py) in the main environment, without
any framework: datasets are reproducible and have the sizes they claim, and a run whose
dense Jacobian cannot fit is marked before it is started."""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.peers.cases import PAPER_MATRICES, SYSTEMS, Case, data_for, skip_reason, sweeps

LIMITS = {"budget_gib": 8.0, "max_seconds": 3.0, "max_work": 6e7, "interp_work": 1e5,
          "gflops": 20.0}


def test_the_harness_needs_no_framework_to_plan_its_cases() -> None:
    cases = sweeps(quick=True, mtx_dir=None)
    assert {c.sweep for c in cases} == {"density", "dimension", "datasets"}
    assert not {"torch", "jax", "tensorflow", "matplotlib"} & set(sys.modules)


def test_table_datasets_have_their_exact_sizes_and_are_reproducible() -> None:
    n, nnz = PAPER_MATRICES["bcspwr10"]
    case = Case("datasets", "table", "SMVM", n, nnz, "bcspwr10")
    a, b = data_for(case), data_for(case)
    assert a["A"].shape == (n, n) and a["A"].nnz == nnz
    assert (a["A"] != b["A"]).nnz == 0 and np.array_equal(a["X"], b["X"])


def test_a_dense_jacobian_over_the_budget_is_marked_before_it_runs() -> None:
    case = Case("dimension", "d", "VVA", 2**20, 2**19)  # a 2^20 x 2^20 identity: 8 TiB
    for system in ("torch", "jax", "tf", "torch-sparse", "jax-bcoo", "tf-sparse"):
        assert skip_reason(system, case, **LIMITS).startswith("predicted memory")
    assert skip_reason("sdqlite-arr", case, **LIMITS) == ""
    assert all(skip_reason(s, Case("density", "d", "VVD", 64, 8), **LIMITS) == ""
               for s in SYSTEMS if s not in ("sdqlite-arr-no-norm", "sdqlite-arr-no-dps"))

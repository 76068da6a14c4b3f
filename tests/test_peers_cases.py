"""The peers harness's cases (benchmarks/peers/cases.py) in the main environment, without
any framework: datasets are reproducible and have the sizes they claim, a run whose
dense Jacobian cannot fit is marked before it is started, and the probe climbs from a
system's largest case by rungs that double what it stores until one cannot complete."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.peers import probe
from benchmarks.peers.cases import (
    PAPER_MATRICES,
    SYSTEMS,
    Case,
    data_for,
    nnz_of,
    skip_reason,
)

ROOT = Path(__file__).resolve().parent.parent
LIMITS = {"budget_gib": 8.0, "max_seconds": 3.0, "max_work": 6e7, "interp_work": 1e5,
          "gflops": 20.0}


def test_the_harness_needs_no_framework_to_plan_its_cases() -> None:
    """In a process of its own: other tests of a run import matplotlib (sdqlite.spy)."""
    check = ("import sys\n"
             "from benchmarks.peers.cases import sweeps\n"
             "cases = sweeps(quick=True, mtx_dir=None)\n"
             "assert {c.sweep for c in cases} == {'density', 'dimension', 'datasets'}\n"
             "loaded = {'torch', 'jax', 'tensorflow', 'matplotlib'} & set(sys.modules)\n"
             "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


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


# -- the probe (benchmarks/peers/probe.py) ----------------------------------------------

def _run(system: str, kernel: str, n: int, got: dict[str, object], sweep: str = "dimension"
         ) -> dict[str, object]:
    case = Case(sweep, probe.panel(kernel), kernel, n,
                nnz_of(kernel, n, 2.0**-probe.DENSITY_EXP[kernel]))
    return {**case.as_dict(), "system": system, **got}


def _linear(case: Case) -> dict[str, object]:
    """A system whose memory and time grow with n: 100 MiB and 1 ms at n = 2^20, on a
    process holding 200 MiB before the case."""
    peak = 100.0 * case.n / 2**20
    return {"status": "ok", "seconds": 1e-3 * case.n / 2**20, "peak_mib": peak,
            "rss_mib": 200.0 + peak}


def test_each_rung_doubles_what_the_system_stores() -> None:
    for kernel in ("BATAX", "SMMM", "SMVM"):  # the entries of the sparse matrix
        n = 2**14
        m = probe.next_n("sdqlite-arr", kernel, n)
        assert 1.98 < nnz_of(kernel, m, 2.0**-10) / nnz_of(kernel, n, 2.0**-10) < 2.02
    for s in ("torch", "jax-bcoo"):  # a framework's dense n x n Jacobian on VVA
        m = probe.next_n(s, "VVA", 2**14)
        assert 1.98 < m * m / 2**28 < 2.02
    assert probe.next_n("sdqlite-arr", "VVD", 2**20) == 2**21  # the sparse vector


def test_the_probe_climbs_from_the_panel_until_a_rung_is_predicted_over_the_budget() -> None:
    runs = [_run("sdqlite-arr", "VVD", 2**e, _linear(Case("", "", "VVD", 2**e, 0)))
            for e in (18, 19, 20)]
    runs.append(_run("sdqlite-arr", "VVD", 2**22, _linear(Case("", "", "VVD", 2**22, 0)),
                     sweep="density"))  # another sweep: not where the climb starts
    seen: list[int] = []

    def run_one(case: Case) -> dict[str, object]:
        seen.append(case.n)
        return _linear(case)

    climbed = probe.climb("sdqlite-arr", "VVD", runs, run_one, budget_gib=1.0,
                          max_seconds=60.0, gflops=20.0)
    # the resident set doubles with the entries: 2^20 held 300 MiB, 2^21 400, 2^22 600;
    # 2^23 is predicted at 2 x 600 = 1200 MiB > 1 GiB
    assert seen == [2**21, 2**22]
    assert [r["status"] for r in climbed] == ["ok", "ok", "skipped"]
    assert climbed[-1]["n"] == 2**23 and str(climbed[-1]["reason"]).startswith(
        "predicted memory 1.2 GiB")
    assert probe.stops(climbed) == {("sdqlite-arr", "VVD"): climbed[-1]}


def test_a_rung_that_fails_ends_the_climb_and_a_framework_stops_at_its_model() -> None:
    start = [_run("scipy", "SMVM", 2**14, _linear(Case("", "", "SMVM", 2**14, 0)))]
    climbed = probe.climb("scipy", "SMVM", start, lambda c: {
        "status": "crashed", "reason": "killed"}, 20.0, 60.0, 20.0)
    assert all(r["status"] == "crashed" for r in climbed)  # bisected down to the next rung
    stop = probe.stops(climbed)[("scipy", "SMVM")]
    assert stop["n"] == probe.next_n("scipy", "SMVM", 2**14) == climbed[-1]["n"]
    # torch densifies VVA's n x n Jacobian: 8 n^2 bytes, twice, pass 2^16 x 2^16 = 32 GiB
    start = [_run("torch", "VVA", 2**14, _linear(Case("", "", "VVA", 2**14, 0)))]
    climbed = probe.climb("torch", "VVA", start, _linear, 20.0, 60.0, 20.0)
    assert climbed[-1]["status"] == "skipped"
    assert str(climbed[-1]["reason"]).startswith("predicted memory")
    def model(n: int) -> float:  # densified input, cotangent basis, Jacobian twice
        return 8.0 * (n + n * n + 2 * n * n)
    assert [r["n"] for r in climbed] == [23170, 32768]
    assert model(23170) <= 20 * 2**30 < model(32768)
    assert probe.climb("torch", "VVD", start, _linear, 20.0, 60.0, 20.0) == []


def test_the_probe_runs_the_highest_rung_predicted_to_fit_and_bisects_a_failure() -> None:
    start = [_run("sdqlite-arr", "VVD", 2**20, _linear(Case("", "", "VVD", 2**20, 0)))]
    seen: list[int] = []

    def run_one(case: Case) -> dict[str, object]:
        seen.append(case.n)
        return _linear(case)

    climbed = probe.climb("sdqlite-arr", "VVD", start, run_one, 4.0, 60.0, 20.0)
    # from 2^20 (300 MiB): 2^23 is predicted at 300 x 8 = 2400 MiB, 2^24 at 4800 > 4 GiB;
    # 2^23 holds 1000 MiB: 2^25 at 4000 fits, 2^26 at 8000 not; 2^25 holds 3400: 2^26, 6800
    assert seen == [2**23, 2**25] and climbed[-1]["n"] == 2**26
    assert probe.stops(climbed)[("sdqlite-arr", "VVD")]["status"] == "skipped"
    seen.clear()

    def crashes_from_2_24(case: Case) -> dict[str, object]:
        seen.append(case.n)
        return {"status": "crashed", "reason": "killed"} if case.n >= 2**24 else _linear(case)

    climbed = probe.climb("sdqlite-arr", "VVD", start, crashes_from_2_24, 100.0, 60.0, 20.0)
    # 2^28 is predicted at 300 x 256 MiB = 75 GiB, 2^29 at 150 GiB: 2^28 is run and fails;
    # then the middle of 2^21 .. 2^27, 2^24, fails; 2^22 completes, then 2^23
    assert seen == [2**28, 2**24, 2**22, 2**23]
    stop = probe.stops(climbed)[("sdqlite-arr", "VVD")]
    assert (stop["n"], stop["status"]) == (2**24, "crashed")


def test_help_works_in_the_main_environment_and_a_run_names_the_peers_one() -> None:
    """``python -m benchmarks.peers --help`` in .venv (no frameworks, no tqdm) prints the
    options; a run there says which environment it needs instead of a traceback."""
    import subprocess

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "benchmarks.peers", *args],
                              capture_output=True, text=True, timeout=120)

    helped = run("--help")
    assert helped.returncode == 0 and "--quick" in helped.stdout
    try:
        import tqdm  # noqa: F401
    except ImportError:  # the main environment: no run here, and it says so
        refused = run("--quick", "--out", "/nonexistent/peers")
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert "make bench-peers" in refused.stderr and ".venv-peers" in refused.stderr

"""The largest problem each system completes on this machine (``--probe``).

The sweeps stop each framework at a modest budget, so that the full run takes half an
hour; the probe then takes every system past it.  For each kernel it climbs one ladder
of sizes at a fixed density (the sparser panel of the dimension sweep for matrix
kernels, the denser for vector kernels), from the largest size of that panel the system
completed in ``peers.json``.  Each rung doubles what the system stores: the entries of a
matrix kernel (n times sqrt 2), a framework's dense Jacobian on a vector kernel (n times
sqrt 2), the entries of the others (n times 2).

A rung is run like a case of the sweeps (checked against sdqlite first, then one warm
call timed) unless it is predicted to need more than the budget (20 GiB of the 24) or
the time cap a call: by the framework's model (``cases.predicted``), and for every
system by its own last rung scaled (its resident set by the entries stored, its time by
the kernel's work).  Rungs predicted to fit are skipped over (the highest is run), and a
rung that fails is bisected.  The climb ends below the first rung predicted not to fit,
or failed, or killed for resident memory over the budget or time over the case timeout;
that rung is reported with the largest rung completed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from benchmarks.kernels import KERNELS
from benchmarks.peers.cases import (
    BATAX_ONLY,
    SQUARE_KERNELS,
    SYSTEMS,
    VECTOR_KERNELS,
    Case,
    GiB,
    nnz_of,
    skip_reason,
)

Run = dict[str, Any]
DENSITY_EXP = {**{k: 10 for k in SQUARE_KERNELS}, **{k: 1 for k in VECTOR_KERNELS}}
TOP = {**{k: 2**20 for k in SQUARE_KERNELS}, **{k: 2**30 for k in VECTOR_KERNELS}}
PROBED = [s for s in SYSTEMS if s not in BATAX_ONLY]


def panel(kernel: str) -> str:
    return f"density=2^-{DENSITY_EXP[kernel]}"


def next_n(system: str, kernel: str, n: int) -> int:
    """The next rung: twice what the system stores."""
    if kernel in SQUARE_KERNELS or SYSTEMS[system].kind in ("dense", "sparse"):
        half = round(2 * math.log2(n)) + 1  # the next of the sizes 2^(k/2)
        return max(n + 1, round(2 ** (half / 2)))
    return 2 * n


def start(runs: list[Run], system: str, kernel: str) -> Run | None:
    """The largest case of the probe's panel of the dimension sweep the system completed."""
    ok = [r for r in runs if r["system"] == system and r["kernel"] == kernel
          and r["sweep"] == "dimension" and r["panel"] == panel(kernel) and r["status"] == "ok"]
    return max(ok, key=lambda r: r["n"], default=None)


def extrapolated(last: Run, case: Case) -> tuple[float, float]:
    """(bytes resident, seconds a call) at ``case``: the last rung's whole resident set
    (the process, its inputs and the call) scaled by the entries stored, its time by the
    kernel's work."""
    work = KERNELS[case.kernel].work
    before = Case("", "", last["kernel"], last["n"], last["nnz"])
    stored = (case.nnz + case.n) / (before.nnz + before.n)
    return (last["rss_mib"] * stored * 2.0**20,
            last["seconds"] * work(case.n, case.density) / work(before.n, before.density))


def why_not(system: str, case: Case, last: Run, budget_gib: float, max_seconds: float,
            gflops: float) -> str:
    """Why a rung is not attempted ("" when it is)."""
    if case.n > TOP[case.kernel]:
        return f"the probe's ladder ends at n = {TOP[case.kernel]:,}"
    why = skip_reason(system, case, budget_gib, max_seconds, math.inf, math.inf, gflops)
    if why:
        return why
    nbytes, secs = extrapolated(last, case)
    if nbytes > budget_gib * GiB:
        return (f"predicted memory {nbytes / GiB:.1f} GiB (n = {last['n']:,}'s "
                f"{last['rss_mib']:,.0f} MiB resident scaled by the entries) > budget "
                f"{budget_gib:g} GiB")
    if secs > max_seconds:
        return (f"predicted time: about {secs:.3g} s a call (n = {last['n']:,}'s "
                f"{last['seconds']:.3g} s scaled by the work) > cap {max_seconds:g} s")
    return ""


def climb(system: str, kernel: str, runs: list[Run], run_one: Callable[[Case], Run],
          budget_gib: float, max_seconds: float, gflops: float) -> list[Run]:
    """Every rung attempted above the system's largest case of the panel, and the rung
    predicted not to fit that ended the climb.  Rungs are skipped over where the
    predictions allow: from the largest rung completed it runs the highest rung predicted
    to fit; after a rung fails, the middle one of those below it (a bisection)."""
    last = start(runs, system, kernel)
    if last is None:
        return []
    out: list[Run] = []
    e = DENSITY_EXP[kernel]
    ceiling = math.inf  # the smallest rung that failed
    while True:
        fits: list[Case] = []
        n = next_n(system, kernel, last["n"])
        while n < ceiling:
            case = Case("probe", panel(kernel), kernel, n, nnz_of(kernel, n, 2.0**-e))
            why = why_not(system, case, last, budget_gib, max_seconds, gflops)
            if why:
                if not fits:  # the very next rung: the climb ends here
                    out.append({**case.as_dict(), "system": system, "status": "skipped",
                                "reason": why})
                break
            fits.append(case)
            n = next_n(system, kernel, n)
        if not fits:
            return out
        target = fits[-1] if ceiling == math.inf else fits[len(fits) // 2]
        rec = {**target.as_dict(), "system": system, **run_one(target)}
        out.append(rec)
        if rec["status"] == "ok":
            last = rec
        else:
            ceiling = target.n


def stops(probe: list[Run]) -> dict[tuple[str, str], Run]:
    """Per (system, kernel), what ended its climb: the smallest rung not completed above
    the largest completed."""
    out: dict[tuple[str, str], Run] = {}
    for key in {(r["system"], r["kernel"]) for r in probe}:
        mine = [r for r in probe if (r["system"], r["kernel"]) == key]
        top = max((r["n"] for r in mine if r["status"] == "ok"), default=0)
        out[key] = min((r for r in mine if r["status"] != "ok" and r["n"] > top),
                       key=lambda r: r["n"])
    return out

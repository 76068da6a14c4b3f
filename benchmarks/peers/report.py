"""The figures, ``summary.md`` and the README's table, from the runs of ``__main__``.

Figures follow the paper's layout: log-scale time against density (Figs.
fig:matrixkernels:sp, fig:vectorkernels:sp) or dimension (fig:matrixkernels:dim,
fig:vectorkernels:dim), one row per panel of the sweep, one column per kernel, one line
per system; the datasets of Table tbl:datasets (fig:e2e:exp); and BATAX's optimizations
(fig:batax:opt).  A point a system did not produce is an ``x`` at the foot of its
panel, in the system's colour; the reasons are in the summary.
"""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import re
import subprocess
from collections import defaultdict
from collections.abc import Iterable
from importlib import metadata as md
from pathlib import Path
from typing import Any

from benchmarks.kernels import machine
from benchmarks.peers.cases import (
    BATAX_ONLY,
    FRAMEWORKS,
    KERNEL_ORDER,
    LOSS_KERNELS,
    MATRIX_KERNELS,
    SQUARE_KERNELS,
    SYSTEMS,
    VECTOR_KERNELS,
)

Run = dict[str, Any]
MAIN = [s for s in SYSTEMS if s not in BATAX_ONLY]
BEGIN, END = "<!-- peers: begin (written by python -m benchmarks.peers) -->", "<!-- peers: end -->"
FIGURES = {  # file: (sweep, kernels, systems, x axis, caption)
    "matrixkernels_sp": ("density", MATRIX_KERNELS, MAIN, "density",
                         "Fig. fig:matrixkernels:sp: matrix kernels, varying density"),
    "matrixkernels_dim": ("dimension", MATRIX_KERNELS, MAIN, "n",
                          "Fig. fig:matrixkernels:dim: matrix kernels, varying dimension"),
    "vectorkernels_sp": ("density", VECTOR_KERNELS, MAIN, "density",
                         "Fig. fig:vectorkernels:sp: vector kernels, varying density"),
    "vectorkernels_dim": ("dimension", VECTOR_KERNELS, MAIN, "n",
                          "Fig. fig:vectorkernels:dim: vector kernels, varying dimension"),
    "losskernels_sp": ("density", LOSS_KERNELS, MAIN, "density",
                       "least squares and logistic regression's loss, varying density"),
    "losskernels_dim": ("dimension", LOSS_KERNELS, MAIN, "n",
                        "least squares and logistic regression's loss, varying dimension"),
    "e2e": ("datasets", SQUARE_KERNELS, MAIN, "dataset",
            "Fig. fig:e2e:exp: the sizes of Table tbl:datasets (synthetic) and real .mtx"),
    "batax_opt": ("density dimension", ("BATAX",),
                  ["sdqlite-dict", "sdqlite-arr", *BATAX_ONLY, "scipy"], "",
                  "Fig. fig:batax:opt: BATAX without normalization or DPS"),
}


def metadata(args: argparse.Namespace, began: float, load: tuple[float, ...],
             seconds: float) -> dict[str, Any]:
    def version(pkg: str) -> str:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return "not installed"

    gxx = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout
    return {
        "date": datetime.datetime.fromtimestamp(began).strftime("%Y-%m-%d %H:%M"),
        "mode": "quick" if args.quick else "full", "minutes": round(seconds / 60, 1),
        "machine": machine(), "memory_gib": _memory_gib(), "os": platform.platform(),
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in __import__("os").getloadavg()],
        "versions": {p: version(p) for p in ("sdqlite", "numpy", "scipy", "torch", "jax",
                                             "jaxlib", "tensorflow-cpu", "matplotlib")}
        | {"g++": gxx.splitlines()[0] if gxx else "?"},
        "settings": {"budget_gib": args.budget_gib, "max_seconds": args.max_seconds,
                     "gflops": args.gflops, "max_work": args.max_work,
                     "interp_work": args.interp_work, "case_timeout": args.case_timeout},
    }


def _memory_gib() -> float:
    with open("/proc/meminfo") as f:
        return round(int(f.readline().split()[1]) / 2**20, 1)


# -- figures -------------------------------------------------------------------------

def x_of(run: Run, axis: str) -> Any:
    return {"density": run["nnz"] / (run["n"] ** 2 if run["kernel"] in SQUARE_KERNELS
                                     else run["n"]),
            "n": run["n"], "dataset": run["dataset"]}[axis]


def figures(runs: list[Run], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    colors = {"sdqlite-dict": "#1f77b4", "sdqlite-arr": "#08306b", "sdqlite-arr-no-norm":
              "#6baed6", "sdqlite-arr-no-dps": "#9ecae1", "interpreter": "#7f7f7f",
              "scipy": "#000000", "torch": "#d62728", "torch-sparse": "#ff7f0e",
              "jax": "#9467bd", "jax-bcoo": "#c5b0d5", "tf": "#2ca02c", "tf-sparse": "#98df8a"}
    markers = dict(zip(SYSTEMS, "os^vD<>pP*hX", strict=False))
    styles = {s: "--" if SYSTEMS[s].kind == "sparse" else ":" if s == "scipy" else "-"
              for s in SYSTEMS}
    written = []
    for name, (sweeps, kernels, systems, axis, caption) in FIGURES.items():
        chosen = [r for r in runs if r["sweep"] in sweeps.split() and r["kernel"] in kernels]
        panels = list(dict.fromkeys((r["sweep"], r["panel"]) for r in chosen))
        if not panels:
            continue
        # one row per panel, one column per kernel; a single kernel's panels side by side
        rows, cols = (1, len(panels)) if len(kernels) == 1 else (len(panels), len(kernels))
        fig, grid = plt.subplots(rows, cols, squeeze=False, layout="constrained",
                                 figsize=(4.0 * cols + 3.2, max(5.0, 3.0 * rows + 1.2)))
        axes = grid.reshape(len(panels), len(kernels))
        for row, (sweep, panel) in enumerate(panels):
            for col, kernel in enumerate(kernels):
                ax = axes[row][col]
                ax_axis = axis or ("density" if sweep == "density" else "n")
                here = [r for r in chosen if (r["sweep"], r["panel"], r["kernel"])
                        == (sweep, panel, kernel)]
                xs = [x_of(r, ax_axis) for r in sorted(here, key=lambda r: (r["n"], r["nnz"]))]
                xs = list(dict.fromkeys(xs))  # datasets in the order of their size
                if ax_axis == "dataset":
                    order = {x: i for i, x in enumerate(xs)}
                foot = blended_transform_factory(ax.transData, ax.transAxes)
                for s in systems:
                    mine = {x_of(r, ax_axis): r for r in here if r["system"] == s}
                    if not mine:
                        continue
                    def pos(x: Any) -> Any:
                        return order[x] if ax_axis == "dataset" else x  # noqa: B023
                    ok = sorted((pos(x), r["seconds"]) for x, r in mine.items()
                                if r["status"] == "ok")
                    ax.plot([p for p, _ in ok], [t for _, t in ok], marker=markers[s],
                            color=colors[s], label=SYSTEMS[s].label, ms=4, lw=1.2, ls=styles[s])
                    missing = [pos(x) for x, r in mine.items() if r["status"] != "ok"]
                    foot_y = 0.03 + 0.03 * systems.index(s)  # stacked: one row per system
                    ax.plot(missing, [foot_y] * len(missing), ls="", marker="x", ms=4,
                            color=colors[s], transform=foot)
                ax.set_yscale("log")
                if ax_axis == "dataset":
                    ax.set_xticks(range(len(xs)), xs, rotation=45, fontsize=7)
                else:
                    ax.set_xscale("log", base=2)
                    if ax_axis == "density":
                        ax.invert_xaxis()
                ax.set_title(f"{kernel} ({panel})", fontsize=9)
                ax.set_xlabel({"density": "density", "n": "dimension n",
                               "dataset": ""}[ax_axis], fontsize=8)
                ax.set_ylabel("time (s)", fontsize=8)
                ax.tick_params(labelsize=7)
                ax.grid(True, which="major", alpha=0.3)
        handles, labels = [], []
        for ax in axes.flat:
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        fig.legend(handles, labels, loc="outside right center", fontsize=8, frameon=False)
        fig.suptitle(caption + " (x near a panel's foot: not run; reasons in summary.md)",
                     fontsize=10)
        fig.savefig(out / f"{name}.png", dpi=110)
        plt.close(fig)
        written.append(name)
    return written


# -- tables --------------------------------------------------------------------------

def seconds(t: float) -> str:
    return (f"{t * 1e6:.0f} µs" if t < 1e-3 else f"{t * 1e3:.1f} ms" if t < 1
            else f"{t:.2f} s")


def size(r: Run) -> str:
    what = r["dataset"] or f"n = {r['n']:,}"
    return f"{what} ({r['nnz']:,} entries)"


def by_case(runs: Iterable[Run]) -> dict[tuple[str, ...], dict[str, Run]]:
    cases: dict[tuple[str, ...], dict[str, Run]] = defaultdict(dict)
    for r in runs:
        cases[(r["sweep"], r["panel"], r["kernel"], r["dataset"], str(r["n"]),
               str(r["nnz"]))][r["system"]] = r
    return cases


def headline(runs: list[Run]) -> list[str]:
    """Per kernel, at the largest case of the paper's sizes that a framework completes:
    the best framework's time as a ratio to sdqlite "arr" and to scipy."""
    rows = ["| kernel | case | scipy | ∇SD arr | ∇SD dict | best framework | "
            "framework / arr | framework / scipy |", "|---|---|---|---|---|---|---|---|"]
    cases = by_case(runs)
    for kernel in KERNEL_ORDER:
        def complete(c: dict[str, Run]) -> bool:
            return all(c.get(s, {}).get("status") == "ok" for s in ("scipy", "sdqlite-arr"))

        def fw_ok(c: dict[str, Run]) -> list[Run]:
            return [c[s] for s in FRAMEWORKS if c.get(s, {}).get("status") == "ok"]

        mine = [(k, c) for k, c in cases.items() if k[2] == kernel and complete(c)]
        paper = [(k, c) for k, c in mine if k[0] == ("datasets" if kernel in SQUARE_KERNELS
                                                     else "dimension")]
        for pool in (paper, mine):
            pool = [(k, c) for k, c in pool if fw_ok(c)]
            if pool:
                _, c = max(pool, key=lambda kc: (int(kc[0][4]), int(kc[0][5])))
                best = min(fw_ok(c), key=lambda r: r["seconds"])
                arr, sci = c["sdqlite-arr"]["seconds"], c["scipy"]["seconds"]
                d = c.get("sdqlite-dict", {})
                rows.append(
                    f"| {kernel} | {size(best)} | {seconds(sci)} | {seconds(arr)} | "
                    f"{seconds(d['seconds']) if d.get('status') == 'ok' else '—'} | "
                    f"{SYSTEMS[best['system']].label}: {seconds(best['seconds'])} | "
                    f"{best['seconds'] / arr:.3g}× | {best['seconds'] / sci:.3g}× |")
                break
        else:
            rows.append(f"| {kernel} | no case where a framework completes | | | | | | |")
    return rows


def largest(runs: list[Run], systems: Iterable[str]) -> list[str]:
    """The largest problem (by n, then entries) each system completed, per kernel, over the
    sweeps and the probe's rungs."""
    kernels = KERNEL_ORDER
    rows = ["| system | " + " | ".join(kernels) + " |", "|---" * (len(kernels) + 1) + "|"]
    for s in systems:
        cells = []
        for k in kernels:
            ok = [r for r in runs if r["system"] == s and r["kernel"] == k
                  and r["status"] == "ok"]
            if not ok:
                cells.append("—")
                continue
            r = max(ok, key=lambda r: (r["n"], r["nnz"]))
            cells.append(f"n = {r['n']:,}, {r['nnz']:,} entries, {r['peak_mib']:,.0f} MiB")
        rows.append(f"| {SYSTEMS[s].label} | " + " | ".join(cells) + " |")
    return rows


def stops_table(probe: dict[str, Any], systems: Iterable[str]) -> list[str]:
    """Per system and kernel, the probe's rung that ended the climb, and why."""
    from benchmarks.peers.probe import stops

    kernels = KERNEL_ORDER
    ended = stops(probe["runs"])
    probed = {tuple(sk) for sk in probe["meta"].get("probed", [])}
    rows = ["| system | " + " | ".join(kernels) + " |", "|---" * (len(kernels) + 1) + "|"]
    for s in systems:
        cells = []
        for k in kernels:
            r = ended.get((s, k))
            if r is None:
                cells.append("no case of the panel completed" if (s, k) in probed else "—")
                continue
            why = re.sub(r" \([^)]*\)", "", r.get("reason", ""))  # the sizes are in the row
            status = "" if r["status"] == "skipped" else f"{r['status']}: "
            cells.append(f"n = {r['n']:,} ({r['nnz']:,} entries): {status}{why}")
        rows.append(f"| {SYSTEMS[s].label} | " + " | ".join(cells) + " |")
    return rows


def probe_text(probe: dict[str, Any] | None, runs: list[Run], st: dict[str, Any]) -> list[str]:
    """The section on the largest problems: from the probe when there is one."""
    from benchmarks.peers.probe import DENSITY_EXP, PROBED

    broken = [r for r in runs if r["status"] in ("failed", "crashed", "timeout")]
    if probe is None:
        return [
            f"Over every sweep, with its peak memory, within this run's limits "
            f"({st['budget_gib']:g} GiB predicted for a framework, {st['max_seconds']:g} s a "
            f"call, {st['max_work']:.0e} entries for sdqlite and scipy): larger cases were "
            f"predicted over them and not attempted (next section); {len(broken)} attempted "
            "runs failed, crashed or timed out. `--probe` (run by `make bench-peers` after "
            "the sweeps) takes each system to its limit on this machine.", "",
            *largest(runs, SYSTEMS)]
    m, climbed = probe["meta"], probe["runs"]
    ok = [r for r in climbed if r["status"] == "ok"]
    exps = sorted(set(DENSITY_EXP.values()), reverse=True)
    return [
        f"Over every sweep and the probe (`python -m benchmarks.peers --probe`, "
        f"{m['date']}, {m['minutes']} min, load average {m['load_before'][0]} at the start): "
        "from its largest case of the dimension sweep (matrix kernels at density "
        f"2^-{exps[0]}, vector kernels at 2^-{exps[1]}), each system climbed by rungs that "
        "double what it stores, each rung checked against sdqlite first, until a rung was "
        f"predicted over {m['budget_gib']:g} GiB resident (of the machine's "
        f"{_memory_gib()}) or {m['max_seconds']:g} s a call, or failed, or was killed over "
        f"{m['budget_gib']:g} GiB resident or {m['case_timeout']:g} s. "
        f"{len(ok)} rungs completed above the sweeps; the probe's times are of one warm "
        "call. The peak memory is the growth during the case (above what the process held "
        "before). A rung's watchdog and timeout cover the whole case: making its data and "
        "sdqlite's reference result as well as the system's calls, so above the sizes "
        "sdqlite completes, a system's climb is bounded by that check too.", "",
        *largest(runs + ok, SYSTEMS), "",
        "What ended each system's climb (the first rung not completed):", "",
        *stops_table(probe, PROBED)]


SHORT = {"ok": "", "skipped": "skip", "failed": "fail", "wrong": "WRONG",
         "timeout": "timeout", "crashed": "crash"}


def sweep_tables(runs: list[Run]) -> list[str]:
    """Every run: one table per sweep panel and kernel, times or what happened instead."""
    out: list[str] = []
    present = [s for s in SYSTEMS if any(r["system"] == s for r in runs)]
    groups: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for r in runs:
        groups[(r["sweep"], r["panel"], r["kernel"])].append(r)
    for (sweep, panel, kernel), rs in groups.items():
        out += ["", f"**{kernel}**, {sweep} sweep, {panel} (median s; first call s; peak MiB)",
                "", "| case | " + " | ".join(present) + " |", "|---" * (len(present) + 1) + "|"]
        for key, c in by_case(rs).items():
            r0 = next(iter(c.values()))
            d = x_of(r0, "density")
            label = r0["dataset"] or f"n={r0['n']}, d={f'2^{math.log2(d):.1f}' if d else 0}"
            cells = []
            for s in present:
                run = c.get(s)
                if run is None:
                    cells.append("")
                elif run["status"] == "ok":
                    cells.append(f"{run['seconds']:.3g}; {run['first_s']:.2g}; "
                                 f"{run['peak_mib']:.0f}")
                else:
                    cells.append(SHORT[run["status"]])
            out.append(f"| {label} ({key[5]} nnz) | " + " | ".join(cells) + " |")
    return out


def reasons(runs: list[Run]) -> list[str]:
    """Why runs did not produce a point: each distinct reason once, with a count."""
    seen: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for r in runs:
        if r["status"] != "ok":
            why = r.get("reason", "")
            kind = re.sub(r"\d[\d.,e+]*", "#", why.split(" > ")[0])  # sizes vary, not why
            seen[(r["system"], r["status"], kind)].append(r)
    out = []
    for (s, status, _), rs in sorted(seen.items()):
        big = max(rs, key=lambda r: (r["n"], r["nnz"]))
        kernels = ", ".join(sorted({r["kernel"] for r in rs}))
        out.append(f"- {s}, {status}, {len(rs)} run{'s' if len(rs) > 1 else ''} of {kernels} "
                   f"(the largest: {big['kernel']} at {size(big)}): {big.get('reason', '')}")
    return out


def write(runs: list[Run], meta: dict[str, Any], out: Path, readme_root: Path | None,
          probe: dict[str, Any] | None) -> None:
    drawn = figures(runs, out)
    v = meta["versions"]
    load = meta["load_before"][0], meta["load_after"][0]
    wrong = [r for r in runs + (probe["runs"] if probe else []) if r["status"] == "wrong"]
    st = meta["settings"]
    text = [
        "# sdqlite against PyTorch, JAX, TensorFlow and scipy (§7)", "",
        f"Written by `python -m benchmarks.peers{' --quick' if meta['mode'] == 'quick' else ''}`"
        f" on {meta['date']} ({meta['mode']} mode, {meta['minutes']} min).", "",
        f"- Machine: {meta['machine']}, {meta['memory_gib']} GiB, {meta['os']}.",
        f"- Load average {load[0]} at the start and {load[1]} at the end, on 2 cores"
        + (": above 1 (the harness's own processes count, and any other on the machine), "
           "so times are noisy; compare systems within a case rather than across runs."
           if max(load) > 1 else "."),
        "- Versions: " + ", ".join(f"{k} {x}" for k, x in v.items()) + ".",
        "- One thread everywhere (`OMP_NUM_THREADS=1`, `torch.set_num_threads(1)`, XLA "
        "`--xla_cpu_multi_thread_eigen=false`, TensorFlow intra/inter-op 1). A time is the "
        "median of 5 warm calls; the first call (tracing, XLA or g++ compilation, cached "
        "builds reused) is reported apart. sdqlite's calls include reading the scipy/numpy "
        "inputs and building the result; the frameworks' start from their own tensors and "
        "include returning the Jacobian as a numpy array.",
        "- Peak memory: the worker process's peak resident set during the case above its "
        "resident set before it (VmHWM, reset per case through /proc/self/clear_refs); it "
        "includes allocator caches the framework keeps.",
        f"- Every run was checked against sdqlite's \"arr\" gradient (\"arr\" against the "
        f"scipy formula) before it was timed: {len(wrong)} disagreed"
        + (": " + "; ".join(f"{r['system']} {r['kernel']} n={r['n']}" for r in wrong)
        if wrong else "") + ".",
        f"- Runs not attempted were predicted from sizes: a framework's dense Jacobian, "
        f"densified input and cotangent basis over {st['budget_gib']:g} GiB, or more than "
        f"{st['max_seconds']:g} s a call (dense work at {st['gflops']:g} GFLOP/s; sparse "
        "products and Python loops at speeds measured once, `cases.py`); sdqlite and scipy "
        f"over {st['max_work']:.0e} entries touched; the interpreter over "
        f"{st['interp_work']:.0e}. A run over {st['case_timeout']:g} s is stopped.",
        "- The seven matrices of Table tbl:datasets cannot be downloaded here: the "
        "`datasets` cases are uniform random matrices with their exact dimensions and entry "
        "counts. Real matrices: the Matrix Market files that Debian's r-cran-matrix ships "
        "(fetched by `make bench-peers` with `apt-get download`; the `real (.mtx)` panel).",
        "- Skipped on purpose: `torch.compile` (not attempted: a compilation per shape would "
        "dominate the sweeps), so PyTorch runs eager, as in the paper; TensorFlow's sparse "
        "runs use `tf.function` without XLA (XLA_CPU_JIT has no `SparseTensorDenseMatMul` "
        "kernel: `jit_compile=True` fails). "
        "JAX runs under `jax.jit` (dense and BCOO), dense TensorFlow under XLA.",
        "", "## Headline: the best framework against ∇SD (arr) and scipy", "",
        "At the largest case of the paper's sizes (Table tbl:datasets for matrix kernels, "
        "the dimension sweep for vector kernels) where a framework completes; a ratio above 1 "
        "means the framework is slower.", "", *headline(runs),
        "", f"## The largest problem each system completes ({meta['memory_gib']} GiB machine)",
        "", *probe_text(probe, runs, st),
        "", "## Figures", "", *[f"![{n}]({n}.png)" for n in drawn],
        "", "## Why points are missing", "", *reasons(runs),
        "", "## Every run", *sweep_tables(runs + (probe["runs"] if probe else [])), ""]
    (out / "summary.md").write_text("\n".join(text), encoding="utf-8")
    if readme_root is not None:
        readme(readme_root, meta, runs, probe)


def readme(root: Path, meta: dict[str, Any], runs: list[Run], probe: dict[str, Any] | None
           ) -> None:
    """Replace the README's text between the peers markers."""
    path = root / "README.md"
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return
    body = [
        f"Last run: {meta['date']}, {meta['mode']} mode ({meta['minutes']} min), "
        f"{meta['machine']}; load average {meta['load_before'][0]} at the start, "
        f"{meta['load_after'][0]} at the end"
        + (" (above 1 on 2 cores: times are noisy)"
           if max(meta["load_before"][0], meta["load_after"][0]) > 1 else "")
        + ". Every run, why points are missing, and all figures: "
        "`benchmarks/results/summary.md`.",
        "", "The best framework at the largest case of the paper's sizes it completes (a "
        "ratio above 1: the framework is slower):", "", *headline(runs), "",
        *(["The largest problem each system completed on this machine (the probe: rungs "
           f"that double what it stores, up to {probe['meta']['budget_gib']:g} GiB resident "
           f"and {probe['meta']['max_seconds']:g} s a call; what ended each climb is in the "
           "summary):", "",
           *largest(runs + [r for r in probe["runs"] if r["status"] == "ok"],
                    ["sdqlite-arr", "scipy", *FRAMEWORKS])] if probe else
          [f"The largest problem each system completed within this run's limits "
           f"({meta['settings']['budget_gib']:g} GiB predicted for a framework, "
           f"{meta['settings']['max_seconds']:g} s a call; no probe run):", "",
           *largest(runs, ["sdqlite-arr", "scipy", *FRAMEWORKS])]), "",
        "![matrix kernels, varying density](benchmarks/results/matrixkernels_sp.png)"]
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(head + BEGIN + "\n" + "\n".join(body) + "\n" + END + tail,
                    encoding="utf-8")

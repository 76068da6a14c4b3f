"""The compiled gradients of §7's kernels against the numpy/scipy formula, side by side.

For each kernel (BATAX, SMMM, SMVM: matrix kernels; VVA, VVD, VSM: vector kernels; and
least squares and logistic regression's loss, LSQ and LOGREG), the gradient w.r.t. its
dense variable as §7 defines it, compiled four ways:

  dict         every input as it is, hash maps for sparse data, and a hash-map result
               (the paper's "∇SD (dict)")
  arr          sparse inputs in their storage format (CSR matrices, COO vectors), and the
               result's outer layer an array where its size is known ("∇SD (arr)")
  arr-no-norm  arr without multiplication normalization    (Fig. fig:batax:opt)
  arr-no-dps   arr without destination-passing style         (Fig. fig:batax:opt)
  arr-2t       arr with threads=2: the outer loops in two chunks on two threads

and the hand-written numpy/scipy formula for the same gradient.  Each system's result
is checked against the formula first; then its calls take turns with the formula's
(``alternating``: the median of ``--repeat`` rounds of about 2 ms each, conversion of
inputs and outputs included), and it is printed as a ratio to the formula.  The column
"arr C++" is the arr kernel alone, called from C in a loop (``kernel_timer.cpp``) on
buffers prepared beforehand: the rest of a call is the front door's work.  The last
column is how far one arr call and one formula call raise the process's peak resident
set (MiB, ``peak``: the result and the allocator's caches included).
Compilation (the pipeline, then g++) is reported apart.
Cases whose work would exceed ``--max-work`` are skipped, with the reason.

Run: ``make bench`` (``python -m benchmarks.kernels --readme``: the whole output is kept
in ``benchmarks/kernels-results.txt`` and the README's table of "How fast" is written from
it; ``--quick`` for a short sweep, which writes neither).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import math
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

import sdqlite
from codegen import fast
from codegen.api import Compiled
from codegen.build import build
from codegen.native import Status
from codegen.results import allocate

Data = dict[str, Any]

MAT = "{int[m] -> {int[n] -> real}}"
SVEC, DVEC = "{int[n] -> real}", "{dense_int[n] -> real}"
P = 16  # the columns of SMMM's dense factor B (n x P)


@dataclass(frozen=True)
class KernelSpec:
    source: str
    wrt: str
    sparse: str  # the input stored in a format: CSR for a matrix, COO for a vector
    data: Callable[[int, float, np.random.Generator], Data]
    formula: Callable[[Data], Any]  # the gradient by numpy/scipy
    work: Callable[[int, float], float]  # about how many entries the gradient touches


def _matrix(n: int, d: float, rng: np.random.Generator) -> Any:
    return sp.random(n, n, density=d, format="csr", random_state=rng,
                     data_rvs=lambda k: rng.uniform(-2, 2, k))


def _vector(n: int, d: float, rng: np.random.Generator) -> Any:
    nnz = max(0, round(n * d))
    keys = np.sort(rng.choice(n, size=nnz, replace=False))
    return sp.coo_array((rng.uniform(-2, 2, nnz), (keys,)), shape=(n,))


KERNELS: dict[str, KernelSpec] = {
    # f(j) = sum_{i,k} beta A(i,j) A(i,k) X(k):  df/dX = beta A^T A
    "BATAX": KernelSpec(
        f"A : {MAT}\nbeta : real\nX : {DVEC}\n"
        "sum(<i, r> in A) sum(<j, v1> in r) sum(<k, v2> in r) { j -> ((beta * v1) * v2) * X(k) }",
        "X", "A",
        lambda n, d, rng: {"A": _matrix(n, d, rng), "beta": 0.9, "X": rng.uniform(-1, 1, n)},
        lambda x: x["beta"] * (x["A"].T @ x["A"]),
        lambda n, d: n * (d * n) ** 2 + d * n * n),
    # f = sum_{i,k,j} A(i,k) B(k,j):  df/dB(k,j) = sum_i A(i,k), B a dense n x P matrix
    "SMMM": KernelSpec(
        f"A : {MAT}\nB : {{dense_int[n] -> {{dense_int[p] -> real}}}}\n"
        "sum(<i, r> in A) sum(<k, a> in r) sum(<j, b> in B(k)) a * b",
        "B", "A",
        lambda n, d, rng: {"A": _matrix(n, d, rng), "B": rng.uniform(-1, 1, (n, P))},
        lambda x: sp.csr_array(np.repeat(np.asarray(x["A"].sum(axis=0)).reshape(-1, 1), P,
                                         axis=1)),
        lambda n, d: d * n * n * P + n * P),
    # f = sum_{i,j} A(i,j) X(j):  df/dX = the column sums of A
    "SMVM": KernelSpec(
        f"A : {MAT}\nX : {DVEC}\nsum(<i, r> in A) sum(<j, a> in r) a * X(j)",
        "X", "A",
        lambda n, d, rng: {"A": _matrix(n, d, rng), "X": rng.uniform(-1, 1, n)},
        lambda x: np.asarray(x["A"].sum(axis=0)).ravel(),
        lambda n, d: d * n * n + n),
    # f(i) = V1(i) + V2(i):  df/dV1 = the identity
    "VVA": KernelSpec(
        f"V1 : {DVEC}\nV2 : {SVEC}\n(sum(<i, a> in V1) {{ i -> a }}) + V2",
        "V1", "V2",
        lambda n, d, rng: {"V1": rng.uniform(-1, 1, n), "V2": _vector(n, d, rng)},
        lambda x: sp.identity(len(x["V1"]), format="csr"),
        lambda n, d: n),
    # f = sum_i V1(i) V2(i):  df/dV1 = V2
    "VVD": KernelSpec(
        f"V1 : {DVEC}\nV2 : {SVEC}\nsum(<i, a> in V2) V1(i) * a",
        "V1", "V2",
        lambda n, d, rng: {"V1": rng.uniform(-1, 1, n), "V2": _vector(n, d, rng)},
        lambda x: x["V2"].toarray(),
        lambda n, d: n),
    # f(i) = V(i) s s:  df/ds = 2 s V
    "VSM": KernelSpec(
        f"s : real\nV : {SVEC}\nsum(<i, a> in V) {{ i -> a * s * s }}",
        "s", "V",
        lambda n, d, rng: {"s": 1.5, "V": _vector(n, d, rng)},
        lambda x: (2 * x["s"] * x["V"]).toarray(),
        lambda n, d: n),
    # least squares, written the natural way (iterating b):  df/dx = 2 A^T (A x - b)
    "LSQ": KernelSpec(
        f"A : {MAT}\nb : {{int[m] -> real}}\nx : {DVEC}\n"
        "sum(<i, bi> in b) let r = (sum(<j, a> in A(i)) a * x(j)) - bi in r * r",
        "x", "A",
        lambda n, d, rng: {"A": _matrix(n, d, rng), "b": rng.uniform(0.5, 1.5, n),
                           "x": rng.uniform(-1, 1, n)},
        lambda x: 2 * x["A"].T @ (x["A"] @ x["x"] - x["b"]),
        lambda n, d: 2 * d * n * n + n),
    # logistic regression's loss, labels b = ±1:  df/dx = A^T (-b σ(-b A x))
    "LOGREG": KernelSpec(
        f"A : {MAT}\nb : {{int[m] -> real}}\nx : {DVEC}\n"
        "sum(<i, bi> in b) log(1.0 + exp(-1.0 * bi * (sum(<j, a> in A(i)) a * x(j))))",
        "x", "A",
        lambda n, d, rng: {"A": _matrix(n, d, rng), "b": rng.choice([-1.0, 1.0], n),
                           "x": rng.uniform(-1, 1, n)},
        lambda x: x["A"].T @ (-x["b"] / (1.0 + np.exp(x["b"] * (x["A"] @ x["x"])))),
        lambda n, d: 2 * d * n * n + n),
}

#: the paper's kernels (§7); LSQ and LOGREG are ours
SECTION_7 = ("BATAX", "SMMM", "SMVM", "VVA", "VVD", "VSM")
SYSTEMS = ("dict", "arr", "arr-no-norm", "arr-no-dps", "arr-2t")
ROOT = Path(__file__).resolve().parent.parent
#: the README's lines between these two are written by --readme
BEGIN = "<!-- the table below is written by make bench (benchmarks/kernels.py --readme) -->"
END = "<!-- end of the table make bench writes -->"
NAMES = {"BATAX": "BATAX, β AᵀA", "SMMM": "SMMM, B an n × 16 dense matrix",
         "SMVM": "SMVM, the column sums of A", "VVA": "VVA, the identity", "VVD": "VVD, V2",
         "VSM": "VSM, 2 s V", "LSQ": "least squares, 2 Aᵀ(Ax − b)",
         "LOGREG": "logistic regression's loss"}
printed: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    printed.append(line)


@dataclass(frozen=True)
class Row:
    n: int
    density: float
    nnz: int
    scipy: float  # seconds
    ratios: dict[str, float]  # by system, and "arr C++"
    peaks: tuple[float, float] = (math.nan, math.nan)  # MiB: arr's call, the formula's


def compiled(k: KernelSpec, system: str) -> Compiled:
    fmt = "dict" if system == "dict" else ("csr" if k.sparse == "A" else "coo")
    return sdqlite.compile(k.source, wrt=k.wrt, formats={k.sparse: fmt},
                           normalize=system != "arr-no-norm", dps=system != "arr-no-dps",
                           name=f"{system.replace('-', '_')}",
                           destination="dict" if system == "dict" else "dense",
                           threads=2 if system == "arr-2t" else 1)


def agree(got: Any, want: Any) -> bool:
    diff = got - want
    scale = max(1.0, float(abs(want).max())) if np.prod(np.shape(want)) else 1.0
    return bool(np.prod(np.shape(want)) == 0 or abs(diff).max() <= 1e-9 * scale)


def timed(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def commit() -> str:
    """The commit measured (with "+" when the tree has changes), or "unknown"."""
    import subprocess

    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="n = 10^3, 10^4 only")
    ap.add_argument("--kernels", nargs="*", default=list(KERNELS), choices=list(KERNELS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-work", type=float, default=3e7,
                    help="skip cases touching more entries than this (default %(default)g)")
    ap.add_argument("--cop20k", action="store_true", default=None,
                    help="also BATAX at the size of cop20k_A (default: on unless --quick)")
    ap.add_argument("--readme", action="store_true",
                    help="keep the output in benchmarks/kernels-results.txt and write the "
                    "README's table from it (a whole sweep of every kernel only)")
    args = ap.parse_args(argv)
    if args.readme and (args.quick or args.kernels != list(KERNELS)):
        ap.error("--readme writes the figures of a whole sweep: not with --quick or --kernels")
    sizes = [10**3, 10**4] if args.quick else [10**3, 10**4, 10**5]
    densities = [1e-4, 1e-3, 1e-2, 1e-1]
    rng = np.random.default_rng(7)
    load, at = os.getloadavg()[0], commit()  # before the run writes its files
    cores = two_cores()
    say(f"machine: {machine()}, load average {load:.2f} at the start; two threads doing "
        f"{cores:.2f}x one's arithmetic at the start (2.00x: two whole cores); commit {at}; "
        f"{time.strftime('%Y-%m-%d')}; times are medians of {args.repeat} rounds of calls "
        "(each round about 2 ms, a system's calls taking turns with the numpy/scipy "
        "formula's), conversions included; ratios are to the formula timed alongside")
    last: dict[str, Row] = {}
    for name in args.kernels:
        k = KERNELS[name]
        start = time.perf_counter()
        systems = {s: compiled(k, s) for s in SYSTEMS}
        say(f"\n{name}: d/d{k.wrt}   (compile: pipeline + g++ -O3 per system, below)")
        header = (f"{'n':>7} {'density':>8} {'nnz':>9} {'scipy s':>10}  "
                  + "  ".join(f"{s:>11}" for s in SYSTEMS) + f"  {'arr C++':>11}"
                  + f"  {'MiB arr / scipy':>16}")
        say(header)
        built = False
        for n in sizes:
            for d in densities:
                if k.work(n, d) > args.max_work:
                    say(f"{n:>7} {d:>8g} {'':>9} skipped: about {k.work(n, d):.1e} entries "
                        f"touched > --max-work {args.max_work:g}")
                    continue
                data = k.data(n, d, rng)
                nnz = data[k.sparse].nnz
                want = k.formula(data)
                formula = partial(k.formula, data)
                calls = _calls(timed(formula, 1))
                cells, ratios, bases = [], {}, []
                for s, f in systems.items():
                    got = f(**data)
                    if not agree(got, want):
                        cells.append(f"{'WRONG':>11}")
                        ratios[s] = math.nan
                        continue
                    t = alternating({"scipy": formula, s: partial(f, **data)}, args.repeat,
                                    calls)
                    ratios[s] = t[s] / t["scipy"]
                    bases.append(t["scipy"])
                    cells.append(f"{ratios[s]:>10.2f}x")
                t = alternating({"scipy": formula,
                                 "kernel": kernel_only(systems["arr"], data)}, args.repeat, calls)
                ratios["arr C++"] = t["kernel"] / t["scipy"]
                bases.append(t["scipy"])
                base = statistics.median(bases)
                cells.append(f"{ratios['arr C++']:>10.2f}x")
                peaks = (peak(lambda: systems["arr"](**data)),  # noqa: B023
                         peak(lambda: k.formula(data)))  # noqa: B023
                cells.append(f"{peaks[0]:>8.1f} /{peaks[1]:>7.1f}")
                last[name] = Row(n, d, nnz, base, ratios, peaks)
                if not built:
                    built = True
                    compile_s = time.perf_counter() - start
                say(f"{n:>7} {d:>8g} {nnz:>9} {base:>10.2e}  " + "  ".join(cells))
        if built:
            say("g++ -O3 s: " + "  ".join(f"{s} {_build(f)}" for s, f in systems.items())
                + f"; the first calls of all, pipeline included: {compile_s:.1f} s")
    cop = cop20k(args.repeat) if (args.cop20k if args.cop20k is not None else
                                  not args.quick) else None
    lsq = least_squares(args.repeat) if "LSQ" in args.kernels else []
    fixed = fixed_cost(args.repeat)
    if args.readme:
        (ROOT / "benchmarks" / "kernels-results.txt").write_text("\n".join(printed) + "\n")
        readme = ROOT / "README.md"
        loads = (f"{load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; two "
                 f"threads doing {cores:.2f}× one's arithmetic at the start, "
                 f"{two_cores():.2f}× at the end")
        readme.write_text(with_table(readme.read_text(),
                                     table(last, cop, args.repeat, loads, at, lsq, fixed)))
        print("\nwrote benchmarks/kernels-results.txt and the README's table")
    return 0


def _power(x: float) -> str:
    """10⁻³ for 0.001, 10⁵ for 100000."""
    e = round(math.log10(x))
    return "10" + str(e).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _time(t: float) -> str:
    return f"{t * 1e6:.0f} µs" if t < 1e-3 else f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.2f} s"


def table(last: dict[str, Row], cop: tuple[float, float, float, int, float, float] | None,
          repeat: int, loads: str, at: str = "unknown",
          lsq: list[tuple[float, float, float]] | None = None,
          fixed: tuple[float, float, float] | None = None) -> str:
    """The README's table: each kernel at the largest case the sweep ran."""
    lines = [f"Measured by `make bench` on {time.strftime('%Y-%m-%d')}, commit {at} "
             f"({machine()}, "
             f"load average {loads}, g++ `-O3 -march=native`), each kernel "
             "at the largest case its sweep runs; "
             f"scipy's time a median of {repeat} rounds of warm calls, the others ratios "
             "to it, each timed in turns with it (below 1: faster than scipy):", "",
             "| kernel, gradient w.r.t. the dense variable | n | density | entries | scipy "
             "| dict | arr | arr, 2 threads | arr C++ | peak MiB, arr / scipy |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in last.items():
        cells = " | ".join(f"{r.ratios[s]:.2f}×" for s in ("dict", "arr", "arr-2t", "arr C++"))
        lines.append(f"| {NAMES[name]} | {_power(r.n)} | {_power(r.density)} | {r.nnz:,} | "
                     f"{_time(r.scipy)} | {cells} | {r.peaks[0]:.1f} / {r.peaks[1]:.1f} |")
    if cop is not None:
        arr, dict_, scipy, entries, arr_mib, scipy_mib = cop
        lines += ["", f"βAᵀA at the size of cop20k_A (a synthetic 121,192 × 121,192 matrix "
                      f"with 1,362,087 entries; its βAᵀA has {entries:,}): {arr:.2f} s in "
                      f"\"arr\", {dict_:.2f} s in \"dict\", {scipy:.2f} s for scipy's "
                      f"`A.T @ A`; a call's peak memory {arr_mib:,.0f} MiB in \"arr\", "
                      f"{scipy_mib:,.0f} MiB for scipy."]
    if lsq:
        lines += ["", f"Least squares' gradient at n = {LSQ_N:,} through `sdqlite.compile`, "
                      "called with positional arguments, against scipy's `2 * A.T @ (A @ x "
                      "- b)`, per call: " + "; ".join(
                          f"density {_power(d) if d in (1e-3, 1e-2) else f'{d:g}'}: "
                          f"{_time(t)} against {_time(base)} ({t / base:.2f}×)"
                          for d, t, base in lsq) + "."]
    if fixed:
        lines += ["", f"The front door's fixed cost: a call of a scalar kernel (the gradient "
                      f"of `x * x * y` w.r.t. x, two numbers in, one out) takes "
                      f"{fixed[0] * 1e6:.1f} µs through its plan (`codegen/fast.py`), "
                      f"{fixed[1] * 1e6:.1f} µs through the Python door, and the kernel "
                      f"alone {fixed[2] * 1e6:.2f} µs."]
    return "\n".join(lines)


def with_table(text: str, table: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?\n" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"README.md has no {BEGIN!r} ... {END!r} block to write")
    return pattern.sub(lambda _: f"{BEGIN}\n{table}\n{END}", text)


def _status(field: str) -> float:
    """A /proc/self/status size in MiB."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def peak(fn: Callable[[], Any]) -> float:
    """How far one call raises the process's peak resident set above what it held before
    (MiB; the result is alive at the end): VmHWM reset through /proc/self/clear_refs, after
    the memory the allocator kept from earlier calls is given back (``malloc_trim``), so
    that a warm call's pages count as a first call's do (the outputs the runtime keeps for
    reuse, 64 MB at most, stay: they were held before).  NaN where Linux does not offer
    that."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _status("VmRSS")
        result = fn()
        grown = _status("VmHWM") - before
    except (OSError, AttributeError):  # (no /proc, or a libc without malloc_trim)
        return math.nan
    del result
    return grown


@dataclass(frozen=True)
class Batch:
    """A function that makes ``calls`` calls itself (for ``alternating``)."""

    run: Callable[[int], Any]


@dataclass
class KernelAlone:
    """The compiled arr kernel of ``f`` on ``data`` alone: its buffers, its destination and
    the entry point's arguments made once; ``calls`` calls in a row from C (``run``,
    ``kernel_timer.cpp``), or one through ctypes whose result comes back (``once``)."""

    f: Compiled
    data: Data

    def __post_init__(self) -> None:
        args = self.f.read(self.data)
        bounds = self.f.check_sizes(args)
        self.inputs, spec = self.f.plan(args, bounds)
        native = self.f.build(spec).native
        assert native is not None
        self.native = native
        self.dest = allocate(spec.kernel.dest, spec.result, spec.sizes, bounds)
        self.work = [bounds[n] for n in spec.kernel.work]  # (its workspaces' sizes)
        ptrs, lens = native.arguments(self.inputs, self.dest, self.work)
        n = max(1, len(ptrs))
        self.args = ((ctypes.c_void_p * n)(*ptrs), (ctypes.c_int64 * n)(*lens))
        self.zeroed = (self.dest.ctypes.data, self.dest.nbytes) \
            if spec.kernel.dest == "dense" else (None, 0)

    def once(self) -> Any:
        dest = np.zeros_like(self.dest) if self.zeroed[1] else self.dest
        return self.native(self.inputs, dest, work=self.work)

    def run(self, calls: int) -> None:
        status = Status(flags=0, threads=1)
        entry, free = (ctypes.cast(fn, ctypes.c_void_p)
                       for fn in (self.native.entry, self.native.free))
        timer = _library().sdql_time_calls
        if timer(entry, *self.args, ctypes.byref(status), free, *self.zeroed, calls) != 0:
            raise self.native.failure(status)


def kernel_only(f: Compiled, data: Data) -> Batch:
    """Calls of the compiled kernel alone (``KernelAlone``)."""
    return Batch(KernelAlone(f, data).run)


_libraries: list[Any] = []  # kernel_timer.cpp's, once loaded


def _library() -> Any:
    """``kernel_timer.cpp`` built and loaded once (the kernels' cache), its functions
    declared."""
    if not _libraries:
        lib = build((Path(__file__).parent / "kernel_timer.cpp").read_text()).library
        lib.sdql_time_calls.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
        lib.sdql_time_calls.restype = ctypes.c_int
        lib.sdql_spin.argtypes = [ctypes.c_int64, ctypes.c_int64]
        lib.sdql_spin.restype = ctypes.c_double
        _libraries.append(lib)
    return _libraries[0]


def two_cores(repeat: int = 5, steps: int = 2_000_000) -> float:
    """How much more two threads do at once than one: ``steps`` steps of arithmetic alone
    on one thread, then on each of two, in turns (``alternating``); 2.0 where the host
    gives the process two whole cores (a virtual machine's two may share one)."""
    spin = _library().sdql_spin
    t = alternating({"one": lambda: spin(1, steps), "two": lambda: spin(2, steps)}, repeat, 1)
    return 2 * t["one"] / t["two"]


def _calls(once: float) -> int:
    """Calls a round of ``alternating`` makes of a function that takes ``once`` seconds:
    a round of about 2 ms (a short call timed alone is mostly the timer's and the
    machine's noise)."""
    return max(1, min(10_000, round(2e-3 / max(once, 1e-7))))


def _build(f: Compiled) -> str:
    specs = list(f.cache.values())
    if any(s.native is not None and s.native.built.cached for s in specs):
        return "cached"
    return f"{sum(s.build_seconds for s in specs):.2f}"


def alternating(fns: dict[str, Callable[[], Any] | Batch], repeat: int, calls: int
                ) -> dict[str, float]:
    """Each function's median time per call over ``repeat`` rounds of ``calls`` calls,
    the functions taking turns within each round (a change of load hits them alike); a
    ``Batch`` makes a round's calls itself."""
    def round_of(fn: Callable[[], Any] | Batch, calls: int) -> None:
        if isinstance(fn, Batch):
            fn.run(calls)
            return
        for _ in range(calls):
            fn()

    for fn in fns.values():
        round_of(fn, 1)  # warm
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            round_of(fn, calls)
            times[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(t) for name, t in times.items()}


#: issue 27's case: least squares through sdqlite.compile, called as a scipy user would
LSQ_N, LSQ_DENSITIES = 2_000, (1e-3, 1e-2, 5e-2)


def least_squares(repeat: int) -> list[tuple[float, float, float]]:
    """Least squares' gradient at n = 2,000 through ``sdqlite.compile(source, wrt="x")``,
    called with positional arguments, against scipy's ``2 * A.T @ (A @ x - b)``: (density,
    seconds per call, scipy's)."""
    k = KERNELS["LSQ"]
    f = sdqlite.compile(k.source, wrt="x")
    rng = np.random.default_rng(27)
    say(f"\nleast squares at n = {LSQ_N:,} through sdqlite.compile (issue 27's aim: "
        "within 2x of scipy per call)")
    out = []
    for d in LSQ_DENSITIES:
        data = k.data(LSQ_N, d, rng)
        a, b, x = data["A"], data["b"], data["x"]
        assert agree(f(a, b, x), k.formula(data))
        t = alternating({"scipy": lambda: 2 * a.T @ (a @ x - b),  # noqa: B023
                         "sdqlite": lambda: f(a, b, x)}, repeat, 100)  # noqa: B023
        say(f"  density {d:<6g} sdqlite {t['sdqlite'] * 1e6:7.1f} us   scipy "
            f"{t['scipy'] * 1e6:7.1f} us   ratio {t['sdqlite'] / t['scipy']:5.2f}x")
        out.append((d, t["sdqlite"], t["scipy"]))
    return out


def fixed_cost(repeat: int) -> tuple[float, float, float]:
    """A whole call of a scalar kernel (the fast path's, ``codegen/fast.py``), the same
    call through the Python door, and its kernel alone, called from C (seconds)."""
    source = "x : real\ny : real\nx * x * y"
    f, g = sdqlite.compile(source, wrt="x"), sdqlite.compile(source, wrt="x")
    assert f(x=1.5, y=2.0) == 6.0
    fast.enabled = False  # (g makes no plan: its calls all take the Python door)
    try:
        assert g(x=1.5, y=2.0) == 6.0
    finally:
        fast.enabled = True
    assert f.fast and not g.fast
    t = alternating({"call": lambda: f(x=1.5, y=2.0), "door": lambda: g(x=1.5, y=2.0),
                     "kernel": kernel_only(f, {"x": 1.5, "y": 2.0})}, repeat, 2000)
    say(f"\na scalar kernel's whole call: {t['call'] * 1e6:.1f} us (issue 26's aim: under "
        f"20 us), through the Python door {t['door'] * 1e6:.1f} us, its kernel alone "
        f"{t['kernel'] * 1e6:.2f} us")
    return t["call"], t["door"], t["kernel"]


def cop20k(repeat: int) -> tuple[float, float, float, int, float, float]:
    """BATAX's beta A^T A at the size of SuiteSparse's cop20k_A (121,192 x 121,192 with
    1,362,087 entries): a synthetic matrix with those dimensions and entry count."""
    n, nnz = 121_192, 1_362_087
    rng = np.random.default_rng(20)
    a: Any = sp.random(n, n, density=nnz / n / n, format="csr", random_state=rng)
    data = {"A": a, "beta": 0.9, "X": rng.uniform(-1, 1, n)}
    k = KERNELS["BATAX"]
    say(f"\nBATAX at cop20k_A's size (synthetic: {n} x {n}, {a.nnz} entries)")
    want = k.formula(data)
    base = timed(lambda: k.formula(data), repeat)
    times, peaks = {}, {"scipy": peak(lambda: k.formula(data))}
    for system in ("arr", "dict"):
        f = compiled(k, system)
        got = f(**data)
        ok = agree(got, want)
        t = timed(lambda: f(**data), repeat)  # noqa: B023
        times[system] = t if ok else math.nan
        peaks[system] = peak(lambda: f(**data))  # noqa: B023
        say(f"  {system:5} {t:8.3f} s   scipy {base:8.3f} s   ratio {t / base:5.2f}x   "
            f"result {got.shape[0]} x {got.shape[1]}, {got.nnz} entries, "
            f"{'agrees' if ok else 'WRONG'}; peak {peaks[system]:.0f} MiB, "
            f"scipy's {peaks['scipy']:.0f} MiB")
    return times["arr"], times["dict"], base, int(want.nnz), peaks["arr"], peaks["scipy"]


if __name__ == "__main__":
    sys.exit(main())

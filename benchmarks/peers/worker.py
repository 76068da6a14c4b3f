"""One system's runs, in a process of their own: ``python -m benchmarks.peers.worker
SYSTEM CASES OUT`` runs each case of the JSON file CASES and appends one JSON line per
case to OUT (a ``start`` line first, so that the harness knows which case a crash hit).

For each case: the inputs are made (seeded by the case), sdqlite's "arr" gradient is
computed as the reference, once per case for all workers (the scipy formula is the
reference of "arr" itself), the
system's gradient function is built and called once (the first call: tracing, XLA or g++
compilation, reported apart), its result is checked against the reference, and only
then is it timed: the median of ``REPEAT`` warm calls (an optional fourth argument:
fewer, for the probe's large cases).  Peak memory is the process's
peak resident set during the case (from building the function to the last call) above
its resident set before it: the kernel's high-water mark is reset per case by writing 5
to /proc/self/clear_refs, and read from VmHWM in /proc/self/status.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from benchmarks.kernels import KERNELS, compiled
from benchmarks.peers.cases import SYSTEMS, Case, data_for

REPEAT = 5
Thunk = Callable[[], Any]


def single_thread() -> None:
    """One thread everywhere, as the paper's runs (set before any framework is imported)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ[var] = "1"
    os.environ["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                               "intra_op_parallelism_threads=1")
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"


def configure(system: str) -> None:
    module = SYSTEMS[system].module
    if module == "torch":
        import torch

        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
    elif module == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)


def memory_kib(pid: int | str = "self") -> tuple[int, int]:
    """(resident, peak resident) in KiB, from /proc/PID/status."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def reset_peak() -> None:
    """Give freed memory back (else a case reusing it shows no growth), then reset VmHWM."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")


def as_array(x: Any, shape: tuple[int, ...]) -> Any:
    """A result as a numpy array of the reference's shape, or a scipy matrix as it is."""
    if sp.issparse(x):
        return x
    return np.asarray(x, dtype=np.float64).reshape(shape)


def agree(got: Any, want: Any) -> str:
    """"" when ``got`` equals ``want`` up to rounding, else what differs."""
    if np.shape(got) != np.shape(want):
        return f"shape {np.shape(got)} against {np.shape(want)}"
    diff = abs(got - want)
    worst = float(diff.max()) if np.prod(np.shape(want)) else 0.0
    scale = max(1.0, float(abs(want).max())) if np.prod(np.shape(want)) else 1.0
    return "" if worst <= 1e-9 * scale else f"differs by {worst:.3g} (scale {scale:.3g})"


class Runner:
    def __init__(self, system: str, repeat: int = REPEAT) -> None:
        self.system = system
        self.repeat = repeat
        self.compiled: dict[tuple[str, str], Any] = {}

    def sdqlite(self, kernel: str, variant: str) -> Any:
        key = (kernel, variant)
        if key not in self.compiled:
            self.compiled[key] = compiled(KERNELS[kernel], variant)
        return self.compiled[key]

    def reference(self, case: Case, data: dict[str, Any]) -> Any:
        """sdqlite "arr"'s result, computed once per case and shared through REFS."""
        if self.system == "sdqlite-arr":
            return KERNELS[case.kernel].formula(data)
        cache = os.environ.get("SDQLITE_PEERS_REFS")
        path = Path(cache, hashlib.sha1(case.key.encode()).hexdigest() + ".npz") if cache \
            else None
        if path is not None and path.exists():
            with np.load(path, allow_pickle=False) as z:
                if "dense" in z:
                    return z["dense"]
            return sp.load_npz(path)
        want: Any = self.sdqlite(case.kernel, "arr")(**data)
        if path is not None:
            if hasattr(want, "tocsr"):
                sp.save_npz(path, want.tocsr())
            else:
                np.savez(path, dense=want)
        return want

    def thunk(self, case: Case, data: dict[str, Any]) -> Thunk:
        s, k = self.system, case.kernel
        if s.startswith("sdqlite-"):
            f = self.sdqlite(k, s.removeprefix("sdqlite-"))
            return lambda: f(**data)
        if s == "scipy":
            return lambda: KERNELS[k].formula(data)
        if s == "interpreter":
            return interpreter_thunk(k, data)
        from benchmarks.peers.frameworks import MAKERS

        return MAKERS[s](k, data)

    def run(self, case: Case) -> dict[str, Any]:
        began = time.perf_counter()
        data = data_for(case)
        want = self.reference(case, data)
        reset_peak()
        before, _ = memory_kib()
        start = time.perf_counter()
        fn = self.thunk(case, data)
        got = fn()
        first = time.perf_counter() - start
        wrong = agree(as_array(got, np.shape(want)), want)
        if wrong:
            return {"status": "wrong", "reason": f"disagrees with sdqlite: {wrong}",
                    "first_s": first}
        times = []
        for _ in range(self.repeat):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        _, peak = memory_kib()
        return {"status": "ok", "seconds": statistics.median(times), "first_s": first,
                "times": times, "peak_mib": max(0, peak - before) / 1024,
                "rss_mib": peak / 1024, "wall_s": time.perf_counter() - began}


def interpreter_thunk(kernel: str, data: dict[str, Any]) -> Thunk:
    """The gradient evaluated by the reference interpreter, inputs converted each call."""
    from benchmarks.interpreter import to_value
    from sdqlite.ad.gradient import gradient
    from sdqlite.check.typecheck import typecheck
    from sdqlite.syntax.parser import parse_program
    from semantics.convert import to_numpy, to_scipy
    from semantics.interp import evaluate

    k = KERNELS[kernel]
    prog = parse_program(k.source)
    ctx = {d.name: d.type for d in prog.decls}
    assert prog.expr is not None
    value, _ = typecheck(prog.expr, ctx)
    grad, _ = typecheck(gradient(value, k.wrt, ctx, share=True), ctx)
    shape = np.shape(k.formula(data))
    matrix = len(shape) == 2

    def call() -> Any:
        out = evaluate(grad, {x: to_value(v) for x, v in data.items()})
        return to_scipy(out, shape) if matrix else to_numpy(out, shape)
    return call


def main(argv: list[str]) -> int:
    system, cases_file, out_file, *repeat = argv
    single_thread()
    configure(system)
    runner = Runner(system, int(repeat[0]) if repeat else REPEAT)
    cases = [Case(**c) for c in json.loads(Path(cases_file).read_text())]
    with open(out_file, "a", encoding="utf-8") as out:
        for case in cases:
            print(json.dumps({"key": case.key, "status": "start"}), file=out, flush=True)
            try:
                result = runner.run(case)
            except Exception as e:  # a framework's failure is a finding, reported
                msg = next((line for line in reversed(str(e).splitlines()) if line.strip()),
                           "")
                result = {"status": "failed", "reason": f"{type(e).__name__}: {msg[:200]}",
                          "trace": traceback.format_exc(limit=3)[-800:]}
            print(json.dumps({"key": case.key, **result}), file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

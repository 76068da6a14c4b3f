"""The reference interpreter at scale: is it linear in the work a program does?

For each kernel of §7 (``benchmarks.kernels``: BATAX, SMMM, SMVM, VVA, VVD, VSM), its
value and its gradient w.r.t. the dense variable are evaluated by the reference
interpreter (``semantics.interp``, floats) at three or more sizes, after checking the
result against the numpy/scipy formula.  Printed per kernel: the time per size, the
log-log slope of time against the number of stored entries (1.0 is linear), the time to
convert the inputs (``semantics.convert``) and to print the result, and the ratio of the
interpreter to the numpy/scipy formula timed in the same run, at the largest size run.
A size whose predicted time exceeds ``--max-seconds`` is left out (``-``).

Run: ``make bench`` (``python -m benchmarks.interpreter``; ``--quick`` for small sizes).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from benchmarks.kernels import KERNELS, P, machine
from sdqlite.ad.gradient import gradient
from sdqlite.check.typecheck import typecheck
from sdqlite.syntax.parser import parse_program
from semantics.convert import from_numpy, from_scipy, sparse_vector, to_numpy, to_scipy
from semantics.display import show_value
from semantics.interp import evaluate
from semantics.values import Value

Data = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """How a kernel's data grows with its number of stored entries ``nnz``, and the
    numpy/scipy formula for its value (the gradient's is ``KERNELS[...].formula``)."""

    data: Callable[[int, np.random.Generator], Data]
    value: Callable[[Data], Any]


def _matrix(nnz: int, rng: np.random.Generator) -> Any:  # about 10 entries a row
    n = max(10, nnz // 10)
    return sp.random(n, n, density=nnz / n / n, format="csr", random_state=rng,
                     data_rvs=lambda k: rng.uniform(-2, 2, k))


def _vector(nnz: int, rng: np.random.Generator) -> Any:  # density 1/10
    n = 10 * nnz
    keys = np.sort(rng.choice(n, size=nnz, replace=False))
    return sp.coo_array((rng.uniform(-2, 2, nnz), (keys,)), shape=(n,))


def _matrix_data(extra: Callable[[int, np.random.Generator], Data]
                 ) -> Callable[[int, np.random.Generator], Data]:
    def make(nnz: int, rng: np.random.Generator) -> Data:
        a = _matrix(nnz, rng)
        return {"A": a, **extra(a.shape[0], rng)}
    return make


def _vector_data(dense: str, sparse: str) -> Callable[[int, np.random.Generator], Data]:
    def make(nnz: int, rng: np.random.Generator) -> Data:
        v = _vector(nnz, rng)
        return {sparse: v, dense: rng.uniform(-1, 1, v.shape[0])}
    return make


CASES: dict[str, Case] = {
    "BATAX": Case(_matrix_data(lambda n, rng: {"beta": 0.9, "X": rng.uniform(-1, 1, n)}),
                  lambda x: x["beta"] * (x["A"].T @ (x["A"] @ x["X"]))),
    "SMMM": Case(_matrix_data(lambda n, rng: {"B": rng.uniform(-1, 1, (n, P))}),
                 lambda x: float((x["A"] @ x["B"]).sum())),
    "SMVM": Case(_matrix_data(lambda n, rng: {"X": rng.uniform(-1, 1, n)}),
                 lambda x: float((x["A"] @ x["X"]).sum())),
    "VVA": Case(_vector_data("V1", "V2"), lambda x: x["V1"] + x["V2"].toarray()),
    "VVD": Case(_vector_data("V1", "V2"), lambda x: float(x["V1"] @ x["V2"].toarray())),
    "VSM": Case(lambda nnz, rng: {"s": 1.5, "V": _vector(nnz, rng)},
                lambda x: (x["V"] * x["s"] * x["s"]).toarray()),
}
SPARSE_MATRIX = "{int -> {int -> real}}"


def to_value(x: Any) -> Value:
    if sp.issparse(x):
        m: Any = x
        return sparse_vector(m.toarray()) if m.ndim == 1 else from_scipy(m)[0]
    if isinstance(x, np.ndarray):
        return from_numpy(x)[0]
    return float(x)


def agree(got: Value, want: Any) -> bool:
    """The interpreter's result against the formula's (a sparse one compared sparse)."""
    if sp.issparse(want):
        w: Any = want
        diff = abs(to_scipy(got, w.shape) - w)
        scale = max(1.0, float(abs(w).max())) if w.nnz else 1.0
        return bool(diff.nnz == 0 or diff.max() <= 1e-9 * scale)
    want = np.asarray(want, dtype=float)
    out = np.asarray(to_numpy(got, want.shape) if want.shape else float(got), dtype=float)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    return out.shape == want.shape and bool(np.all(np.abs(out - want) <= 1e-9 * scale))


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def slope(sizes: list[int], times: list[float]) -> float:
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10^3 .. 3x10^4 entries")
    ap.add_argument("--kernels", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--max-seconds", type=float, default=30.0,
                    help="skip a size whose predicted time (linear from the size before) "
                         "exceeds this (default %(default)g)")
    args = ap.parse_args(argv)
    sizes = ([1_000, 3_000, 10_000, 30_000] if args.quick
             else [3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000])
    rng = np.random.default_rng(11)
    print(f"machine: {machine()}; {time.strftime('%Y-%m-%d')}; the reference interpreter "
          "(floats); slope: log-log, time against stored entries (1.0 is linear)")
    print(f"{'kernel':14} " + " ".join(f"{n:>9}" for n in sizes)
          + f" {'slope':>6} {'convert':>8} {'print':>7} {'scipy':>9} {'ratio':>7}")
    for name in args.kernels:
        k, case = KERNELS[name], CASES[name]
        prog = parse_program(k.source)
        ctx = {d.name: d.type for d in prog.decls}
        assert prog.expr is not None
        value, _ = typecheck(prog.expr, ctx)
        grad, _ = typecheck(gradient(value, k.wrt, ctx, share=True), ctx)
        for what, program, formula in (("value", value, case.value),
                                       (f"d/d{k.wrt}", grad, k.formula)):
            times: list[float] = []
            wrong = ""
            convert = printing = base = 0.0
            for nnz in sizes:
                if times and times[-1] * nnz / sizes[len(times) - 1] > args.max_seconds:
                    break
                data = case.data(nnz, rng)
                start = time.perf_counter()
                env = {x: to_value(v) for x, v in data.items()}
                convert = time.perf_counter() - start
                start = time.perf_counter()
                out = evaluate(program, env)
                times.append(time.perf_counter() - start)
                want = formula(data)
                if not agree(out, want):
                    wrong = f"  WRONG at {nnz} entries"
                start = time.perf_counter()
                show_value(out)
                printing = time.perf_counter() - start
                base = best_of(lambda: formula(data), 5)  # noqa: B023
            cells = " ".join([*(f"{t:>8.3f}s" for t in times),
                              *(f"{'-':>9}" for _ in sizes[len(times):])])
            print(f"{name + ' ' + what:14} {cells} {slope(sizes[:len(times)], times):>6.2f} "
                  f"{convert:>7.2f}s {printing:>6.2f}s {base:>8.1e}s "
                  f"{times[-1] / base:>6.0f}x{wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The optimizer on the paper's kernels: the pipeline of Fig. fig:arch per kernel and
stage, with time, e-graph nodes and classes, iterations, and cost before/after under the
STOREL model.  Run: ``.venv/bin/python -m benchmarks.optimizer`` (``--iter-limit``,
``--node-limit``, ``--time-limit`` set the saturation limits; defaults are printed).
"""

from __future__ import annotations

import argparse
import sys
import time

from sdqlite.check.typecheck import typecheck
from sdqlite.opt.pipeline import Limits, pipeline
from sdqlite.syntax.parser import parse_program
from sdqlite.syntax.printer import show

# As in the paper's benchmarks, the vector differentiated by is dense; sizes say which
# keys lie in its extent (n), which is what lets the optimizer drop its one-hot.
SVEC = "{int[n] -> real}"
DVEC = "{dense_int[n] -> real}"
MAT = "{int[m] -> {int[n] -> real}}"
MAT2 = "{int[n] -> {int[p] -> real}}"

#: ||A x - b||², and the logistic loss of the labels b (±1) of A's rows
LSQ = (f"A : {MAT}\nb : {SVEC.replace('[n]', '[m]')}\nx : {DVEC}\n"
       "sum(<i, bi> in b) let r = (sum(<j, a> in A(i)) a * x(j)) - bi in r * r")
LOGREG = (f"A : {MAT}\nb : {SVEC.replace('[n]', '[m]')}\nx : {DVEC}\n"
          "sum(<i, bi> in b) log(1.0 + exp(-1.0 * bi * (sum(<j, a> in A(i)) a * x(j))))")

#: name -> (source, the input differentiated by)
KERNELS: dict[str, tuple[str, str]] = {
    "VVD": (f"V1 : {DVEC}\nV2 : {SVEC}\nsum(<i, a> in V2) V1(i) * a", "V1"),
    "VSM": (f"s : real\nV : {DVEC}\ns * V", "V"),
    "VVA": (f"V1 : {DVEC}\nV2 : {DVEC}\nV1 + V2", "V1"),
    "SMVM": (f"M : {MAT}\nV : {DVEC}\nsum(<i, r> in M) {{ i -> sum(<j, a> in r) a * V(j) }}",
             "V"),
    "SMMM": (f"M1 : {MAT}\nM2 : {MAT2}\n"
             "sum(<i, row> in M1) { i -> sum(<j, v1> in row) "
             "sum(<k, v2> in M2(j)) { k -> v1 * v2 } }", "M1"),
    "BATAX": (f"A : {MAT}\nbeta : real\nx : {DVEC}\n"
              "sum(<i, r> in A) sum(<j, v1> in r) sum(<k, v2> in r) "
              "{ j -> ((beta * v1) * v2) * (x(k)) }", "x"),
    "MMM": (f"M1 : {MAT}\nM2 : {MAT2}\n"
            "sum(<i, row> in M1) { i -> sum(<j, v1> in row) "
            "sum(<k, v2> in M2(j)) { k -> v1 * v2 } }", "M2"),
    # least squares and logistic regression, written the natural way (iterating b)
    "LSQ": (LSQ, "x"),
    "LOGREG": (LOGREG, "x"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iter-limit", type=int, default=Limits.iter_limit)
    ap.add_argument("--node-limit", type=int, default=Limits.node_limit)
    ap.add_argument("--time-limit", type=float, default=Limits.time_limit)
    args = ap.parse_args(argv)
    limits = Limits(args.iter_limit, args.node_limit, args.time_limit)
    print(f"limits per saturation: {limits.iter_limit} iterations, {limits.node_limit} "
          f"nodes, {limits.time_limit} s")
    header = (f"{'kernel':7} {'stage':36} {'time s':>8} {'nodes':>7} {'classes':>7} "
              f"{'iters':>5} {'cost before':>12} {'cost after':>12}  stop")
    print(header)
    print("-" * len(header))
    slowest = 0.0
    for name, (source, wrt) in KERNELS.items():
        prog = parse_program(source)
        assert prog.expr is not None
        ctx = {d.name: d.type for d in prog.decls}
        elab, _ = typecheck(prog.expr, ctx)
        start = time.perf_counter()
        stages = pipeline(elab, ctx, wrt, limits)
        total = time.perf_counter() - start
        slowest = max(slowest, total)
        for s in stages[1:]:
            r = s.report
            print(f"{name:7} {s.name:36} {s.seconds:8.3f} {r.get('e-graph nodes', ''):>7} "
                  f"{r.get('e-classes', ''):>7} {r.get('iterations', ''):>5} "
                  f"{_cost(r.get('cost before')):>12} {_cost(r.get('cost after')):>12}  "
                  f"{r.get('stop', '')}")
        print(f"{name:7} {'total':36} {total:8.3f}")
        result = " ".join(show(stages[-1].program).split())
        print(f"{name:7} result: {result[:90] + ' …' if len(result) > 90 else result}")
    print(f"slowest kernel: {slowest:.2f} s (aim: under 1 s each)")
    return 0


def _cost(c: object) -> str:
    return "" if c is None else f"{float(c):.3g}"  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())

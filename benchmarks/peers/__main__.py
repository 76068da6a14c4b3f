"""The paper's evaluation (§7) against PyTorch, JAX, TensorFlow and scipy.

Run: ``make bench-peers`` (installs the frameworks into ``.venv-peers``, then runs this
full; ``make bench-peers QUICK=1`` for the few-minute sweep), or
``.venv-peers/bin/python -m benchmarks.peers [--quick]``.

For each kernel of §7 (BATAX, SMMM, SMVM, VVA, VVD, VSM; the gradient w.r.t. the dense
variable, ``benchmarks.kernels``) and each dataset of the sweeps (``cases.sweeps``), every
system of ``cases.SYSTEMS`` is run: sdqlite's compiled "dict" and "arr" (and "arr"
without normalization or DPS, for BATAX), the reference interpreter (small sizes), the
numpy/scipy formula, and PyTorch, JAX and TensorFlow, each densified and with its own
sparse tensors.  A run that is unsupported, or predicted to exceed the memory budget or
the time cap, is marked with the reason before anything is started.  The others run in
one worker process per system (``worker.py``): checked against sdqlite's result first,
then timed (median of 5 warm calls, one thread), with the first call (tracing and
compilation) and the peak memory reported apart.  A case that crashes its worker or
outlives ``--case-timeout`` is marked so, and the worker restarts on the next case.

Writes ``benchmarks/results/``: ``peers.json`` (every run), the figures (``*.png``, in
the layout of the paper's figures), ``summary.md``; and the README's "How fast" table
between its ``peers`` markers (``report.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.peers.cases import SYSTEMS, Case, skip_reason, sweeps

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer, smaller cases (minutes)")
    ap.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--kernels", nargs="*", default=None,
                    help="only these kernels (default: all eight)")
    ap.add_argument("--budget-gib", type=float, default=None,
                    help="memory a framework's run may be predicted to need (default "
                         "2 GiB quick, 8 GiB full, of the machine's 24)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="skip a framework's run predicted to take longer a call "
                         "(default 1 quick, 3 full)")
    ap.add_argument("--gflops", type=float, default=20.0,
                    help="the dense speed the time predictions assume (default %(default)g)")
    ap.add_argument("--max-work", type=float, default=None,
                    help="skip sdqlite and scipy runs touching more entries (default "
                         "2e7 quick, 6e7 full)")
    ap.add_argument("--interp-work", type=float, default=None,
                    help="the interpreter's limit in entries (default 2e4 quick, 1e5 full)")
    ap.add_argument("--case-timeout", type=float, default=None,
                    help="seconds a run may take in all (default 60 quick, 600 full)")
    ap.add_argument("--mtx-dir", type=Path, default=ROOT / ".venv-peers" / "matrices",
                    help="real matrices (.mtx) to run too (default %(default)s)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--probe", action="store_true",
                    help="after a full run: take each system past the sweeps' limits to the "
                         "largest problem it completes on this machine (probe.py; budget 20 "
                         "GiB, 30 s a call, 300 s a case by default)")
    ap.add_argument("--report-only", action="store_true",
                    help="redo the figures and summary from OUT/peers.json")
    ap.add_argument("--no-readme", action="store_true", help="leave README.md alone")
    args = ap.parse_args(argv)
    if args.probe and args.quick:
        ap.error("--probe climbs from a full run's sweeps: it takes no --quick")
    q, p = args.quick, args.probe
    args.max_seconds = args.max_seconds or (1.0 if q else 30.0 if p else 3.0)
    args.budget_gib = args.budget_gib or (2.0 if q else 20.0 if p else 8.0)
    args.max_work = args.max_work or (2e7 if q else 6e7)
    args.interp_work = args.interp_work or (2e4 if q else 1e5)
    args.case_timeout = args.case_timeout or (30.0 if q else 300.0 if p else 600.0)
    return args


def resident_gib(pid: int) -> float:
    """The process's resident set (0 once it is gone)."""
    from benchmarks.peers.worker import memory_kib

    try:
        return memory_kib(pid)[0] / 2**20
    except OSError:
        return 0.0


def run_worker(system: str, cases: list[Case], timeout: float, progress: Any,
               repeat: int | None = None, rss_limit_gib: float | None = None
               ) -> dict[str, dict[str, Any]]:
    """Run ``cases`` in worker processes for ``system``; a crash, a timeout or a resident
    set over ``rss_limit_gib`` marks the case and a new worker takes the rest."""
    results: dict[str, dict[str, Any]] = {}
    todo = list(cases)
    with tempfile.TemporaryDirectory() as tmp:
        while todo:
            cases_file, out_file = Path(tmp, "cases.json"), Path(tmp, "out.jsonl")
            cases_file.write_text(json.dumps([c.as_dict() for c in todo]))
            out_file.write_text("")
            log = open(Path(tmp, "stderr"), "w+", encoding="utf-8")  # noqa: SIM115
            proc = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.peers.worker", system, str(cases_file),
                 str(out_file), *([str(repeat)] if repeat else [])], cwd=ROOT,
                stdout=subprocess.DEVNULL, stderr=log,
                start_new_session=True)
            seen, started, current = 0, time.monotonic(), ""
            while True:
                lines = out_file.read_text().splitlines()
                for line in lines[seen:]:
                    rec = json.loads(line)
                    if rec["status"] == "start":
                        current, started = rec["key"], time.monotonic()
                    else:
                        results[rec.pop("key")] = rec
                        current = ""
                        progress.update(1)
                seen = len(lines)
                code = proc.poll()
                if code is not None and len(out_file.read_text().splitlines()) == seen:
                    break
                over = (rss_limit_gib is not None and current
                        and resident_gib(proc.pid) > rss_limit_gib)
                if current and (over or time.monotonic() - started > timeout):
                    os.killpg(proc.pid, 9)
                    proc.wait()
                    results[current] = (
                        {"status": "crashed", "reason": f"killed by the harness: resident set "
                         f"over the budget of {rss_limit_gib:g} GiB"} if over else
                        {"status": "timeout", "reason": f"still running after {timeout:g} s"})
                    progress.update(1)
                    break
                time.sleep(0.05)
            if current and current not in results:
                log.seek(0)
                tail = [ln for ln in log.read().splitlines() if ln.strip()][-1:]
                why = ("killed (signal 9: out of memory?)" if proc.returncode == -9
                       else f"worker exited with status {proc.returncode}")
                results[current] = {"status": "crashed",
                                    "reason": why + (f": {tail[0][:200]}" if tail else "")}
                progress.update(1)
            log.close()
            todo = [c for c in todo if c.key not in results]
            if proc.returncode not in (0, None, -9) and not current:
                for c in todo:  # died between cases: say so rather than loop
                    results[c.key] = {"status": "crashed",
                                      "reason": f"worker exited with status {proc.returncode}"}
                todo = []
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)  # (--help works anywhere; the runs need the peers' environment)
    try:
        from tqdm import tqdm

        from benchmarks.peers import report
    except ImportError as err:
        raise SystemExit(f"python -m benchmarks.peers: {err.name} is missing: run it in the "
                         "peers' environment, which `make bench-peers` builds "
                         "(.venv-peers/bin/python -m benchmarks.peers ...)") from None

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    readme = None if args.no_readme else ROOT
    if args.report_only or args.probe:
        try:
            saved = json.loads((out / "peers.json").read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"python -m benchmarks.peers: no run to report in {out}: {e}"
                             " (run the sweeps first)") from None
        if args.probe:
            if saved["meta"]["mode"] != "full":
                raise SystemExit("python -m benchmarks.peers --probe: the probe climbs from "
                                 f"a full run's sweeps, and {out / 'peers.json'} is a "
                                 f"{saved['meta']['mode']} run")
            run_probe(args, saved["runs"])
        report.write(saved["runs"], saved["meta"], out, readme, load_probe(out))
        return 0
    (out / "probe.json").unlink(missing_ok=True)  # it climbed from the runs replaced here
    began, load = time.time(), os.getloadavg()
    cases = [c for c in sweeps(args.quick, args.mtx_dir if args.mtx_dir.is_dir() else None)
             if args.kernels is None or c.kernel in args.kernels]
    unique = list({c.key: c for c in cases}.values())
    runs: list[dict[str, Any]] = []
    queue: dict[str, list[Case]] = {s: [] for s in args.systems}
    for system in args.systems:
        for c in unique:
            why = skip_reason(system, c, args.budget_gib, args.max_seconds, args.max_work,
                              args.interp_work, args.gflops)
            if why:
                runs.append({**c.as_dict(), "system": system, "status": "skipped",
                             "reason": why})
            else:
                queue[system].append(c)
    total = sum(map(len, queue.values()))
    print(f"{len(unique)} cases x {len(args.systems)} systems: {total} runs, "
          f"{len(runs)} marked beforehand (unsupported or over the budget/cap)")
    with tqdm(total=total, unit="run", dynamic_ncols=True) as bar, \
            tempfile.TemporaryDirectory() as refs:
        os.environ["SDQLITE_PEERS_REFS"] = refs  # sdqlite's results, shared by the workers
        for system, todo in queue.items():
            bar.set_description(system)
            got = run_worker(system, todo, args.case_timeout, bar)
            runs += [{**c.as_dict(), "system": system, **got[c.key]} for c in todo]
    meta = report.metadata(args, began, load, time.time() - began)
    (out / "peers.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    report.write(runs, meta, out, readme, None)
    print(f"done in {(time.time() - began) / 60:.1f} min: {out / 'summary.md'}")
    return 0


def run_probe(args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    """Every system's climb (``probe.py``), kernel by kernel, one worker per rung; OUT/
    probe.json is written after each climb (a stopped probe keeps what it found)."""
    from tqdm import tqdm

    from benchmarks.peers import probe

    began, load = time.time(), os.getloadavg()
    kernels = args.kernels or list(probe.DENSITY_EXP)
    systems = [s for s in args.systems if s in probe.PROBED]
    climbed: list[dict[str, Any]] = []
    with tqdm(unit="rung", dynamic_ncols=True) as bar, \
            tempfile.TemporaryDirectory() as refs:
        os.environ["SDQLITE_PEERS_REFS"] = refs
        for kernel in kernels:
            for system in systems:
                bar.set_description(f"{kernel} {system}")

                def run_one(case: Case, system: str = system) -> dict[str, Any]:
                    got = run_worker(system, [case], args.case_timeout, bar, repeat=1,
                                     rss_limit_gib=args.budget_gib)
                    return got[case.key]
                mine = probe.climb(system, kernel, runs, run_one, args.budget_gib,
                                   args.max_seconds, args.gflops)
                if mine:
                    end = probe.stops(mine)[(system, kernel)]
                    done = sum(r["status"] == "ok" for r in mine)
                    bar.write(f"{kernel} {system}: {done} rungs completed, stopped at "
                              f"n = {end['n']:,}: {end['status']}: {end.get('reason', '')}")
                climbed += mine
                minutes = round((time.time() - began) / 60, 1)
                meta = {"date": time.strftime("%Y-%m-%d %H:%M", time.localtime(began)),
                        "minutes": minutes, "load_before": [round(x, 2) for x in load],
                        "load_after": [round(x, 2) for x in os.getloadavg()],
                        "budget_gib": args.budget_gib, "max_seconds": args.max_seconds,
                        "case_timeout": args.case_timeout, "gflops": args.gflops,
                        "probed": [[s, k] for k in kernels for s in systems]}
                (args.out / "probe.json").write_text(
                    json.dumps({"meta": meta, "runs": climbed}, indent=1))
    print(f"probe done in {(time.time() - began) / 60:.1f} min")


def load_probe(out: Path) -> dict[str, Any] | None:
    try:
        saved: dict[str, Any] = json.loads((out / "probe.json").read_text())
    except (OSError, ValueError):
        return None
    return saved


if __name__ == "__main__":
    sys.exit(main())

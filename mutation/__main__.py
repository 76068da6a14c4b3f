"""``python -m mutation``: the mutation score of the test suite (``make mutation``).

Every mutant of the operators' table (``mutation/operators.py``) in the modules of
``runner.TARGETS`` is run against the tests that reach it (``runner``); the score of a
module is the share of its non-equivalent mutants that a test kills, for ``properties/``
alone and for the whole suite.  Survivors are printed with their diff.  Mutants that
behave as the original on every input are listed with a reason in
``mutation/equivalent.toml`` and not counted.

  python -m mutation                      every mutant (40 minutes on 2 cores: a run on
                                          2026-11-24 of all 2,447, recording included)
  python -m mutation --quick              a seeded sample of 15 per module
  python -m mutation --operators lookup-inserts kept-zero no-shadow start-ignored
                                          the mutants of issue 30's classes only
  python -m mutation --modules sdqlite.opt.passes --jobs 2
  python -m mutation --list sdqlite.opt.rules the mutants of a module, numbered
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import os
import platform
import random
import subprocess
import sys
import time
import tomllib
from typing import Any

from mutation.operators import OPERATORS, Edit, apply
from mutation.runner import (
    PYTEST_ARGS,
    ROOT,
    STATE,
    SUITE,
    TARGETS,
    Module,
    MutatePlugin,
    Outcome,
    fresh_plans,
    install,
    load_json,
    record,
    sources_hash,
)

EQUIVALENT = ROOT / "mutation" / "equivalent.toml"
REPORT = ROOT / "mutation" / "report.md"
#: the bugs planted by hand for issue 30's classes, and what caught them: kept at the
#: end of the report (a run of the operators does not replace it)
PLANTED = ROOT / "mutation" / "planted.md"


Key = tuple[str, str, str, str, str, str, int]


def key(m: Module, e: Edit) -> Key:
    """A mutant as the list names it: where (module, function, the line's text and the
    column in it, indentation aside) and what (operator, source replaced, replacement).
    Lines move as code is edited; a reviewed entry stays with its line until that line
    changes, and then no mutant matches it and the run says so."""
    raw = m.source.splitlines()[e.site.start[0] - 1]
    indent = len(raw) - len(raw.lstrip())
    return (m.name, e.function, e.operator, e.original, e.site.text, raw.strip(),
            e.site.start[1] - indent)


def equivalents() -> dict[Key, str]:
    """The reviewed list: each mutant named by where it is and what it changes, with its
    reason."""
    data = tomllib.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    out = {}
    for entry in data.get("equivalent", []):
        if not entry.get("reason", "").strip() or "line" not in entry or "column" not in entry:
            raise SystemExit(f"{EQUIVALENT}: an entry needs its line, column and reason: "
                             f"{entry}")
        k = (entry["module"], entry["function"], entry["operator"], entry["original"],
             entry["mutant"], entry["line"], entry["column"])
        out[k] = entry["reason"]
    return out


def describe(module: Module, number: int) -> str:
    e = module.mutants[number - 1]
    line = e.site.start[0]
    where = f"{module.name.replace('.', '/')}.py:{line}" + (f" ({e.function})" if e.function
                                                            else "")
    before = module.source.splitlines(keepends=True)
    after = apply(module.source, e.site).splitlines(keepends=True)
    diff = [d.rstrip("\n") for d in difflib.unified_diff(before, after, n=0)][2:]
    return f"#{number} {e.operator} at {where}\n" + "\n".join("    " + d for d in diff)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mutation", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", nargs="+", choices=TARGETS, default=list(TARGETS),
                    metavar="MODULE", help="the modules to mutate (default: all)")
    ap.add_argument("--quick", nargs="?", const=15, type=int, metavar="N",
                    help="a seeded sample of N mutants per module (default 15)")
    ap.add_argument("--operators", nargs="+", choices=OPERATORS, metavar="OPERATOR",
                    help="only the mutants these operators make (default: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--list", metavar="MODULE", choices=TARGETS,
                    help="print the mutants of MODULE and stop")
    ap.add_argument("--mutant", metavar="MODULE:NUMBER",
                    help="run the tests given after -- (default: the suite) with one mutant "
                         "switched on, as pytest does (to see a survivor die)")
    ap.add_argument("tests", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--report", action="store_true",
                    help=f"write the score table to {REPORT.relative_to(ROOT)}")
    ap.add_argument("--from-log", action="store_true",
                    help="the score table of the mutants a (stopped) run finished, from "
                         ".mutation/progress.log (with --report, written as the report)")
    ap.add_argument("--phase", choices=["record"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    os.environ["HYPOTHESIS_PROFILE"] = "mutation"  # conftest.py: 100 examples, no shrinking
    STATE.mkdir(exist_ok=True)
    # one C++ build cache for every run (kernels are keyed by their text and flags): a
    # mutant of the Python code seldom changes the C++, so its builds are cache hits
    os.environ.setdefault("SDQLITE_CACHE", str(STATE / "cpp-cache"))
    if args.from_log:
        return from_log(args.modules, args.report)
    if args.list:
        m = Module.load(args.list)
        for i in range(1, len(m.mutants) + 1):
            print(describe(m, i))
        return 0
    if args.mutant:
        import pytest

        name, _, number = args.mutant.partition(":")
        m = Module.load(name)
        print(describe(m, int(number)), flush=True)
        install([m], {name: int(number)})
        fresh_plans(args.mutant)
        return int(pytest.main(["-x", "-q", "-p", "no:cacheprovider",
                                *(args.tests or [str(ROOT / s) for s in SUITE])]))
    # a new run's log (not --list's or --mutant's: a run may be going on beside them)
    (STATE / "progress.log").unlink(missing_ok=True)
    digest = sources_hash()
    recorded = STATE / f"record-{digest}.json"
    if args.phase == "record":
        data = record([Module.load(n) for n in TARGETS])
        recorded.write_text(json.dumps(data))
        return 0
    started = time.monotonic()
    if not recorded.exists():
        print("recording which tests reach which mutants (the whole suite, once) ...",
              flush=True)
        subprocess.run([sys.executable, "-m", "mutation", "--phase", "record"], check=True,
                       cwd=ROOT)
    recording = load_json(recorded)
    if recording["failed"]:
        print("the suite fails on the code as written; fix it first:\n  "
              + "\n  ".join(recording["failed"]))
        return 1

    modules = {n: Module.load(n) for n in TARGETS}
    known = equivalents()
    chosen: list[tuple[str, int]] = []
    equivalent: dict[tuple[str, int], str] = {}
    rng = random.Random(12)
    for n in args.modules:
        numbers = list(range(1, len(modules[n].mutants) + 1))
        for i in numbers:
            if (reason := known.get(key(modules[n], modules[n].mutants[i - 1]))) is not None:
                equivalent[(n, i)] = reason
        live = [i for i in numbers if (n, i) not in equivalent and (
            args.operators is None or modules[n].mutants[i - 1].operator in args.operators)]
        if args.quick is not None:
            live = sorted(rng.sample(live, min(args.quick, len(live))))
        chosen += [(n, i) for i in live]
    matched = {key(m, e) for m in modules.values() for e in m.mutants}
    for stale in sorted(set(known) - matched):  # the code changed under a reviewed entry
        print(f"{EQUIVALENT.name}: no mutant is {stale}: review or remove the entry")
    print(f"{len(chosen)} mutants in {len(args.modules)} modules, {args.jobs} at a time",
          flush=True)

    import pytest

    install(list(modules.values()), {})
    plugin = MutatePlugin(modules, recording, chosen, args.jobs,
                          progress=lambda s: print(f"\r{s}", end="", flush=True))
    pytest.main([*PYTEST_ARGS, *[str(ROOT / s) for s in SUITE]], plugins=[plugin])
    print()
    minutes = (time.monotonic() - started) / 60
    results = plugin.results
    rows = table(args.modules, modules, chosen, equivalent, results)
    print(format_table(rows))
    survivors = [k for k in chosen if results[k].status in ("survived", "uncovered")]
    printed = [f"{len(survivors)} mutants survived the whole suite; "
               f"{sum(1 for k in chosen if results[k].scope == 'tests')} were killed only by "
               f"tests/ (not by properties/). {minutes:.1f} minutes."]
    for n, i in survivors:
        printed.append(("[not reached by any test] " if results[(n, i)].status == "uncovered"
                        else "") + describe(modules[n], i))
    only_tests = [k for k in chosen if results[k].scope == "tests"]
    if only_tests:
        printed.append("\nkilled only by tests/:")
        for n, i in only_tests:
            printed.append(describe(modules[n], i) + f"\n    killed by {results[(n, i)].by}")
    print("\n" + "\n".join(printed))
    (STATE / "last-run.json").write_text(json.dumps(
        {f"{n}:{i}": vars(results[(n, i)]) for n, i in chosen}, indent=1))
    if args.report:
        cmd = "python -m mutation" + (f" --quick {args.quick}" if args.quick else "") + (
            "" if args.modules == list(TARGETS) else " --modules " + " ".join(args.modules)) + (
            " --operators " + " ".join(args.operators) if args.operators else "")
        REPORT.write_text(report(rows, (
            f"Written by `{cmd} --report` on {datetime.date.today().isoformat()}, on "
            f"commit {_commit()}, {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, {minutes:.0f} minutes with {args.jobs} jobs, "
            f"Hypothesis profile `mutation` (derandomized, 100 examples, no shrinking).\n"),
            "Survivors, and mutants only tests/ killed", "\n".join(printed)))
        print(f"wrote {REPORT.relative_to(ROOT)}")
    return 0


Row = dict[str, Any]


def from_log(names: list[str], write: bool = False) -> int:
    """The table for the runs that finished (a provisional survivor of properties/ whose
    run against tests/ did not finish counts as killed by neither: the runner runs it
    against tests/ next, so a stopped run has at most ``--jobs`` of them); with
    ``write``, the report of it."""
    results: dict[tuple[str, int], Outcome] = {}
    for line in (STATE / "progress.log").read_text().splitlines():
        fields = line.split("\t") if "\t" in line else line.split(" ", 4)
        name, status, scope, seconds, by = (fields + [""] * 5)[:5]
        module, _, number = name.partition(":")
        mutant = (module, int(number))
        if status == "survived properties/":
            results.setdefault(mutant, Outcome("survived", "", "", float(seconds)))
        else:
            results[mutant] = Outcome(status, by, scope, float(seconds))
    modules = {n: Module.load(n) for n in names}
    chosen = [k for k in results if k[0] in modules]
    known = equivalents()
    equivalent = {(n, i): known[key(m, e)] for n, m in modules.items()
                  for i, e in enumerate(m.mutants, 1) if key(m, e) in known}
    rows = table(names, modules, chosen, equivalent, results)
    printed = "\n".join(describe(modules[k[0]], k[1]) for k in chosen
                         if results[k].status in ("survived", "uncovered"))
    print(format_table(rows) + "\n" + printed)
    if write:
        REPORT.write_text(report(rows, (
            f"Written by `python -m mutation --from-log --report` on "
            f"{datetime.date.today().isoformat()} on commit {_commit()} from "
            f"`.mutation/progress.log`: the "
            f"{len(chosen)} mutants a run finished before it was stopped (its modules in "
            f"order, each module's in line order), Hypothesis profile `mutation` "
            f"(derandomized, 100 examples, no shrinking); a module's mutants that are "
            f"listed as equivalent were not run and are not counted.\n"),
            "Survivors (of properties/, where the run against tests/ did not finish)",
            printed))
        print(f"wrote {REPORT.relative_to(ROOT)}")
    return 0


def table(names: list[str], modules: dict[str, Module], chosen: list[tuple[str, int]],
          equivalent: dict[tuple[str, int], str], results: dict[tuple[str, int], Outcome]
          ) -> list[Row]:
    rows = []
    for n in names:
        mine = [results[k] for k in chosen if k[0] == n]
        killed_p = sum(1 for o in mine if o.status in ("killed", "timeout")
                       and o.scope == "properties")
        killed = sum(1 for o in mine if o.status in ("killed", "timeout"))
        rows.append({"module": n, "mutants": len(modules[n].mutants),
                     "equivalent": sum(1 for k in equivalent if k[0] == n), "run": len(mine),
                     "properties": killed_p, "suite": killed,
                     "timeouts": sum(1 for o in mine if o.status == "timeout"),
                     "uncovered": sum(1 for o in mine if o.status == "uncovered")})
    return rows


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def format_table(rows: list[Row]) -> str:
    head = ("| module | mutants | equivalent | run | killed by properties/ | "
            "killed by the suite | timeouts | reached by no test |")
    lines = [head, "|" + "---|" * 8]
    for r in [*rows, _total(rows)]:
        lines.append(f"| {r['module']} | {r['mutants']} | {r['equivalent']} | {r['run']} | "
                     f"{r['properties']} ({_pct(r['properties'], r['run'])}) | "
                     f"{r['suite']} ({_pct(r['suite'], r['run'])}) | {r['timeouts']} | "
                     f"{r['uncovered']} |")
    return "\n".join(lines)


def _total(rows: list[Row]) -> Row:
    out: Row = {"module": "**all**"}
    for k in ("mutants", "equivalent", "run", "properties", "suite", "timeouts", "uncovered"):
        out[k] = sum(r[k] for r in rows)
    return out


def _commit() -> str:
    """The commit the working tree is at (the code the log's run mutated, if it has not
    changed since)."""
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                         capture_output=True, text=True)
    return out.stdout.strip() or "(unknown)"


def report(rows: list[Row], header: str, title: str, printed: str) -> str:
    planted = PLANTED.read_text(encoding="utf-8") if PLANTED.exists() else ""
    return (f"# Mutation score\n\n{header}"
            f"A score is the share of the mutants run (the non-equivalent ones) that a test "
            f"kills.\n\n{format_table(rows)}\n\n## {title}\n\n```text\n{printed}\n```\n"
            + (f"\n{planted}" if planted else ""))


if __name__ == "__main__":
    sys.exit(main())

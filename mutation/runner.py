"""Running the mutants: a recording pass, then one forked process per mutant.

1. *Record* (a process of its own, cached in ``.mutation/`` by the sources' hash): the
   whole suite runs once under the ``mutation`` Hypothesis profile (``conftest.py``:
   derandomized, 100 examples, no shrinking) with every ``__mutant__`` a
   ``Recorder``; for each test, which mutants it reached and how long it took, and
   which mutants setting up a shared fixture reached (set up in the first test that
   asks for it: every test that uses it counts as reaching them).  A test
   that fails here stops the run: the gate must pass on the code as written.
2. *Mutate*: a pytest session imports the instrumented modules and collects the suite
   once; then for each mutant a forked child sets ``__mutant__`` and runs the tests that
   reached it — the ``properties/`` tests first, the tests that killed the most mutants
   of the module so far first — until one fails (killed) or all pass (survived).  A
   mutant in code that runs when its module is imported (a rule table, a constant, a
   default) cannot be switched on in a fork: its child starts a fresh interpreter with
   it switched on, and runs every test of the files that have a test reaching the
   module (a test may read a default and reach no mutant at run time).  (A function called
   while the tests are collected, to build an example, runs as written there: the
   tests themselves run with the mutant.)
   A child over its time limit (in CPU seconds: three times its tests' recorded time,
   plus 30 s), or one of whose tests is over its own (three times its recorded time
   and that of setting up the shared fixtures it uses, plus 10 s), is killed and the
   mutant counted as killed by a timeout (a mutant that makes a loop run away: stopped
   in the test that runs away, not after them all).
   The properties' survivors are then run against ``tests/`` too, for the whole
   suite's score.
"""

from __future__ import annotations

import ast
import faulthandler
import hashlib
import json
import os
import select
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mutation.operators import Edit, edits
from mutation.schemata import GLOBAL, Finder, Recorder, instrument

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".mutation"

# The modules under test (issue 12): the AD, rewrite and semantics code and the backend.
TARGETS: tuple[str, ...] = (
    "sdqlite.ad.fad", "sdqlite.ad.gradient", "sdqlite.syntax.sugar", "sdqlite.opt.rules",
    "sdqlite.opt.passes", "sdqlite.opt.debruijn", "sdqlite.opt.analysis", "sdqlite.opt.cost",
    "sdqlite.opt.storel", "sdqlite.opt.saturation", "sdqlite.opt.egraph", "sdqlite.opt.extract",
    "semantics.values", "semantics.interp",
    "codegen.api", "codegen.inputs", "codegen.results", "codegen.build", "codegen.data",
    "codegen.dps", "codegen.emit", "codegen.execute", "codegen.native", "codegen.fast",
)
SUITE = ("properties", "tests")
PYTEST_ARGS = ["-q", "-s", "-p", "no:cacheprovider", "-W", "ignore"]


def path_of(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


@dataclass
class Module:
    name: str
    source: str
    mutants: list[Edit]
    code: Any = None

    @classmethod
    def load(cls, name: str) -> Module:
        source = path_of(name).read_text(encoding="utf-8")
        tree = ast.parse(source)
        found = edits(source, tree)
        m = cls(name, source, found)
        m.code = compile(instrument(source, tree, found), str(path_of(name)), "exec")
        return m


def install(modules: Sequence[Module], initial: dict[str, object]) -> Finder:
    finder = Finder({m.name: (path_of(m.name), m.code) for m in modules}, initial)
    finder.install()
    return finder


def sources_hash() -> str:
    h = hashlib.sha256()
    """What the recording depends on: the code, the tests, and how mutants are made."""
    files = [ROOT / "mutation" / f for f in ("operators.py", "schemata.py", "runner.py")]
    for folder in ("sdqlite", "semantics", "codegen", "properties", "tests", "paper_examples"):
        files += sorted((ROOT / folder).rglob("*.py")) + sorted((ROOT / folder).rglob("*.sdql"))
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:20]


# ---- phase 1: the recording pass ---------------------------------------------------------


class RecordPlugin:
    def __init__(self, recorders: dict[str, Recorder]) -> None:
        self.recorders = recorders
        self.tests: dict[str, dict[str, Any]] = {}
        # what setting up a fixture shared by several tests reached: it is set up in the
        # first test that asks for it, yet every test that uses it depends on that code
        self.fixtures: dict[str, dict[str, set[int]]] = {}
        self.fixture_seconds: dict[str, float] = {}  # and how long setting it up took

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any) -> Iterator[None]:
        if fixturedef.scope == "function":  # set up anew in each test: its own hits
            yield
            return
        saved = {n: set(r.hits) for n, r in self.recorders.items()}
        for r in self.recorders.values():
            r.hits.clear()  # in place: the recorder's __eq__ is this set's add
        start = time.perf_counter()
        yield
        name = fixturedef.argname
        self.fixture_seconds[name] = max(self.fixture_seconds.get(name, 0.0),
                                         time.perf_counter() - start)
        for n, r in self.recorders.items():
            if r.hits:
                self.fixtures.setdefault(name, {}).setdefault(n, set()).update(r.hits)
            r.hits |= saved[n]

    def pytest_runtestloop(self, session: Any) -> bool:
        from _pytest.runner import runtestprotocol

        items = session.items
        for i, item in enumerate(items):
            for r in self.recorders.values():
                r.hits.clear()
            start = time.perf_counter()
            reports = runtestprotocol(item, nextitem=items[i + 1] if i + 1 < len(items)
                                      else None, log=False)
            self.tests[item.nodeid] = {
                "seconds": round(time.perf_counter() - start, 3),
                "failed": any(r.failed for r in reports),
                "hits": {n: sorted(r.hits) for n, r in self.recorders.items() if r.hits},
                "fixtures": list(item.fixturenames)}
            print(f"\rrecording: {i + 1}/{len(items)} tests", end="", file=sys.__stderr__,
                  flush=True)
        print(file=sys.__stderr__)
        return True


def record(modules: Sequence[Module]) -> dict[str, Any]:
    """Run the suite once with recorders (in this process: call it in a fresh one)."""
    import pytest

    recorders = {m.name: Recorder() for m in modules}
    install(modules, dict(recorders))
    plugin = RecordPlugin(recorders)
    pytest.main([*PYTEST_ARGS, *[str(ROOT / s) for s in SUITE]], plugins=[plugin])
    failed = [t for t, r in plugin.tests.items() if r["failed"]]
    fixtures = {f: {n: sorted(ids) for n, ids in hits.items()}
                for f, hits in plugin.fixtures.items() if hits}
    return {"tests": plugin.tests, "failed": failed, "fixtures": fixtures,
            "fixture_seconds": plugin.fixture_seconds}


# ---- phase 2: the mutants -------------------------------------------------------------------


@dataclass
class Job:
    module: str
    number: int  # 1-based, the mutant's position in its module's list
    tests: list[str]
    timeout: float
    fresh: bool  # evaluated at import: run in a fresh interpreter
    scope: str  # "properties" or "tests"


@dataclass
class Outcome:
    status: str  # killed | timeout | survived | uncovered
    by: str = ""  # the test that killed it
    scope: str = ""
    seconds: float = 0.0


@dataclass
class _Running:
    job: Job
    pid: int
    pipe: int
    deadline: float  # CPU seconds (the machine may be shared: wall time would lie)
    started: float
    output: bytes = b""  # the killing test, written by the child
    exit: int | None = None  # the exit code (-N: signal N); None: stopped over its time


@dataclass
class MutatePlugin:
    modules: dict[str, Module]
    recording: dict[str, Any]
    chosen: list[tuple[str, int]]  # (module, number) to run
    jobs: int
    results: dict[tuple[str, int], Outcome] = field(default_factory=dict)
    progress: Callable[[str], None] = lambda s: None

    def pytest_runtestloop(self, session: Any) -> bool:
        for m in self.modules.values():
            setattr(sys.modules[m.name], GLOBAL, 0)
        items = {item.nodeid: item for item in session.items}
        tests = self.recording["tests"]
        reached: dict[tuple[str, int], list[str]] = {}
        module_tests: dict[str, set[str]] = {}
        shared = self.recording.get("fixtures", {})
        for t, r in tests.items():
            hits = {n: set(ids) for n, ids in r["hits"].items()}
            for f in r.get("fixtures", []):  # what its shared fixtures' setup reached
                for n, ids in shared.get(f, {}).items():
                    hits.setdefault(n, set()).update(ids)
            for n, ids in hits.items():
                module_tests.setdefault(n, set()).add(t)
                for i in ids:
                    reached.setdefault((n, i), []).append(t)
        kills: dict[str, Counter[str]] = {n: Counter() for n in self.modules}

        # a value fixed at import (a default, a table) is read by tests that reach no
        # mutant at run time (``Limits().iter_limit == 30``): every test of a file with a
        # test that reaches the module may see it
        files = {n: {t.split("::")[0] for t in ts} for n, ts in module_tests.items()}

        def job(key: tuple[str, int], scope: str) -> Job | None:
            n, i = key
            fresh = self.modules[n].mutants[i - 1].at_import
            pool = ({t for t in tests if t.split("::")[0] in files.get(n, set())} if fresh
                    else set(reached.get(key, [])))
            chosen = [t for t in pool if t.startswith(scope + "/") and t in items]
            if not chosen:
                return None
            budget = sum(tests[t]["seconds"] for t in chosen)
            return Job(n, i, chosen, 3 * budget + 30 + (10 if fresh else 0), fresh, scope)

        queue: list[Job] = []
        for key in self.chosen:
            j = job(key, "properties")
            if j is None:
                later = job(key, "tests")
                if later is None:
                    self.results[key] = Outcome("uncovered")
                    _log(key, self.results[key])
                else:
                    queue.append(later)
            else:
                queue.append(j)
        total, done = len(queue), 0
        running: list[_Running] = []
        while queue or running:
            while queue and len(running) < self.jobs:
                # the tests that kill most come first: order each job when it starts
                j = queue.pop(0)
                j.tests.sort(key=lambda t: (-kills[j.module][t], tests[t]["seconds"]))
                running.append(self._start(j, items))
            r = self._wait(running)
            running.remove(r)
            key = (r.job.module, r.job.number)
            out = self._outcome(r)
            if out.status == "survived" and r.job.scope == "properties":
                later = job(key, "tests")
                if later is not None:
                    self.results[key] = out  # provisional: the properties' verdict
                    _log(key, Outcome("survived properties/", "", "", out.seconds))
                    queue.insert(0, later)  # next: a stopped run has whole verdicts
                    total += 1
                    done += 1
                    continue
            if r.job.scope == "tests" and key in self.results:
                prev = self.results[key]  # survived the properties
                out.scope = "tests" if out.status != "survived" else ""
                self.results[key] = Outcome(out.status, out.by, out.scope,
                                            prev.seconds + out.seconds)
            else:
                self.results[key] = out
            if out.by:
                kills[r.job.module][out.by] += 1
            _log(key, self.results[key])
            done += 1
            tally = Counter(o.status for o in self.results.values())
            self.progress(f"{done}/{total} runs: {dict(tally)}")
        return True

    def _start(self, j: Job, items: dict[str, Any]) -> _Running:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            try:
                os.close(read)
                os.setpgrp()
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                faulthandler.disable()  # pytest's writes to its own copy of stderr: a
                # mutant that crashes the process is killed, its stack not printed
                limits = {t: test_limit(self._seconds(t)) for t in j.tests}
                if j.fresh:
                    env = {**os.environ, "SDQLITE_MUTANT": f"{j.module}:{j.number}",
                           "SDQLITE_MUTANT_PIPE": str(write),
                           "SDQLITE_MUTANT_LIMITS": json.dumps(limits)}
                    os.set_inheritable(write, True)
                    os.execve(sys.executable, [sys.executable, "-m", "mutation.child",
                                               *j.tests], env)
                setattr(sys.modules[j.module], GLOBAL, j.number)
                _clear_caches()
                fresh_plans(f"{j.module}:{j.number}")
                os._exit(run_items([items[t] for t in j.tests], write, limits))
            except BaseException:
                os._exit(3)
        os.close(write)
        return _Running(j, pid, read, j.timeout, time.monotonic())

    def _seconds(self, test: str) -> float:
        """A test's recorded time, and that of setting up each shared fixture it uses
        (in a child, whichever test runs first sets them up)."""
        r = self.recording["tests"][test]
        setup: dict[str, float] = self.recording.get("fixture_seconds", {})
        return float(r["seconds"]) + sum(setup.get(f, 0.0) for f in r.get("fixtures", []))

    def _wait(self, running: list[_Running]) -> _Running:
        while True:
            for r in running:
                pid, status = os.waitpid(r.pid, os.WNOHANG)
                if pid:
                    r.output += _drain(r.pipe)
                    os.close(r.pipe)
                    r.exit = os.waitstatus_to_exitcode(status)
                    return r
                if _cpu_seconds(r.pid) > r.deadline:
                    os.killpg(r.pid, signal.SIGKILL)
                    os.waitpid(r.pid, 0)
                    os.close(r.pipe)
                    return r
            ready, _, _ = select.select([r.pipe for r in running], [], [], 0.05)
            for r in running:
                if r.pipe in ready:
                    r.output += _drain(r.pipe)

    def _outcome(self, r: _Running) -> Outcome:
        seconds = time.monotonic() - r.started
        if r.exit is None or r.exit == -signal.SIGPROF:  # over the run's or a test's limit
            return Outcome("timeout", "", r.job.scope, seconds)
        if r.exit == 0:
            return Outcome("survived", "", "", seconds)
        by = r.output.decode(errors="replace").strip().splitlines()
        return Outcome("killed", by[-1] if by else f"(exit {r.exit})", r.job.scope, seconds)


def _log(key: tuple[str, int], o: Outcome) -> None:
    """One line per finished run in ``.mutation/progress.log``: what a stopped run did."""
    with open(STATE / "progress.log", "a") as log:
        log.write(f"{key[0]}:{key[1]}\t{o.status}\t{o.scope}\t{o.seconds:.1f}\t{o.by}\n")


def _cpu_seconds(pid: int) -> float:
    """The CPU time of a process and of its children it has waited for (g++)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _drain(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


def fresh_plans(mutant: str) -> None:
    """A mutant's run makes its optimized programs anew: a plan stored by the unmutated
    recording (``codegen/plans.py``, keyed by the sources on disk, which a planted mutant
    leaves as they are) hid the optimizer's mutants from every test that compiles.  The
    plans a mutant stores are its own (their key names it), and found again within its
    run: a test that a second call reuses the first's plan holds under a mutant too (with
    no plan ever found, it failed for every mutant it reached, a kill that was not)."""
    import codegen.plans

    sources = codegen.plans.version

    def version() -> str:
        return f"{sources()}+{mutant}"

    setattr(codegen.plans, "version", version)  # noqa: B010 - a module's function, replaced


def _clear_caches() -> None:
    """Results the parent computed while collecting must be computed again."""
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] in ("sdqlite", "semantics", "codegen"):
            for value in list(vars(mod).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def test_limit(recorded: float) -> float:
    """A test's own limit in CPU seconds: three times its recorded time, plus 10 s."""
    return 3 * recorded + 10


def run_items(items: Iterable[Any], pipe: int, limits: dict[str, float] | None = None
              ) -> int:
    """Run test items in order; the first failure is written to ``pipe``: exit 1.  A test
    over its limit in ``limits`` (CPU seconds) ends the process by SIGPROF."""
    from _pytest.runner import runtestprotocol

    items = list(items)
    for i, item in enumerate(items):
        if limits and item.nodeid in limits:
            signal.setitimer(signal.ITIMER_PROF, limits[item.nodeid])
        reports = runtestprotocol(item, nextitem=items[i + 1] if i + 1 < len(items) else None,
                                  log=False)
        signal.setitimer(signal.ITIMER_PROF, 0)
        if any(r.failed for r in reports):
            os.write(pipe, (item.nodeid + "\n").encode())
            return 1
    return 0


def load_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None

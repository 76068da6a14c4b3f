"""Every snippet of README.md and of the reference pages (``docs/reference/*.md``) runs as
written and prints what the page shows.

Each fenced block carries a tag, and the tag says how it is checked:

- ``python``: run in a fresh namespace, with the repository as working directory;
- ``sh``: each line is a command (``#`` starts a comment); what it prints is not shown;
- ``console``: ``$ `` lines are commands, and the lines up to the next ``$ `` are what the
  command prints: its stdout, or its stderr when the output shown is an error (exit
  status 1). ``$ sdqlite repl`` is followed by a transcript: ``sdql> `` and ``  ... ``
  lines are what is typed, the other lines what the REPL answers;
- ``sdql``: a program or declarations, parsed and type-checked;
- ``text``: output that cannot be reproduced (timings); not run.

A command ``sdqlite ARGS`` runs in-process through ``sdqlite.ui.cli.main``, the repository
as working directory; ``A | B`` feeds A's stdout to B, ``< FILE`` is B's stdin. Commands
that set up the machine (``make``, ``sudo apt-get``, ``pip``) are not run here: ``make``
runs this suite, and the others change the system.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sdqlite.check.typecheck import typecheck
from sdqlite.syntax.parser import parse_program
from sdqlite.ui.cli import main
from sdqlite.ui.repl import BANNER

HERE = Path(__file__).resolve().parent.parent
README = HERE / "README.md"
PAGES = [README, *sorted((HERE / "docs" / "reference").glob("*.md"))]
SETUP = {"make", "sudo", "apt-get", "pip"}  # not run: see the module docstring
TAGS = {"python", "sh", "console", "sdql", "text"}


@dataclass(frozen=True)
class Block:
    tag: str
    text: str
    line: int  # of the opening fence, 1-based
    page: str = "README.md"

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.tag})"


def blocks() -> list[Block]:
    return [b for page in PAGES for b in _blocks(page)]


def _blocks(page: Path) -> list[Block]:
    out, lines = [], page.read_text(encoding="utf-8").splitlines()
    name = str(page.relative_to(HERE))
    i = 0
    while i < len(lines):
        fence = re.fullmatch(r"( *)```(\S*)", lines[i])
        if fence is None:
            i += 1
            continue
        indent, start = len(fence.group(1)), i
        i += 1
        body = []
        while lines[i].strip() != "```":
            body.append(lines[i][indent:])
            i += 1
        out.append(Block(fence.group(2), "\n".join(body) + "\n", start + 1, name))
        i += 1
    return out


def of(tag: str) -> list[Block]:
    return [b for b in blocks() if b.tag == tag]


@contextlib.contextmanager
def in_repository() -> Iterator[None]:
    cwd = os.getcwd()
    os.chdir(HERE)
    try:
        yield
    finally:
        os.chdir(cwd)


def sdqlite(argv: list[str], stdin: str = "", merge: bool = False) -> tuple[int, str, str]:
    """Run ``sdqlite ARGV`` in-process: exit status, stdout, stderr (into stdout when
    ``merge``, in the order they were written, as a terminal shows them)."""
    out, err = io.StringIO(), io.StringIO()
    saved, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out if merge else err):
            try:
                code = main(argv)
            except SystemExit as stop:  # --help, --version
                code = int(stop.code or 0)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def run_command(line: str) -> tuple[int, str, str] | None:
    """Run one command line; None when it is a set-up command, not run here."""
    words = shlex.split(line, comments=True)
    if not words or words[0] in SETUP:
        return None
    stdin, result = "", None
    stages = [list(g) for g in _split(words, "|")]
    for n, stage in enumerate(stages, 1):
        if "<" in stage:
            at = stage.index("<")
            stdin = (HERE / stage[at + 1]).read_text(encoding="utf-8")
            stage = stage[:at] + stage[at + 2:]
        assert stage[0] == "sdqlite", f"not an sdqlite command: {line!r}"
        result = sdqlite(stage[1:], stdin)
        assert result[0] == 0 or n == len(stages), f"{line!r}: {result[2]}"
        stdin = result[1]
    return result


def _split(words: list[str], sep: str) -> Iterator[list[str]]:
    group: list[str] = []
    for w in words:
        if w == sep:
            yield group
            group = []
        else:
            group.append(w)
    yield group


pytestmark = pytest.mark.usefixtures("quick_builds")


def test_every_block_has_a_known_tag() -> None:
    found = blocks()
    assert len(found) > 10
    assert [str(b) for b in found if b.tag not in TAGS] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_pages_point_only_inside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "../" not in text and "shared/" not in text
    for path in re.findall(r"`([\w./-]+/[\w.-]+\.(?:py|sdql|h|lark|txt|npy|mtx|md))`", text):
        assert (HERE / path).is_file(), path
    for path in re.findall(r"\]\(([^)#:]+)\)", text):  # links and pictures
        assert (page.parent / path).exists(), path


@pytest.mark.parametrize("block", of("python"), ids=str)
def test_python_block(block: Block) -> None:
    with in_repository():
        exec(compile(block.text, str(block), "exec"), {"__name__": "readme"})


@pytest.mark.parametrize("block", of("sh"), ids=str)
def test_sh_block(block: Block) -> None:
    with in_repository():
        for line in block.text.splitlines():
            result = run_command(line)
            assert result is None or result[0] == 0, f"{line!r}: {result[2]}"


def _console(text: str) -> Iterator[tuple[str, list[str]]]:
    command: str | None = None
    shown: list[str] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            if command is not None:
                yield command, shown
            command, shown = line[2:], []
        else:
            shown.append(line)
    assert command is not None
    yield command, shown


@pytest.mark.parametrize("block", of("console"), ids=str)
def test_console_block(block: Block) -> None:
    with in_repository():
        for command, shown in _console(block.text):
            if command == "sdqlite repl":
                _transcript(shown)
                continue
            result = run_command(command)
            assert result is not None, command
            code, out, err = result
            error = bool(shown) and ": error: " in shown[0]
            assert code == (1 if error else 0), f"{command!r}: {err}"
            assert (err if error else out).splitlines() == shown, command


def _transcript(shown: list[str]) -> None:
    """Type the transcript's entries into the REPL; it answers what the README shows."""
    if shown[:1] == [BANNER]:  # printed only on a terminal
        shown = shown[1:]
    typed = [s.removeprefix("sdql> ").removeprefix("  ... ") for s in shown
             if s.startswith(("sdql> ", "  ... "))]
    answers = [s for s in shown if not s.startswith(("sdql> ", "  ... "))]
    code, out, _ = sdqlite(["repl"], "\n".join(typed) + "\n", merge=True)
    assert code == 0
    assert out.splitlines() == answers


@pytest.mark.parametrize("block", of("sdql"), ids=str)
def test_sdql_block(block: Block) -> None:
    prog = parse_program(block.text)
    ctx = {d.name: d.type for d in prog.decls}
    if prog.expr is not None:
        typecheck(prog.expr, ctx)


def test_make_bench_writes_the_readmes_table_between_its_markers() -> None:
    """The README's "How fast" table is written by ``benchmarks/kernels.py --readme`` from
    the figures of its run, between two markers that the README holds once each."""
    from benchmarks.kernels import BEGIN, END, Row, table, with_table  # (imports sdqlite)

    text = README.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    row = Row(10**5, 1e-3, 9_990_000, 0.0113, {"dict": 36.6, "arr": 3.3, "arr-no-norm": 3.4,
                                                "arr-no-dps": 30.0, "arr-2t": 1.9,
                                                "arr C++": 0.97}, (12.25, 8.0))
    written = with_table(text, table({"SMVM": row}, (2.5, 2.7, 0.24, 15_400_000, 900, 700), 5,
                                          "0.50 at the start, 0.60 at the end"))
    assert written.replace(written[written.index(BEGIN):written.index(END)], "") == \
        text.replace(text[text.index(BEGIN):text.index(END)], "")  # nothing else changes
    assert ("| SMVM, the column sums of A | 10⁵ | 10⁻³ | 9,990,000 | 11.3 ms | 36.60× | "
            "3.30× | 1.90× | 0.97× | 12.2 / 8.0 |") in written
    assert "2.50 s in \"arr\", 2.70 s in \"dict\", 0.24 s for scipy's" in written
    assert "peak memory 900 MiB in \"arr\", 700 MiB for scipy" in written
    assert "load average 0.50 at the start, 0.60 at the end" in written
    assert with_table(written, "again") == with_table(text, "again")


def test_make_bench_times_a_kernel_alone_with_its_workspaces() -> None:
    """``make bench``'s "kernel alone" column calls the built kernel as the front door
    would, its workspaces' sizes given (SMMM's column sums are one; n = 50 here): once
    through ctypes, its value the formula's; then in a loop from C (``kernel_timer.cpp``),
    which leaves its dense destination holding the same value, or frees each output it
    was handed (VVA's CSR identity)."""
    import numpy as np

    from benchmarks.kernels import KERNELS, KernelAlone, agree, compiled

    k = KERNELS["SMMM"]
    data = k.data(50, 0.1, np.random.default_rng(0))
    f = compiled(k, "arr")
    assert "sdql::work<double>" in f.cpp(data)
    want = k.formula(data)
    assert agree(f(**data).toarray(), want.toarray())
    alone = KernelAlone(f, data)
    out = np.asarray(alone.once()[-1]).ravel()  # (dense, or CSR's values last)
    assert np.allclose(np.sort(out[out != 0]), np.sort(want.data[want.data != 0]))
    alone.run(3)
    assert alone.zeroed[1] == alone.dest.nbytes > 0
    assert np.allclose(np.sort(alone.dest[alone.dest != 0]), np.sort(want.data[want.data != 0]))
    k = KERNELS["VVA"]
    data = k.data(50, 0.1, np.random.default_rng(0))
    alone = KernelAlone(compiled(k, "arr"), data)
    live = alone.native.live()
    alone.run(5)
    assert alone.zeroed == (None, 0) and alone.native.live() == live
    pos, idx, val = alone.once()[2:]  # (after the outer layer's [0, n] and [0])
    assert list(pos) == list(range(51)) and list(idx) == list(range(50))
    assert np.all(val == 1.0)


def test_make_bench_measures_what_two_threads_do_at_once() -> None:
    """The header of ``make bench`` says how much two threads of arithmetic do at once
    against one (``two_cores``), the host's share of the threads column: each of the
    ``threads`` threads of ``sdql_spin`` runs the whole chain (its sum is Python's, step for
    step: the same IEEE operations), and the ratio is at most about two on any host."""
    from benchmarks.kernels import _library, two_cores

    def chain(x: float, steps: int) -> float:
        for _ in range(steps):
            x = x * 0.9999999 + 1e-7
        return x

    spin = _library().sdql_spin
    assert spin(3, 1000) == chain(1.0, 1000) + chain(2.0, 1000) + chain(3.0, 1000)
    assert spin(1, 0) == 1.0
    assert 0.3 < two_cores(repeat=3, steps=200_000) < 2.6

"""The tutorial's exercises (``docs/tutorial/*.md``): every solution passes its check, and
every check rejects a wrong answer.

A chapter is a MyST notebook (read with jupytext).  Its cells tagged ``setup`` run first;
then each exercise is a run of cells: ``given`` (what the exercise hands the reader),
``wrong`` (a plausible wrong answer, not shown on the site), ``solution`` (shown folded)
and ``check``.  The test runs, in IPython (``%%sdql`` cells included), the setup, the
given cells and the wrong answer, and asserts that the check fails by an assertion;
then, in a fresh namespace, the setup, the given cells and the solution, and asserts
that the check passes.  ``make docs`` executes every chapter whole as well.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import pytest
from IPython.core.interactiveshell import InteractiveShell

pytestmark = pytest.mark.usefixtures("quick_builds")  # (-O0: chapter 7 compiles)
TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "tutorial"
CHAPTERS = sorted(TUTORIAL.glob("*.md"))
ROLES = ("given", "wrong", "solution", "check")


@dataclass
class Exercise:
    chapter: str
    number: int
    cells: dict[str, list[str]] = field(default_factory=lambda: {r: [] for r in ROLES})

    def __str__(self) -> str:
        return f"{self.chapter} #{self.number}"


def _cells(path: Path) -> Iterator[tuple[set[str], str]]:
    for cell in jupytext.read(path, fmt="md:myst").cells:
        if cell.cell_type == "code":
            yield set(cell.metadata.get("tags", [])), cell.source


def setup_cells(path: Path) -> list[str]:
    return [source for tags, source in _cells(path) if "setup" in tags]


def exercises(path: Path) -> list[Exercise]:
    out, current = [], Exercise(path.stem, 1)
    for tags, source in _cells(path):
        for role in ROLES:
            if role in tags:
                current.cells[role].append(source)
        if "check" in tags:
            out.append(current)
            current = Exercise(path.stem, len(out) + 1)
    return out


ALL = [e for path in CHAPTERS for e in exercises(path)]


@pytest.fixture
def shell(ipython: InteractiveShell) -> InteractiveShell:
    return ipython


def run(shell: InteractiveShell, source: str) -> BaseException | None:
    result = shell.run_cell(source, silent=True)
    error: BaseException | None = result.error_before_exec or result.error_in_exec
    return error


def test_there_are_eight_chapters_of_two_or_three_exercises_each() -> None:
    assert len(CHAPTERS) == 8
    for path in CHAPTERS:
        found = exercises(path)
        assert 2 <= len(found) <= 3, (path.name, len(found))
        for e in found:
            assert e.cells["wrong"] and e.cells["solution"] and len(e.cells["check"]) == 1, e
        assert setup_cells(path), f"{path.name} has no setup cell"


@pytest.mark.parametrize("exercise", ALL, ids=str)
def test_the_check_rejects_the_wrong_answer_and_accepts_the_solution(
        shell: InteractiveShell, exercise: Exercise) -> None:
    """The check fails on the wrong answer by an assertion (not by an accident of the
    answer's shape), and passes on the solution, each run from a fresh namespace."""
    here = Path.cwd()
    os.chdir(TUTORIAL)  # (as the build runs them)
    try:
        rejected = run_exercise(shell, exercise, "wrong")
        assert isinstance(rejected, AssertionError), (
            f"{exercise}: the check does not reject the wrong answer by an assertion: "
            f"{rejected!r}")
        accepted = run_exercise(shell, exercise, "solution")
        assert accepted is None, f"{exercise}: the solution fails its check: {accepted!r}"
    finally:
        os.chdir(here)


def run_exercise(shell: InteractiveShell, exercise: Exercise, answer: str
                 ) -> BaseException | None:
    """The chapter's setup, the exercise's given cells and an answer, in a fresh
    namespace; then the check: its error, if any."""
    shell.reset(new_session=False)
    setup = setup_cells(TUTORIAL / f"{exercise.chapter}.md")
    for source in setup + exercise.cells["given"] + exercise.cells[answer]:
        assert run(shell, source) is None, source
    return run(shell, exercise.cells["check"][0])

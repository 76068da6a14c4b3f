"""Every paper example agrees with its independently computed (numpy/scipy) expectation."""

import pytest

from paper_examples.__main__ import main, run_example
from paper_examples.catalog import EXAMPLES, Example


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example_agrees_with_numpy(ex: Example) -> None:
    assert run_example(ex, verbose=False)


def test_runner_reports_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main() == 0
    out = capsys.readouterr().out
    assert f"{len(EXAMPLES)} of {len(EXAMPLES)} paper examples agree" in out

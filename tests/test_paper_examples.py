"""Every paper example agrees with its independently computed (numpy/scipy) expectation."""

import pytest

from paper_examples.__main__ import main, run_example
from paper_examples.catalog import EXAMPLES, Example
from paper_examples.differentiation import AD_EXAMPLES, ADExample, run_ad_example
from paper_examples.optimization import OPT_EXAMPLES, OptExample, run_opt_example
from sdqlite.syntax.printer import show


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example_agrees_with_numpy(ex: Example) -> None:
    assert run_example(ex, verbose=False)


@pytest.mark.parametrize("ex", AD_EXAMPLES, ids=lambda e: e.name)
def test_differentiation_example(ex: ADExample) -> None:
    out = run_ad_example(ex)
    assert out.matches_paper, show(out.transformed)
    assert out.agrees, (out.value, out.expected)


@pytest.mark.parametrize("ex", OPT_EXAMPLES, ids=lambda e: e.name)
def test_optimization_example(ex: OptExample) -> None:
    out = run_opt_example(ex)
    assert out.agrees
    assert out.reached, show(out.result)


def test_runner_reports_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main() == 0
    out = capsys.readouterr().out
    assert f"{len(EXAMPLES)} of {len(EXAMPLES)} paper examples agree" in out
    n = len(AD_EXAMPLES)
    assert f"{n} of {n} differentiation examples match the paper's listings" in out

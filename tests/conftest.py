"""Fixtures shared by the example-based tests."""

import os

import pytest


@pytest.fixture
def quick_builds(tmp_path_factory: pytest.TempPathFactory,
                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled code builds at -O1 into a cache of this test run's own, unless one is
    given (a file asks for it with ``pytestmark = pytest.mark.usefixtures("quick_builds")``)."""
    monkeypatch.setenv("SDQLITE_CXXFLAGS", os.environ.get("SDQLITE_CXXFLAGS", "-O1"))
    monkeypatch.setenv("SDQLITE_CACHE", os.environ.get(  # a cache given (make mutation's)
        "SDQLITE_CACHE", str(tmp_path_factory.getbasetemp() / "cpp-cache")))


@pytest.fixture(scope="session")
def ipython() -> object:
    """IPython's testing shell (one per process: ``start_ipython`` makes it the first
    time, and ``get_ipython`` finds it after)."""
    os.environ.setdefault("MPLBACKEND", "Agg")  # (the tutorial draws; no screen here)
    from IPython.testing import globalipapp

    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    assert shell is not None
    return shell

"""Fixtures shared by the example-based tests."""

import os
from pathlib import Path

import pytest

from codegen.build import QUICK_FLAGS


@pytest.fixture
def quick_builds(build_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled code builds at ``QUICK_FLAGS`` (-Og) into the run's cache of such builds
    (``build_cache``), unless flags or a cache are given (``make mutation`` gives one cache
    to all its runs); a file asks for it with
    ``pytestmark = pytest.mark.usefixtures("quick_builds")``."""
    monkeypatch.setenv("SDQLITE_CXXFLAGS", os.environ.get("SDQLITE_CXXFLAGS", QUICK_FLAGS))
    monkeypatch.setenv("SDQLITE_CACHE", os.environ.get("SDQLITE_CACHE", str(build_cache)))


@pytest.fixture(scope="session")
def ipython() -> object:
    """IPython's testing shell (one per process: ``start_ipython`` makes it the first
    time, and ``get_ipython`` finds it after)."""
    os.environ.setdefault("MPLBACKEND", "Agg")  # (the tutorial draws; no screen here)
    from IPython.testing import globalipapp

    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    assert shell is not None
    return shell

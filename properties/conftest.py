"""Fixtures shared by the properties that build C++."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from codegen.build import QUICK_FLAGS


@pytest.fixture(scope="module")
def quick_builds(build_cache: Path) -> Iterator[None]:
    """Quick builds (``QUICK_FLAGS``) in this test run's own cache, one for the files that
    ask (unless the flags or the cache are given: ``make mutation`` gives one cache to all
    its runs), so that its precompiled runtime is made once.  A file asks for it with
    ``pytestmark = pytest.mark.usefixtures("quick_builds")``."""
    saved = {k: os.environ.get(k) for k in ("SDQLITE_CXXFLAGS", "SDQLITE_CACHE")}
    os.environ.setdefault("SDQLITE_CXXFLAGS", QUICK_FLAGS)
    os.environ.setdefault("SDQLITE_CACHE", str(build_cache))
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v

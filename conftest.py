"""Hypothesis profiles for the whole suite (properties/ and tests/).

* ``dev`` (default on a workstation): 100 examples per property, random;
* ``ci`` (default when CI is set): 100 examples (Hypothesis's own default), derandomized,
  so a CI run is reproducible (and fits in CI's 20 minutes on two cores; ``thorough``
  goes twenty times deeper);
* ``thorough``: 2000 examples per property, for deep runs;
* ``sanitize``: 40 examples, derandomized, for the C++ agreement property built with the
  sanitizers (``make sanitize``, run by ``make test``);
* ``mutation``: derandomized, 100 examples and no shrinking, for ``make mutation``: a
  mutant's run stops at the first failing example instead of shrinking it, and a
  surviving mutant, which runs every test that reaches it, costs what ``ci`` costs.

Choose with HYPOTHESIS_PROFILE=dev|ci|thorough (``make test PROFILE=thorough``).
"""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("dev", max_examples=100, **_common)
settings.register_profile("ci", max_examples=100, derandomize=True, database=None,
                          print_blob=True, **_common)
settings.register_profile("thorough", max_examples=2000, **_common)
settings.register_profile("sanitize", max_examples=40, derandomize=True, database=None,
                          print_blob=True, **_common)
settings.register_profile("mutation", settings.get_profile("ci"), max_examples=100,
                          phases=[Phase.explicit, Phase.generate])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI")
                                                               else "dev"))


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This test run's cache of quick (-Og) builds, one for all its processes: pytest-xdist
    gives each worker a directory of the run's own, and the cache is safe to share, so each
    kernel and the precompiled runtime are built once a run, not once a worker."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "cpp-cache-Og"

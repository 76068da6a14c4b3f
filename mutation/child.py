"""A mutant evaluated when its module is imported, run in a fresh interpreter:
``SDQLITE_MUTANT=module:number python -m mutation.child TEST...`` (started by the runner,
which reads the failing test from the pipe ``SDQLITE_MUTANT_PIPE``)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from mutation.runner import PYTEST_ARGS, Module, fresh_plans, install, run_items


class _Plugin:
    def __init__(self, pipe: int) -> None:
        self.pipe, self.code = pipe, 0

    def pytest_runtestloop(self, session: Any) -> bool:
        limits = json.loads(os.environ.get("SDQLITE_MUTANT_LIMITS", "{}"))
        self.code = run_items(session.items, self.pipe, limits)
        return True


def main() -> int:
    import pytest

    module, number = os.environ["SDQLITE_MUTANT"].split(":")
    install([Module.load(module)], {module: int(number)})
    fresh_plans(f"{module}:{number}")
    plugin = _Plugin(int(os.environ["SDQLITE_MUTANT_PIPE"]))
    code = pytest.main([*PYTEST_ARGS, *sys.argv[1:]], plugins=[plugin])
    return plugin.code or (2 if code not in (0, 5) else 0)


if __name__ == "__main__":
    sys.exit(main())

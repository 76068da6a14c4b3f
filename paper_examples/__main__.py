"""Run the paper's examples: print each program, its type and its result, and compare
the result with the expectation computed independently by numpy/scipy."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from paper_examples.catalog import EXAMPLES, Example
from paper_examples.codegen import CPP_EXAMPLES, HERE, report_cpp
from paper_examples.differentiation import AD_EXAMPLES, report
from paper_examples.optimization import OPT_EXAMPLES, report_opt
from sdqlite.errors import SDQLiteError, format_error
from sdqlite.syntax.parser import parse_program
from sdqlite.syntax.printer import show
from semantics.display import show_value
from semantics.run import run
from semantics.values import values_equal

SEED = 20231


def run_example(ex: Example, *, verbose: bool = True) -> bool:
    """Run one example; True when its result agrees with the expectation."""
    text = ex.path.read_text(encoding="utf-8")
    data = ex.data(np.random.default_rng(SEED))
    prog = parse_program(text)
    result = run(prog, ex.inputs(data))
    expected = ex.expected(data)
    ok = values_equal(result.value, expected, rel_tol=ex.rel_tol, abs_tol=1e-12)
    if verbose:
        print(f"== {ex.name}: {ex.title}")
        for d in prog.decls:
            print(f"  {d.name} : {d.type}")
        assert prog.expr is not None
        print("  " + show(prog.expr).replace("\n", "\n  "))
        print(f"  : {result.type}")
        print(f"  = {_short(show_value(result.value))}")
        print(f"  {'OK' if ok else 'MISMATCH'}: agrees with numpy/scipy"
              if ok else f"  MISMATCH: expected {_short(show_value(expected))}")
        print()
    return ok


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


def _passes(run: Callable[[], bool], path: Path) -> bool:
    """Run an example; an SDQLite error is reported against its source file."""
    try:
        return run()
    except SDQLiteError as err:
        print(format_error(err, path.read_text(encoding="utf-8"), str(path)), file=sys.stderr)
        return False


def catalog() -> list[tuple[str, list[tuple[str, str]]]]:
    """The examples' names and titles, by kind, in the order they run."""
    return [("the paper's listings against numpy/scipy", [(e.name, e.title) for e in EXAMPLES]),
            ("differentiation", [(e.name, e.title) for e in AD_EXAMPLES]),
            ("optimization", [(e.name, e.title) for e in OPT_EXAMPLES]),
            ("code generation (§5.5)", [(e.name, e.title) for e in CPP_EXAMPLES])]


def describe() -> str:
    """The names to give ``sdqlite examples``, one per line with its title."""
    groups = catalog()
    width = max(len(name) for _, items in groups for name, _ in items)
    lines = ["examples (all of them when no NAME is given):"]
    for kind, items in groups:
        lines.append(f"  {kind}:")
        lines += [f"    {name:<{width}}  {title}" for name, title in items]
    return "\n".join(lines)


def main(names: Sequence[str] = ()) -> int:
    chosen = [e for e in EXAMPLES if not names or e.name in names]
    chosen_ad = [e for e in AD_EXAMPLES if not names or e.name in names]
    chosen_opt = [e for e in OPT_EXAMPLES if not names or e.name in names]
    chosen_cpp = [e for e in CPP_EXAMPLES if not names or e.name in names]
    known = [name for _, items in catalog() for name, _ in items]
    unknown = set(names) - set(known)
    if unknown:
        print(f"sdqlite examples: error: unknown example {', '.join(sorted(unknown))} "
              "(`sdqlite examples --help` lists them)", file=sys.stderr)
        return 2
    failed = [ex.name for ex in chosen
              if not _passes(lambda: run_example(ex), ex.path)]  # noqa: B023
    failed_ad = [ex.name for ex in chosen_ad if not report(ex)]
    failed_opt = [ex.name for ex in chosen_opt if not report_opt(ex)]
    failed_cpp = [cx.name for cx in chosen_cpp
                  if not _passes(lambda: report_cpp(cx), HERE / cx.source)]  # noqa: B023
    print(f"{len(chosen) - len(failed)} of {len(chosen)} paper examples agree with "
          "their numpy/scipy expectations" + (f"; failed: {', '.join(failed)}" if failed else ""))
    if chosen_ad:
        print(f"{len(chosen_ad) - len(failed_ad)} of {len(chosen_ad)} differentiation examples "
              "match the paper's listings and agree with the sympy oracle"
              + (f"; failed: {', '.join(failed_ad)}" if failed_ad else ""))
    if chosen_opt:
        print(f"{len(chosen_opt) - len(failed_opt)} of {len(chosen_opt)} optimization examples "
              "reach the paper's program and keep the meaning of their input"
              + (f"; failed: {', '.join(failed_opt)}" if failed_opt else ""))
    if chosen_cpp:
        print(f"{len(chosen_cpp) - len(failed_cpp)} of {len(chosen_cpp)} code generation "
              "examples (§5.5) reach the paper's program, build no dictionary in inner loops "
              "and agree with numpy/scipy"
              + (f"; failed: {', '.join(failed_cpp)}" if failed_cpp else ""))
    return 1 if failed or failed_ad or failed_opt or failed_cpp else 0


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(f"usage: python -m paper_examples [NAME ...]\n\n{describe()}")
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))

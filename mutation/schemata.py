"""Mutant schemata: every mutant of a module compiled into one copy of it, each behind a
test of the module's global ``__mutant__`` (Untch et al.'s "mutant schemata").

An expression with mutants becomes ``(m1 if __mutant__ == 1 else ... else original)``, a
statement ``if __mutant__ == 7: mutated else: original``, and an arm of a ``match``
that may be skipped gets the guard ``not __mutant__ == 9``.  With ``__mutant__ = 0`` the
module behaves as written; a forked process sets the number of the mutant it tests.
With ``__mutant__`` a ``Recorder``, every test of it records that its mutant was
reached (and the module behaves as written): that is the coverage the runner uses to
choose tests.

A meta-path finder serves the instrumented source for the modules under test, so the
files on disk are never changed.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from mutation.operators import Edit, Mut

GLOBAL = "__mutant__"


class Recorder:
    """A stand-in for the mutant number that records which mutants are reached:
    ``recorder == n`` adds ``n`` to ``hits`` and is falsy.  Its ``__eq__`` is the set's
    own (C) ``add``, which Python calls without ``self`` and which returns None: the
    recording costs little in the hot loops of the e-graph and the interpreter."""

    def __new__(cls) -> Recorder:
        hits: set[int] = set()
        kind = type("Recorder", (cls,), {"__eq__": hits.add, "__hash__": None})
        r: Recorder = object.__new__(kind)
        r.hits = hits
        return r

    hits: set[int]


def _is(number: int, op: ast.cmpop) -> ast.Compare:
    return ast.Compare(ast.Name(GLOBAL, ast.Load()), [op], [ast.Constant(number)])


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


class _Instrument(ast.NodeTransformer):
    def __init__(self, by_target: dict[int, list[tuple[int, Mut]]]) -> None:
        self.by_target = by_target

    def visit(self, node: ast.AST) -> Any:
        muts = self.by_target.get(id(node), [])
        new: Any = self.generic_visit(node)  # the original, its own parts instrumented
        for number, m in reversed(muts):
            if isinstance(node, ast.match_case):
                new.guard = ast.UnaryOp(ast.Not(), _is(number, ast.Eq()))
            elif isinstance(node, ast.expr):
                new = ast.IfExp(_is(number, ast.Eq()), _expr(m.text), new)
            else:
                assert isinstance(node, ast.stmt)
                mutated = ast.parse(m.text).body
                new = ast.If(_is(number, ast.Eq()), mutated,
                             new if isinstance(new, list) else [new])
        return new


def instrument(source: str, tree: ast.Module, mutants: Sequence[Edit]) -> ast.Module:
    """``tree`` (parsed from ``source``, the tree ``mutants`` were found in) with mutant
    number ``i + 1`` behind ``__mutant__ == i + 1``."""
    by_target: dict[int, list[tuple[int, Mut]]] = {}
    for i, e in enumerate(mutants):
        by_target.setdefault(id(e.mut.target), []).append((i + 1, e.mut))
    out = _Instrument(by_target).visit(tree)
    return ast.fix_missing_locations(out)  # type: ignore[no-any-return]


class _Loader(importlib.abc.Loader):
    def __init__(self, code: Any, initial: object) -> None:
        self.code, self.initial = code, initial

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        setattr(module, GLOBAL, self.initial)
        exec(self.code, module.__dict__)


class Finder(importlib.abc.MetaPathFinder):
    """Serves the instrumented modules; ``initial`` is ``__mutant__`` at import."""

    def __init__(self, codes: dict[str, tuple[Path, Any]], initial: dict[str, object]
                 ) -> None:
        self.codes, self.initial = codes, initial

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.codes:
            return None
        file, code = self.codes[fullname]
        return importlib.util.spec_from_file_location(
            fullname, file, loader=_Loader(code, self.initial.get(fullname, 0)))

    def install(self) -> None:
        sys.meta_path.insert(0, self)

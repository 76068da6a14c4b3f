"""Optimized programs cached beside the shared objects, so that a second process pays
neither the saturations nor g++ (issue: the first call of every new process spent 10-24 s
in equality saturation although its object was cached).

A plan is what the pipeline made of one program for one choice of input types, kinds and
formats: every stage's program, context and report, the formats' flat arrays, the result's
sizes.  It is stored as text (JSON, the programs printed as SDQLite, the types as types),
named by a hash of everything that decides it: the program and its declarations, the
variable of differentiation, the options and limits, the inputs' types (sizes included),
kinds and formats, and the sources of this package's optimizer and backend (a new version
optimizes anew).  A stage read back took this process no time (its ``seconds`` are 0).
Programs come back through the parser and the checker, with their spans in the source
(stored beside them, pre-order: an error at run time points at the user's text, not at
the printed program's); an entry that does not read back (truncated, edited, another
version's) is ignored and written again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from codegen.build import cache_dir
from sdqlite.check.typecheck import typecheck
from sdqlite.errors import SDQLiteError, Span
from sdqlite.opt.pipeline import Stage
from sdqlite.syntax.ast import Expr, map_children, subterms
from sdqlite.syntax.parser import parse_expr, parse_type
from sdqlite.syntax.printer import show
from sdqlite.syntax.types import Type

ROOT = Path(__file__).resolve().parent.parent


@cache
def version() -> str:
    """A hash of the sources that decide an optimized program: sdqlite/ and codegen/."""
    digest = hashlib.sha256()
    for folder in ("sdqlite", "codegen"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".lark", ".h") and "__pycache__" not in path.parts:
                digest.update(path.relative_to(ROOT).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def key(parts: Mapping[str, Any]) -> str:
    """The name of a plan: a hash of what decides it (``parts``, printed) and the version."""
    text = json.dumps({**{k: str(v) for k, v in parts.items()}, "version": version()},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def load(name: str) -> list[Stage] | None:
    """The stages stored under ``name``, each program read back and checked in its
    context; None when there is none or it does not read back."""
    path = cache_dir()[0] / f"{name}.plan.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        stages = []
        for s in data["stages"]:
            ctx = {x: parse_type(t) for x, t in s["ctx"].items()}
            spans = iter([None if sp is None else Span(*sp) for sp in s["spans"]])
            program = _spanned(parse_expr(s["program"]), spans)
            if next(spans, False) is not False:  # more spans than nodes
                return None
            program, _ = typecheck(program, ctx)
            stages.append(Stage(s["name"], program, 0.0, s["report"], ctx))  # no time here
        return stages or None
    except (OSError, ValueError, KeyError, TypeError, SDQLiteError, RecursionError,
            StopIteration):
        return None


def _spanned(e: Expr, spans: Iterator[Span | None]) -> Expr:
    """``e`` with the spans of ``spans`` (pre-order, as ``subterms``)."""
    span = next(spans)
    return replace(map_children(e, lambda c: _spanned(c, spans)), span=span)


def spans(e: Expr) -> list[list[int] | None]:
    """Where each node of ``e`` is in its source, pre-order."""
    return [None if x.span is None else [x.span.line, x.span.col, x.span.end_line,
                                         x.span.end_col] for x in subterms(e)]


def store(name: str, stages: list[Stage], ctx: Mapping[str, Type]) -> None:
    """Write the stages under ``name`` (atomically; a cache that cannot hold it is left
    alone: the plan is made again next time)."""
    root = cache_dir()[0]
    data = {"stages": [{"name": s.name, "program": show(s.program), "spans": spans(s.program),
                        "seconds": s.seconds,
                        "report": s.report,
                        "ctx": {x: str(t) for x, t in (s.ctx or ctx).items()}}
                       for s in stages]}
    try:
        text = json.dumps(data, default=str)
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f"{name}.plan.json.{os.getpid()}"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, root / f"{name}.plan.json")
    except (OSError, ValueError, TypeError):
        pass

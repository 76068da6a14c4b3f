"""Running a source program: declarations + data → context → check → evaluate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sdqlite.ad.gradient import expand
from sdqlite.check.typecheck import Ctx, typecheck
from sdqlite.errors import DataError, SDQLTypeError
from sdqlite.storage.formats import declared_formats
from sdqlite.syntax.ast import Expr, free_vars
from sdqlite.syntax.parser import Program
from sdqlite.syntax.types import Type
from semantics.extents import check_extents
from semantics.interp import evaluate
from semantics.values import (
    FLOAT,
    Field,
    Value,
    data_mismatch,
    has_type,
    not_a_value,
    type_of,
)


@dataclass(frozen=True)
class Input:
    """Data for an input: its value and (when known, e.g. from a file) its type."""

    value: Value
    type: Type | None = None


def context(program: Program, inputs: Mapping[str, Input]) -> Ctx:
    """Γ: the declared inputs, and each undeclared input typed by its data.

    Data given for a declared input must match its declaration."""
    for name, data in inputs.items():
        if not isinstance(data, Input):
            raise DataError(f"input {name}: give semantics.run.Input(value) (or call "
                            "sdqlite.evaluate, which reads numpy and scipy data)")
        if (why := not_a_value(name, data.value)) is not None:
            raise DataError(why)
    ctx: dict[str, Type] = {}
    declared = {d.name: d for d in program.decls}
    for d in program.decls:
        ctx[d.name] = d.type
    for name, data in inputs.items():
        if name in declared:
            want = declared[name].type
            if not has_type(data.value, want) or (data.type is not None and data.type != want):
                raise DataError(data_mismatch(name, data.value, want,
                                              data.type or type_of(data.value)),
                                declared[name].span)
        else:
            t = data.type or type_of(data.value)
            if t is None:
                raise DataError(f"the type of input {name} cannot be told from its data "
                                f"(an empty dictionary?); declare it: {name} : TYPE")
            ctx[name] = t
    check_extents({d.name: (d.type, inputs[d.name].value, d.span) for d in program.decls
                   if d.name in inputs})
    return ctx


@dataclass(frozen=True)
class Result:
    program: Expr  # elaborated
    type: Type
    value: Value


def check_program(program: Program, ctx: Ctx) -> tuple[Expr, Type]:
    """The program checked in ``ctx`` (its declared formats too), its ``gradient``s then
    expanded (an AD step after checking): what the interpreter and the pipeline take."""
    if program.expr is None:
        raise SDQLTypeError("the program has no expression to evaluate"
                            + (" (only input declarations)" if program.decls else ""))
    declared_formats(program)
    elab, t = typecheck(program.expr, ctx)
    return expand(elab, ctx), t


def run(program: Program, inputs: Mapping[str, Input], field: Field = FLOAT) -> Result:
    """Type the program in the context of its inputs and evaluate it."""
    ctx = context(program, inputs)
    elab, t = check_program(program, ctx)
    missing = sorted(n for n in ctx if n not in inputs and n in free_vars(elab))
    if missing:
        raise DataError(f"no data for input {', '.join(missing)} (give --input NAME=PATH)")
    return Result(elab, t, evaluate(elab, {n: i.value for n, i in inputs.items()}, field))


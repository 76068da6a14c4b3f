"""Storage composition (§5.3): each input bound to its format's definition.

Composition binds every input to its format's definition over its flat parameters,
named ``<input>_<param>`` (``A_pos``): ``let A = <CSR definition> in e``.  Equality
saturation then removes the intermediate tensors (vertical fusion with ``unique``,
``get-range``, ...), as ``sdqlite.opt.pipeline`` does after differentiation.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from sdqlite.storage.formats import Format
from sdqlite.syntax.ast import (
    Expr,
    IntConst,
    Let,
    Lookup,
    Range,
    Single,
    Sum,
    Unique,
    Var,
    free_vars,
    map_children,
)
from sdqlite.syntax.names import names_in, substitute
from sdqlite.syntax.types import Type


@dataclass(frozen=True)
class Composed:
    """``program`` over ``ctx``: each composed input replaced by its flat parameters,
    whose names ``flat[input][param]`` gives."""

    program: Expr
    ctx: dict[str, Type]
    flat: dict[str, dict[str, str]]
    #: flat index array -> the pointer array within whose segments its entries are
    #: unique (None: throughout): the formats' promises, by the flat arrays' names
    unique: dict[str, str | None]


def compose(e: Expr, ctx: Mapping[str, Type], formats: Mapping[str, Format],
            rows: Collection[int] = ()) -> Composed:
    """§5.3: ``let x = <definition of x's format over x's flat arrays> in e`` for every
    input x of ``e`` with a non-identity format.

    ``rows`` names lookups ``x(k)`` of ``e`` (by identity) at a key known to lie in
    ``0 .. len`` of a definition ``sum(<_, i> in (0:len)) {unique(i) -> row}`` (a
    positional first layer): each becomes ``let i = k in row``, the row read in place,
    where the lookup in the let-bound definition would build the whole input first."""
    taken = names_in(e) | set(ctx)
    new_ctx = dict(ctx)
    flat: dict[str, dict[str, str]] = {}
    unique: dict[str, str | None] = {}
    definitions: dict[str, Expr] = {}
    for x in sorted(free_vars(e)):
        fmt = formats.get(x)
        if fmt is None or fmt.identity:
            continue
        names = {}
        for p, t in fmt.params:
            name, n = f"{x}_{p}", 0
            while name in taken:
                n += 1
                name = f"{x}_{p}{n}"
            taken.add(name)
            names[p] = name
            new_ctx[name] = t
        definition = fmt.program
        for p, name in names.items():
            definition = substitute(definition, p, Var(name))
        definitions[x] = definition
        del new_ctx[x]
        flat[x] = names
        unique |= {names[i]: None if p is None else names[p] for i, p in fmt.unique}
    body = _rows(e, definitions, set(rows)) if rows else e
    for x, definition in definitions.items():
        body = Let(x, definition, body)
    return Composed(body, new_ctx, flat, unique)


def _rows(e: Expr, definitions: Mapping[str, Expr], rows: set[int]) -> Expr:
    """``e`` with each lookup of ``rows`` read in its input's definition (``compose``)."""
    match e:
        case Lookup(Var(x), key) if id(e) in rows and x in definitions:
            match definitions[x]:
                case Sum("_", i, Range(IntConst(0), Var()), Single(Unique(Var(j)), row)) \
                        if i == j:
                    return Let(i, key, row)
    return map_children(e, lambda c: _rows(c, definitions, rows))

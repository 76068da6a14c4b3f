"""Running the destination-passing IR in Python, over the interpreter's values.

This is how the properties check the lowering of ``codegen/dps.py`` on its own, apart
from the C++ emitter and runtime: every pure expression is evaluated by the reference
interpreter, and the statements add into destinations with the semiring's ``+``.  It is
generic over the scalar field like the interpreter, so it runs exactly on rationals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import assert_never

from codegen.dps import (
    RESULT,
    AddInto,
    Assign,
    Bind,
    Decl,
    Dest,
    Enter,
    Loop,
    Lowered,
    MulAddInto,
    Prune,
    Stmt,
    When,
)
from sdqlite.syntax.ast import Expr
from semantics import values as V
from semantics.interp import evaluate
from semantics.values import FLOAT, Field, Value


def execute(low: Lowered, env: Mapping[str, Value], field: Field = FLOAT) -> Value:
    """The value ``low`` adds into its destination, on the inputs ``env``."""
    run = _Run(dict(env), {}, field)
    run.store[RESULT] = V.zero_of(low.type, field)
    run.block(low.body)
    return run.store[RESULT]


class _Run:
    def __init__(self, store: dict[str, Value], aliases: dict[str, Dest], field: Field):
        self.store = store
        self.aliases = aliases  # a name entered into a destination → that destination
        self.field = field

    def ev(self, e: Expr) -> Value:
        return evaluate(e, self.store, self.field)

    def block(self, stmts: Sequence[Stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: Stmt) -> None:
        match s:
            case Decl(name, t):
                self.store[name] = V.zero_of(t, self.field)
            case Bind(name, value):
                self.store[name] = self.ev(value)
            case Enter(name, dest):
                self.aliases[name] = self.resolve(dest)
            case Loop(key, val, dom, _, body):
                for k, v in V.entries(self.ev(dom)):
                    self.store[key], self.store[val] = k, v
                    self.block(body)
            case When(cond, body):
                if self.ev(cond):
                    self.block(body)
            case AddInto(dest, value):
                self.add(dest, self.ev(value))
            case MulAddInto(dest, a, b):
                self.add(dest, V.mul(self.ev(a), self.ev(b)))
            case Prune():  # nothing to drop: here + drops zero entries as it goes
                pass
            case Assign(dest, value):
                self.store[self.resolve(dest).root] = self.ev(value)
            case _:
                assert_never(s)

    def resolve(self, d: Dest) -> Dest:
        """The destination as a path from a variable (through entered names)."""
        if d.root in self.aliases:
            outer = self.aliases[d.root]
            return Dest(outer.root, (*outer.keys, *d.keys))
        return d

    def add(self, dest: Dest, x: Value) -> None:
        d = self.resolve(dest)
        keys = [self.ev(k) for k in d.keys]
        self.store[d.root] = _add_at(self.store[d.root], keys, x)


def _add_at(v: Value, keys: list[int], x: Value) -> Value:
    """``v + {k1 -> ... {kn -> x}}``: x added at the path (v a dictionary when n > 0)."""
    if not keys:
        return V.add(v, x)
    k, rest = keys[0], keys[1:]
    entry = v[k] if k in v else ({} if rest else V.zero_like(x))
    out = dict(v)
    new = _add_at(entry, rest, x)
    if V.is_zero(new):
        out.pop(k, None)
    else:
        out[k] = new
    return out

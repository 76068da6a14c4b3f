"""The oracle: the interpreter run on sympy symbols, differentiated by ``sympy.diff``.

Nothing here knows about AD.  ``jacobian(e, Γ, ρ, x)`` puts a symbol in place of every
*stored* real entry of every input (the support is fixed by the concrete input, as the
paper's differentials are over tensors of fixed shape), evaluates ``e`` symbolically,
differentiates every output entry by the symbols of ``x`` and substitutes the point.

Why symbols for every input: on concrete numbers an intermediate entry can cancel to
exactly zero (``2 + -2``) and be dropped, although its derivative is not zero; sparse AD
then differentiates along the smaller support.  The paper's theorems are about generic
points, where that does not happen, and a symbolic evaluation *is* the generic point.
``evaluate_generic`` evaluates any program (e.g. ``F[e]``) the same way.  A Jacobian is a
value of type ``T ⊗ τ``: output indices first, then those of ``x`` — the layout of
``gradient e x``.

``finite_jacobian`` computes the same by central finite differences: an independent,
numeric check of the oracle itself.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any

import sympy

from sdqlite.syntax.ast import Expr
from sdqlite.syntax.types import DictT, RealT, Type, scalar_of
from semantics.interp import evaluate
from semantics.values import FLOAT, DenseArray, Value, add, dense, single, sympy_field

Path = tuple[int, ...]


def real_leaves(v: Value, t: Type, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """The real scalars of ``v : t`` with the keys leading to them."""
    match t:
        case RealT():
            yield path, v
        case DictT(val):
            items = enumerate(v.items, v.start) if isinstance(v, DenseArray) else v.items()
            for k, x in items:
                yield from real_leaves(x, val, (*path, k))
        case _:
            return


def map_real_leaves(v: Value, t: Type, f: Callable[[Path, Any], Any], path: Path = ()) -> Value:
    match t:
        case RealT():
            return f(path, v)
        case DictT(val):
            if isinstance(v, DenseArray):
                return dense([map_real_leaves(x, val, f, (*path, k))
                              for k, x in enumerate(v.items, v.start)], v.start)
            return {k: map_real_leaves(x, val, f, (*path, k)) for k, x in v.items()}
        case _:
            return v


def to_sympy(x: Any) -> Any:
    if isinstance(x, Fraction):
        return sympy.Rational(x.numerator, x.denominator)
    return sympy.Float(x) if isinstance(x, float) else x


def from_sympy(x: Any) -> Any:
    """An exact Fraction for a rational, else a float."""
    if getattr(x, "is_Rational", False):
        return Fraction(int(x.p), int(x.q))
    return float(sympy.N(x, 30))


def nested(path: Path, x: Value) -> Value:
    """``{p1 -> ... {pn -> x}}``, canonical."""
    for k in reversed(path):
        x = single(k, x)
    return x


def generic_inputs(ctx: Mapping[str, Type], env: Mapping[str, Value]
                   ) -> tuple[dict[str, Value], dict[tuple[str, Path], Any], dict[Any, Any]]:
    """ρ at a *generic point*: every stored real entry of every input becomes a symbol
    (``V1[0,2]``), with the concrete entry as the point to substitute at the end.  On
    symbols no sum cancels to zero by accident, so every dictionary keeps the support it
    has near the point — the fixed shape the paper's differentials are taken over."""
    symbols: dict[tuple[str, Path], Any] = {}
    point: dict[Any, Any] = {}
    sym_env: dict[str, Value] = {}
    for name, value in env.items():
        def sym(path: Path, r: Any, name: str = name) -> Any:
            s = sympy.Symbol(f"{name}[{','.join(map(str, path))}]")
            symbols[(name, path)] = s
            point[s] = to_sympy(r)
            return s

        sym_env[name] = map_real_leaves(value, ctx[name], sym)
    return sym_env, symbols, point


def evaluate_generic(e: Expr, ctx: Mapping[str, Type], out: Type,
                     env: Mapping[str, Value]) -> Value:
    """⟦e⟧ evaluated at a generic point and then substituted at ρ = env (exact)."""
    sym_env, _, point = generic_inputs(ctx, env)
    result = evaluate(e, sym_env, sympy_field())
    if not isinstance(out, RealT | DictT):
        return result
    return map_canonical(result, out, lambda o: from_sympy(sympy.sympify(o).subs(point)))


def jacobian(e: Expr, ctx: Mapping[str, Type], out: Type, env: Mapping[str, Value],
             x: str) -> Value:
    """∂⟦e⟧/∂x at ρ = env, as a value of type ``out ⊗ ctx[x]`` (exact where possible),
    over the stored entries of ``x`` and at a generic point."""
    sym_env, symbols, point = generic_inputs(ctx, env)
    result = evaluate(e, sym_env, sympy_field())
    jac: Value = {} if isinstance(out, DictT) or isinstance(ctx[x], DictT) else Fraction(0)
    for p, o in real_leaves(result, out):
        for (name, q), s in symbols.items():
            if name == x:
                d = sympy.diff(o, s).subs(point)
                jac = add(jac, nested((*p, *q), from_sympy(d)))
    return jac


def finite_jacobian(e: Expr, ctx: Mapping[str, Type], out: Type, env: Mapping[str, Value],
                    x: str, h: float = 1e-6, jitter: float = 1e-7) -> Value:
    """∂⟦e⟧/∂x at env by central differences (floats), laid out like ``jacobian``.

    Like the oracle, at a generic point: every real input entry is moved by a tiny,
    distinct ``jitter`` so that no intermediate entry cancels to exactly zero (where
    the concrete function's support, and so its derivative, would jump)."""
    def generic(path: Path, r: Any, name: str) -> float:
        stable = zlib.crc32(repr((name, path)).encode())  # not hash(): it is salted per run
        return float(r) + jitter * (1 + (stable % 997) / 997)

    base: dict[str, Value] = {}
    for n, v in env.items():
        def moved(p: Path, r: Any, n: str = n) -> float:
            return generic(p, r, n)

        base[n] = map_real_leaves(v, ctx[n], moved)
    jac: Value = {} if isinstance(out, DictT) or isinstance(ctx[x], DictT) else 0.0
    for q, _ in real_leaves(base[x], ctx[x]):
        def at(delta: float, q: Path = q) -> dict[Path, Any]:
            moved = map_real_leaves(base[x], ctx[x],
                                    lambda path, r: r + delta if path == q else r)
            return dict(real_leaves(evaluate(e, {**base, x: moved}, FLOAT), out))

        plus, minus = at(h), at(-h)
        for p in plus.keys() | minus.keys():
            slope = (plus.get(p, 0.0) - minus.get(p, 0.0)) / (2 * h)
            jac = add(jac, nested((*p, *q), slope))
    return jac


def directional(e: Expr, ctx: Mapping[str, Type], out: Type, env: Mapping[str, Value],
                dirs: Mapping[str, Value]) -> Value:
    """J · v: d/dt ⟦e⟧(ρ + t·v) at t = 0 and at a generic point, for a direction
    ``dirs[x]`` on the stored entries of each real input ``x``."""
    t = sympy.Symbol("t")
    sym_env, _, point = generic_inputs(ctx, env)
    moved_env: dict[str, Value] = {}
    for name, value in sym_env.items():
        v_leaves: dict[Path, Any] = (dict(real_leaves(dirs[name], ctx[name])) if name in dirs
                                     else {})

        def moved(p: Path, s: Any, vl: dict[Path, Any] = v_leaves) -> Any:
            return s + t * to_sympy(vl.get(p, Fraction(0)))

        moved_env[name] = map_real_leaves(value, ctx[name], moved)
    result = evaluate(e, moved_env, sympy_field())
    if scalar_of(out) != RealT():
        return Fraction(0)  # a discrete output (int, bool, or tensors of them): derivative 0
    return map_canonical(
        result, out, lambda o: from_sympy(sympy.diff(o, t).subs(t, 0).subs(point)))


def map_canonical(v: Value, t: Type, f: Callable[[Any], Any]) -> Value:
    """Apply ``f`` to the real leaves of ``v`` and drop the entries that become zero."""
    acc: Value = {} if isinstance(t, DictT) else Fraction(0)
    for p, x in real_leaves(v, t):
        acc = add(acc, nested(p, f(x)))
    return acc


def contract(jac: Value, jac_type: Type, out_order: int, seed: Value, seed_type: Type,
             x_order: int, result_type: Type) -> Value:
    """Σ_q J[p, q] · S[q, r]: the Jacobian ``J : T ⊗ τ_x`` (``T`` of order ``out_order``)
    applied to a seed ``S : τ_x ⊗ τ`` (``τ_x`` of order ``x_order``), of type ``T ⊗ τ``."""
    by_q: dict[Path, list[tuple[Path, Any]]] = {}
    for qr, s in real_leaves(seed, seed_type):
        by_q.setdefault(qr[:x_order], []).append((qr[x_order:], s))
    acc: Value = {} if isinstance(result_type, DictT) else Fraction(0)
    for pq, j in real_leaves(jac, jac_type):
        for r, s in by_q.get(pq[out_order:], []):
            acc = add(acc, nested((*pq[:out_order], *r), j * s))
    return acc

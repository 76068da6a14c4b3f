"""The C++ emitter (§6): the destination-passing IR of ``codegen/dps.py`` as C++ text.

Types map in one place, as the paper's table (``cpp_type``); each IR statement and each
construct of Physical SDQLite has one ``match`` arm.  A sum is a loop: counted over a
range ``(lo:hi)`` or a sub-array ``a(lo:hi)``, a for-each over a dictionary, over every
position of an array.  A lookup never inserts (``sdql::lookup`` returns zero for a missing
key).  The generated kernel receives its inputs and its destination, as in the paper's
listings; an ``extern "C"`` entry point decodes the caller's buffers, runs it and encodes
the result (``codegen/sdqlite_runtime.h``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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
from sdqlite.errors import CodegenError, Span
from sdqlite.syntax.ast import (
    Add,
    ArrayLit,
    BoolConst,
    Empty,
    Eq,
    Expr,
    Gradient,
    If,
    IntConst,
    Let,
    Lookup,
    Mul,
    Not,
    Range,
    RealConst,
    Single,
    SubArray,
    Sum,
    Unique,
    UnOp,
    Var,
)
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.types import BOOL, INT, REAL, BoolT, DictT, IntT, RealT, Type, otimes

RUNTIME = "sdqlite_runtime.h"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def cpp_type(t: Type) -> str:
    """§6's type mapping: int → a 64-bit integer, real → double, {int -> D} → a hash map,
    {dense_int -> D} → an array."""
    match t:
        case IntT():
            return "sdql::i64"
        case RealT():
            return "double"
        case BoolT():
            return "bool"
        case DictT(val, dense):
            return f"sdql::{'arr' if dense else 'dict'}<{cpp_type(val)}>"
        case _:
            assert_never(t)


def _scalar(t: Type) -> bool:
    return not isinstance(t, DictT)


#: C++ keywords and the names the entry point uses itself
CPP_KEYWORDS = frozenset((
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool",
    "break", "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl",
    "concept", "const", "consteval", "constexpr", "constinit", "const_cast", "continue",
    "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
    "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
    "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private",
    "protected", "public", "register", "reinterpret_cast", "requires", "return", "short",
    "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch",
    "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid",
    "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t",
    "while", "xor", "xor_eq", "std", "sdql", "sdql_ops", "result", "data", "st", "out",
    "next", "main", "NULL", "size",
))


class Names:
    """SDQLite (IR) names → distinct C++ identifiers: a prime becomes ``_d`` (``x'`` →
    ``x_d``), a leading ``_`` (reserved in C++) gets a ``v`` before it, and keywords, the
    entry point's own names and names taken already get a ``_`` after them."""

    def __init__(self) -> None:
        self.table: dict[str, str] = {RESULT: "result"}
        self.used = set(self.table.values())

    def __call__(self, name: str) -> str:
        if name not in self.table:
            base = name.replace("'", "_d")
            if base.startswith("_"):  # appending never ends that: it looped for ``_t``
                base = "v" + base
            while base in CPP_KEYWORDS or base in self.used:
                base += "_"
            self.table[name] = base
            self.used.add(base)
        return self.table[name]


@dataclass
class Kernel:
    """One generated kernel: its C++ text, the entry point's name, its inputs in the order
    the entry point decodes them, its result type, and the spans its failures refer to."""

    name: str
    source: str
    inputs: tuple[tuple[str, Type], ...]  # ending with DEST_SIZE for a dense destination
    result: Type  # as the buffers come back: a dense destination's layer is dense
    spans: list[Span | None] = field(default_factory=list)
    ops: frozenset[str] = frozenset()  # the unary operations it calls

    @property
    def entry(self) -> str:
        return f"sdql_{self.name}"


#: the last input of a kernel with a dense destination: the size of its outer layer
DEST_SIZE = "%size"


def emit_kernel(name: str, low: Lowered, comment: str = "", *, dense_result: bool
                ) -> Kernel:
    """The kernel ``name`` and its entry point for the lowered program ``low``.  With
    ``dense_result`` (a dictionary result whose keys lie in 0 .. n-1), the destination's
    outer layer is an array of n positions, n given by the caller."""
    em = _Emitter(Names(), {x: t for x, t in low.inputs} | {RESULT: low.type}, [], set())
    result, inputs = low.type, low.inputs
    dest = cpp_type(result)
    if dense_result:
        assert isinstance(result, DictT) and not result.dense, "a dictionary result"
        dest = f"sdql::vec<{cpp_type(result.val)}>"
        result, inputs = DictT(result.val, dense=True), (*inputs, (DEST_SIZE, INT))
    params = [f"{_param_type(t)} {em.names(x)}" for x, t in low.inputs]
    params.append(f"{dest}& result")
    body = em.block(low.body, 1)
    decode = "".join(f"    const auto {em.names(x)} = sdql::decode<{cpp_type(t)}>(data, next);\n"
                     for x, t in low.inputs)
    if dense_result:
        decode += "    const auto size = sdql::decode<sdql::i64>(data, next);\n"
    args = ", ".join([*(em.names(x) for x, _ in low.inputs), "result"])
    text = "".join(f"// {line}\n" for line in comment.splitlines())
    text += (f"static void {name}({', '.join(params)}) {{\n{body}}}\n\n"
             f"extern \"C\" int sdql_{name}(void* const* data, sdql::status* st, "
             f"sdql::output** out) {{\n"
             f"  return sdql::run(st, out, [&] {{\n"
             f"    sdql::i64 next = 0;\n{decode}"
             f"    {dest} result{{{'size' if dense_result else ''}}};\n"
             f"    {name}({args});\n"
             f"    return sdql::encode(result);\n"
             f"  }});\n}}\n")
    return Kernel(name, text, inputs, result, em.spans, frozenset(em.ops))


def translation_unit(kernels: Sequence[Kernel]) -> str:
    """A C++ file: the runtime, the unary operations of ``sdqlite.syntax.ops`` the kernels call
    (outside the domain, or not finite, is a failure), the kernels."""
    used = set().union(*(k.ops for k in kernels))
    ops = "".join(
        f"inline double {op.name}(double x, sdql::i64 span) {{\n"
        + (f"  if (!({op.cpp_domain})) sdql::fail(sdql::DOMAIN, {i}, x, span);\n"
           if op.cpp_domain != "true" else "")
        + f"  const double r = {op.cpp};\n"
        f"  if (!std::isfinite(r)) sdql::fail(sdql::RANGE, {i}, x, span);\n"
        f"  return r;\n}}\n"
        for i, op in enumerate(UNARY_OPS.values()) if op.name in used)
    namespace = f"namespace sdql_ops {{  // sdqlite/syntax/ops.py\n{ops}}}\n\n" if ops else ""
    return (f"// Generated by sdqlite (codegen/emit.py).\n#include \"{RUNTIME}\"\n\n"
            + namespace + "\n".join(k.source for k in kernels))


def _param_type(t: Type) -> str:
    return cpp_type(t) if _scalar(t) else f"const {cpp_type(t)}&"


@dataclass
class _Emitter:
    names: Names
    types: dict[str, Type]  # IR name -> type
    spans: list[Span | None]
    ops: set[str]

    # ---- statements ---------------------------------------------------------------------
    def block(self, stmts: Sequence[Stmt], depth: int) -> str:
        return "".join(self.stmt(s, depth) for s in stmts)

    def stmt(self, s: Stmt, depth: int) -> str:
        pad = "  " * depth
        match s:
            case Decl(name, t):
                self.types[name] = t
                return f"{pad}{cpp_type(t)} {self.names(name)}{{}};\n"
            case Bind(name, value, t):
                self.types[name] = t
                code, _ = self.expr(value)
                decl = f"const {cpp_type(t)}" if _scalar(t) else "const auto&"
                return f"{pad}{decl} {self.names(name)} = {code};\n"
            case Enter(name, dest, _):  # a destination: written into, never read
                return f"{pad}auto& {self.names(name)} = {self.dest(dest)};\n"
            case Loop(key, val, dom, dt, body):
                return self.loop(key, val, dom, dt, body, depth)
            case When(cond, body):
                code, _ = self.expr(cond)
                return f"{pad}if ({code}) {{\n{self.block(body, depth + 1)}{pad}}}\n"
            case AddInto(dest, value, t):
                code, _ = self.expr(value)
                if t == REAL:
                    return f"{pad}{self.dest(dest)} += {code};\n"
                return f"{pad}sdql::add_into({self.dest(dest)}, {code});\n"
            case MulAddInto(dest, a, b, ta, tb):
                (ca, _), (cb, _) = self.expr(a), self.expr(b)
                if ta == REAL and tb == REAL:
                    return f"{pad}{self.dest(dest)} += {ca} * {cb};\n"
                return f"{pad}sdql::mul_add_into({self.dest(dest)}, {ca}, {cb});\n"
            case Prune(name):
                return f"{pad}sdql::prune({self.names(name)});\n"
            case Assign(dest, value):
                return f"{pad}{self.dest(dest)} = {self.expr(value)[0]};\n"
            case _:
                assert_never(s)

    def loop(self, key: str, val: str, dom: Expr, dt: DictT, body: Sequence[Stmt],
             depth: int) -> str:
        """sum(<key, val> in dom): a counted loop over (lo:hi) or a(lo:hi), a for-each over
        a dictionary, every position of an array."""
        pad = "  " * depth
        self.types[key], self.types[val] = INT, dt.val
        k, v = self.names(key), self.names(val)
        elem = f"const {cpp_type(dt.val)}" if _scalar(dt.val) else "const auto&"
        match dom:
            case Range(lo, hi):  # positions lo .. hi-1, each its own value
                head = (f"for (sdql::i64 {k} = {self.expr(lo)[0]}, {k}_end = {self.expr(hi)[0]}; "
                        f"{k} < {k}_end; ++{k}) {{\n{pad}  const sdql::i64 {v} = {k};\n")
            case SubArray(a, lo, hi):
                arr = f"{k}_arr"
                head = (f"const auto& {arr} = {self.expr(a)[0]};\n{pad}"
                        f"for (sdql::i64 {k} = {self.expr(lo)[0]}, {k}_end = {self.expr(hi)[0]}; "
                        f"{k} < {k}_end; ++{k}) {{\n"
                        f"{pad}  {elem} {v} = sdql::lookup({arr}, {k});\n")
            case Var() if not dt.dense:
                head = f"for (const auto& [{k}, {v}] : {self.expr(dom)[0]}) {{\n"
            case Var():
                d = self.expr(dom)[0]
                head = (f"for (sdql::i64 {k} = {d}.start; {k} < {d}.end(); ++{k}) {{\n"
                        f"{pad}  {elem} {v} = {d}.at({k});\n")
            case _:
                raise CodegenError("a loop over a domain that was not named (internal)",
                                   dom.span)
        return f"{pad}{head}{self.block(body, depth + 1)}{pad}}}\n"

    def dest(self, d: Dest) -> str:
        return self.names(d.root) + "".join(f"[{self.expr(k)[0]}]" for k in d.keys)

    # ---- expressions: C++ code and type --------------------------------------------------
    def expr(self, e: Expr) -> tuple[str, Type]:
        match e:
            case Var(x):
                return self.names(x), self.types[x]
            case IntConst(n):
                if not INT64_MIN <= n <= INT64_MAX:
                    raise CodegenError(f"the integer {n} does not fit in 64 bits, the C++ "
                                       "backend's int", e.span)
                code = "(-9223372036854775807 - 1)" if n == INT64_MIN else f"sdql::i64({n})"
                return code, INT
            case RealConst(r):
                text = repr(float(r))  # always with "." or "e": a double literal
                return (f"({text})" if text.startswith("-") else text), REAL
            case BoolConst(b):
                return ("true" if b else "false"), BOOL
            case Empty(t):
                assert t is not None, "elaborated"
                return f"{cpp_type(t)}{{}}", t
            case Single(k, v):
                (ck, _), (cv, vt) = self.expr(k), self.expr(v)
                return f"sdql::single<{cpp_type(vt)}>({ck}, {cv})", DictT(vt)
            case Lookup(Range(lo, hi), k):  # (lo:hi)(k), without building the range
                return (f"sdql::range_at({self.expr(lo)[0]}, {self.expr(hi)[0]}, "
                        f"{self.expr(k)[0]})"), INT
            case Lookup(d, k, _, t):
                assert t is not None, "elaborated"
                return f"sdql::lookup({self.expr(d)[0]}, {self.expr(k)[0]})", t
            case Not(a):
                return f"(!{self.expr(a)[0]})", BOOL
            case Eq(a, b):
                return f"({self.expr(a)[0]} == {self.expr(b)[0]})", BOOL
            case If(c, body, _, t):
                assert t is not None, "elaborated"
                cb, _ = self.expr(body)
                zero = "0.0" if t == REAL else f"sdql::zero<{cpp_type(t)}>()"
                return f"({self.expr(c)[0]} ? {cpp_type(t)}({cb}) : {zero})", t
            case Add(a, b):
                (ca, t), (cb, _) = self.expr(a), self.expr(b)
                return (f"({ca} + {cb})" if t == REAL else f"sdql::add({ca}, {cb})"), t
            case Mul(a, b):
                (ca, ta), (cb, tb) = self.expr(a), self.expr(b)
                t = otimes(ta, tb)
                assert t is not None, "well typed"
                if ta == REAL and tb == REAL:
                    return f"({ca} * {cb})", REAL
                return f"sdql::mul({ca}, {cb})", t
            case UnOp(op, a):
                self.spans.append(e.span)
                self.ops.add(op)
                return f"sdql_ops::{op}({self.expr(a)[0]}, {len(self.spans) - 1})", REAL
            case Range(lo, hi):
                return f"sdql::range({self.expr(lo)[0]}, {self.expr(hi)[0]})", DictT(INT, True)
            case SubArray(a, lo, hi):
                ca, t = self.expr(a)
                return f"sdql::subarray({ca}, {self.expr(lo)[0]}, {self.expr(hi)[0]})", t
            case ArrayLit(elems, _, t):
                assert t is not None, "elaborated"
                items = ", ".join(self.expr(x)[0] for x in elems)
                return f"sdql::array_of<{cpp_type(t)}>({{{items}}})", DictT(t, dense=True)
            case Sum() | Let() | Unique() | Gradient():  # lowering removes unique (the identity)
                construct = type(e).__name__.lower()
                raise CodegenError(f"{construct} reached the C++ emitter without being lowered "
                                   "to statements (codegen/dps.py)", e.span)
            case _:
                assert_never(e)

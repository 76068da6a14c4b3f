"""The C++ emitter (§5.5): the destination-passing IR of ``codegen/dps.py`` as C++ text.

Types map in one place, as the paper's table (``cpp_type``); each IR statement and each
construct of Physical SDQLite has one ``match`` arm.  A sum is a loop: counted over a
range ``(lo:hi)`` or a sub-array ``a(lo:hi)``, a for-each over a dictionary, over every
position of an array.  A lookup never inserts (``sdql::lookup`` returns zero for a missing
key).  The generated kernel receives its inputs and its destination, as in the paper's
listings; an ``extern "C"`` entry point decodes the caller's buffers, runs it and encodes
the result (``codegen/sdqlite_runtime.h``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, assert_never

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
from sdqlite.check.sizes import NO_KEYS
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
    children,
    free_vars,
    subterms,
)
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.types import (
    BOOL,
    INT,
    REAL,
    BoolT,
    DictT,
    IntT,
    RealT,
    Type,
    otimes,
    scalar_of,
)

RUNTIME = "sdqlite_runtime.h"
DOOR = "sdqlite_door.h"  # the front door's checks, after the runtime
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def cpp_type(t: Type) -> str:
    """§5.5's type mapping: int → a 64-bit integer, real → double, {int -> D} → a hash map,
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
    "while", "xor", "xor_eq", "std", "result", "data", "lens", "st", "out", "next", "main",
    "size",
))

#: the macros with a lowercase letter that the runtime's headers define (glibc 2.36,
#: libstdc++ 12, Boost 1.81), but those starting with "_" or "M_" (renamed by rule):
#: a variable spelt so would be replaced by the preprocessor.  tests/test_codegen.py
#: holds this list against what the compiler defines (g++ -dM -E).
C_MACROS = frozenset((
    "L_ctermid", "L_cuserid", "L_tmpnam", "P_tmpdir", "alloca", "assert", "assert_perror",
    "be16toh", "be32toh", "be64toh", "errno", "htobe16", "htobe32", "htobe64", "htole16",
    "htole32", "htole64", "issubnormal", "le16toh", "le32toh", "le64toh",
    "math_errhandling", "offsetof", "pthread_cleanup_pop", "pthread_cleanup_pop_restore_np",
    "pthread_cleanup_push", "pthread_cleanup_push_defer_np", "sa_handler", "sa_sigaction",
    "sched_priority", "si_addr", "si_addr_lsb", "si_arch", "si_band", "si_call_addr",
    "si_fd", "si_int", "si_lower", "si_overrun", "si_pid", "si_pkey", "si_ptr", "si_status",
    "si_stime", "si_syscall", "si_timerid", "si_uid", "si_upper", "si_utime", "si_value",
    "sigev_notify_attributes", "sigev_notify_function", "sigmask", "stderr", "stdin",
    "stdout", "strdupa", "strndupa",
))


def reserved(name: str) -> bool:
    """A name generated code must not use for a variable: a keyword, a name of the entry
    point's, a macro (those above, and by convention any name in capitals of two
    characters or more, or starting with "M_"), or the runtime's prefix."""
    return name in CPP_KEYWORDS or name in C_MACROS or _macro_like(name)


def _macro_like(name: str) -> bool:
    return (name.startswith(("sdql", "M_"))
            or (len(name) > 1 and name.upper() == name and not name.isdigit()))


class Names:
    """SDQLite (IR) names → distinct C++ identifiers: a prime becomes ``_d`` (``x'`` →
    ``x_d``), a leading ``_`` (reserved in C++) gets a ``v`` before it, and a ``reserved``
    name or one taken already gets a ``_`` after it."""

    def __init__(self) -> None:
        self.table: dict[str, str] = {RESULT: "result"}
        self.used = set(self.table.values())

    def fresh(self, base: str) -> str:
        """A C++ identifier not used yet, made of ``base``."""
        if base.startswith("_"):  # appending never ends that: it looped for ``_t``
            base = "v" + base
        if _macro_like(base):  # (``M_all`` of a destination ``M``): appending keeps it so
            base = "v_" + base
        while reserved(base) or base in self.used:
            base += "_"
        self.used.add(base)
        return base

    def __call__(self, name: str) -> str:
        if name not in self.table:
            self.table[name] = self.fresh(name.replace("'", "_d"))
        return self.table[name]


#: where a kernel's result goes (``codegen/results.py`` chooses):
#:   value  built by the kernel, handed back as its buffers
#:   vec    the same, its outer layer an array of the n positions the caller gives
#:   rows   a matrix of scalars whose rows the kernel writes in key order (``in_order``,
#:          or run by key: ``by_key``): appended to CSR arrays as they come
#:          (``sdql::csr``), the arrays handed back
#:   dense  every layer an array of known size over reals, written in place into the
#:          caller's zeroed memory (its shape given by the caller)
Destination = Literal["value", "vec", "rows", "dense"]

#: the C++ element type of a flat array, by numpy dtype name
FLAT_TYPES = {"float64": "double", "int64": "sdql::i64", "int32": "std::int32_t"}


@dataclass
class Kernel:
    """One generated kernel: its C++ text, the entry point's name, its inputs in the order
    the entry point reads them (``flat`` ones as one buffer each, read in place: a flat
    array's element type, by name; the others as their 2L + 1 buffers, ``codegen/data.py``),
    its result type as it comes back, where it goes (``dest``), and the spans its failures
    refer to."""

    name: str
    source: str
    inputs: tuple[tuple[str, Type], ...]
    result: Type  # as the result comes back: a dense destination's layers are dense
    spans: list[Span | None] = field(default_factory=list)
    ops: frozenset[str] = frozenset()  # the unary operations it calls
    flat: dict[str, str] = field(default_factory=dict)  # input -> C++ element type
    dest: Destination = "value"
    work: tuple[str, ...] = ()  # the sizes of its workspaces, passed after the result's
    #: the CSR inputs whose check the kernel may do (``rows_checked``): for each, after the
    #: workspaces' sizes, its column count, or -1 when the door checked it
    checks: tuple[str, ...] = ()

    @property
    def entry(self) -> str:
        return f"sdql_entry_{self.name}"


def emit_kernel(name: str, low: Lowered, comment: str = "", *, dest: Destination = "value",
                flat: Mapping[str, str] | None = None,
                lengths: Mapping[str, str] | None = None, narrow: bool = False,
                work: Mapping[str, str] | None = None,
                sized: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {}),
                rows: Mapping[str, Rows] | None = None) -> Kernel:
    """The kernel ``name`` and its entry point for the lowered program ``low``.  ``dest``
    says where the result goes; ``flat`` names the inputs read in place as flat arrays,
    with their C++ element types (32-bit index arrays stay 32-bit); ``lengths`` what the
    formats and the front door make true of flat arrays' lengths (``Extents``);
    ``narrow``, that a ``rows`` result's column keys fit in 32 bits (written so);
    ``work``, the accumulators kept as workspaces (``workspaces``) with their sizes;
    ``sized``, the declared sizes that bound index arrays' entries and that are dense
    inputs' lengths (``_Emitter.within``); ``rows``, the CSR inputs' arrays, whose check
    the kernel may do as it reads them (``rows_checked``)."""
    flats, rows = dict(flat or {}), dict(rows or {})
    parallel = parallel_loops(low)
    if dest == "rows":  # a CSR result in chunks: each chunk's n + 1 row pointers, merged row
        # by row, cost as much as the rows' loop (VVA's identity: 39x scipy on two threads)
        parallel = {loop: d for loop, d in parallel.items() if d != RESULT}
    em = _Emitter(Names(), {x: t for x, t in low.inputs} | {RESULT: low.type}, [], set(),
                  parallel, Extents(dict(lengths or {})))
    em.flat = frozenset(flats)
    for lens, pos, _, _ in rows.values():  # (as many as the rows: the door says so)
        own = em.extents.lengths.get(pos, "").removesuffix("+1")
        em.extents.same |= {m: own for m in lens if own and m != own}
    em.entries_below, em.length = dict(sized[0]), dict(sized[1])
    if dest == "rows":  # written in order as they are, or by key (results.choose)
        em.by_key = by_key(low)
        em.diagonal = diagonal_rows(low) if em.by_key is None else None
    dest_type, made = _destination(low.type, dest, narrow)
    params = [f"{_param_type(t, flats.get(x))} {em.names(x)}" for x, t in low.inputs]
    # rows appended in order are written through a copy of the CSR's cursors, which stay
    # in registers (sdql::csr_writer: VVA's kernel 0.45 -> 0.24 ms at n = 10^5; rows by
    # key, βAᵀA's, add up out of order, where the copies cost more: 13 -> 15 ms)
    writer = em.names.fresh("rows") if dest == "rows" and em.by_key is None else None
    params.append(f"{dest_type}& {writer or 'result'}")
    em.work = {acc: em.names.fresh(f"{em.names(acc)}_size") for acc in work or {}}
    params += [f"sdql::i64 {size}" for size in em.work.values()]
    checked = {} if em.by_key is not None else rows_checked(low, rows)
    checks = sorted(set(checked.values()))
    inner = {x: em.names.fresh(f"{x}_check") for x in checks}
    em.checks = {loop: (inner[x], *rows[x][1:]) for loop, x in checked.items()}
    params += [f"sdql::i64 {inner[x]}" for x in checks]
    # (a result of reals that is whole at the end, an array or a number: checked there)
    whole = dest == "dense" or (dest == "value" and low.type == REAL)
    summed = sorted(x for st in low.body if id(st) in checked and isinstance(st, Loop)
                    and whole and values_in_result(low, st, rows[x := checked[id(st)]][1:]))
    em.summed = {inner[x] for x in summed}
    body = em.block(low.body, 1) + "".join(
        f"  sdql::values_in_result({em.names(RESULT)}, {inner[x]});  // {x}'s values\n"
        for x in summed)
    if writer:
        body = f"  auto result = sdql::writer({writer});  // its cursors, copied\n{body}"
    read = "".join(
        f"    const auto {em.names(x)} = sdql::flat<{flats[x]}>(data, lens, next);\n"
        if x in flats else
        f"    const auto {em.names(x)} = sdql::decode<{cpp_type(t)}>(data, next);\n"
        for x, t in low.inputs)
    after = {"value": 0, "vec": 1, "rows": 2, "dense": len(_layers(low.type))}[dest]
    args = ", ".join([*(em.names(x) for x, _ in low.inputs), "result",
                      *(f"lens[next + {after + i}]"
                        for i in range(len(em.work) + len(checks)))])
    function = f"sdql_kernel_{name}"
    text = "".join(f"// {line}\n" for line in comment.splitlines())
    # (out of line: inlined into the entry's run(), its loop had its cursors spilled, the
    # registers of a larger function: VVA's kernel call 206 -> 176 us at n = 10^5)
    text += (f"__attribute__((noinline)) static void {function}({', '.join(params)}) "
             f"{{\n{body}}}\n\n"
             f"extern \"C\" int sdql_entry_{name}(void* const* data, const sdql::i64* lens, "
             f"sdql::status* st, sdql::output** out) {{\n"
             f"  return sdql::run(st, out, [&]() -> sdql::output* {{\n"
             f"    sdql::i64 next = 0;\n{read}"
             f"    {made}\n"
             f"    {function}({args});\n"
             f"    return {_handover(low.type, dest)};\n"
             f"  }});\n}}\n")
    result = {"value": low.type, "vec": _dense_layers(low.type, 1),
              "rows": _dense_layers(low.type, 1), "dense": _dense_layers(low.type, None)}[dest]
    return Kernel(name, text, low.inputs, result, em.spans, frozenset(em.ops), flats, dest,
                  tuple((work or {}).values()), tuple(checks))


def _destination(t: Type, dest: Destination, narrow: bool = False) -> tuple[str, str]:
    """The destination's C++ type, and the statement that makes it (after the inputs:
    the caller's memory and sizes come next)."""
    match dest:
        case "value":
            return cpp_type(t), f"{cpp_type(t)} result{{}};"
        case "vec":
            assert isinstance(t, DictT) and not t.dense, "a dictionary result"
            below = t.val  # a row of scalars: sdql::row, sorted when it is handed back
            if isinstance(below, DictT) and not below.dense and below.val in (REAL, INT):
                vec = f"sdql::vec<sdql::row<{cpp_type(below.val)}>>"
            else:
                vec = f"sdql::vec<{cpp_type(below)}>"
            return vec, f"{vec} result{{lens[next]}};"
        case "rows":
            assert isinstance(t, DictT) and isinstance(t.val, DictT) and not t.val.dense \
                and t.val.val in (REAL, INT), "a matrix of scalars"
            keys = ", std::int32_t" if narrow else ""
            csr = f"sdql::csr<{cpp_type(t.val.val)}{keys}>"
            return csr, f"{csr} result{{lens[next], lens[next + 1]}};  // rows, columns"
        case "dense":
            depth = len(_layers(t))
            assert depth and scalar_of(t) == REAL, "reals under dictionary layers"
            ref = f"sdql::dense_ref<{depth}>"
            return ref, f"{ref} result{{static_cast<double*>(data[next]), lens + next}};"
        case _:
            assert_never(dest)


def _handover(t: Type, dest: Destination) -> str:
    """How the entry hands the result back: a dense destination is the caller's already,
    a number goes in the status, any other value becomes an output."""
    if dest == "dense":
        return "nullptr"
    return "sdql::encode(result)" if isinstance(t, DictT) else "sdql::number(st, result)"


def _layers(t: Type) -> list[DictT]:
    out = []
    while isinstance(t, DictT):
        out.append(t)
        t = t.val
    return out


def _dense_layers(t: Type, depth: int | None) -> Type:
    """``t`` with its first ``depth`` layers (all, for None) dense."""
    if not isinstance(t, DictT) or depth == 0:
        return t
    return DictT(_dense_layers(t.val, None if depth is None else depth - 1), dense=True)


def parallel_loops(low: Lowered) -> dict[int, str]:
    """The loops at the top of the kernel that may run on several threads, by id, each
    with the destination it adds into: a counted loop (a range, a sub-array, an array's
    positions) whose every write goes into one destination declared outside it (the
    result, or an accumulator at the top), which it never reads.  A sum adds up in any
    grouping: each chunk of positions adds into its own zero, added in in chunk order."""
    out: dict[int, str] = {}
    declared = {RESULT}
    for st in low.body:
        match st:
            case Decl(name, t) if t != BOOL:
                declared.add(name)
            case Loop(_, _, dom, dt, body) if isinstance(dom, Range | SubArray) or (
                    isinstance(dom, Var) and dt.dense):
                roots, reads = effects(body, {})
                if len(roots) == 1 and (root := next(iter(roots))) in declared \
                        and root not in reads:
                    out[id(st)] = root
    return out


#: a CSR input's flat arrays, by their IR names: the lengths that are its row count (its
#: own, and those of inputs that the door checks are as long), its row pointers, column
#: keys and values
Rows = tuple[frozenset[str], str, str, str]


def rows_checked(low: Lowered, rows: Mapping[str, Rows]) -> dict[int, str]:
    """The loops that may check a CSR input block by block before reading it, by id, each
    with its input: the first statement at the top of the kernel that reads the input's
    arrays is a loop over all its rows, (0:n), whose body reads only the row it is at: the
    row pointers at it and at it + 1, the keys and values at the positions of that row
    (``sdql::checked_block``; after it, every row has been checked)."""
    out: dict[int, str] = {}
    for x, (n, pos, idx, val) in rows.items():
        first = next((st for st in low.body
                      if any({pos, idx, val} & free_vars(e) for e in _exprs(st))), None)
        match first:
            case Loop(key, v, Range(IntConst(0), Var(m)), _, body) if m in n \
                    and id(first) not in out and _row_only(body, (pos, idx, val), {key, v}):
                out[id(first)] = x
    return out


def values_in_result(low: Lowered, rows: Loop, arrays: tuple[str, str, str]) -> bool:
    """May the loop ``rows`` over a CSR input's rows (``rows_checked``) leave the check of
    its values to the result (``sdql::values_in_result``)?  So where each value is read
    once, as a factor of a term added into the result, whatever the data: the input's
    values (``arrays``: pos, idx, val) read nowhere but in the loop over each row's
    entries, a statement of the rows' loop itself, in one statement of that loop's own
    body, ``result[…] += v * …`` (or ``+= (v * …) * (…)``), a real with the entry's value
    v a factor, the result never assigned.  A value not finite then leaves the result so,
    and a zero adds nothing: the value of a call whose input holds no zero."""
    pos, idx, val = arrays

    def reads(st: Stmt) -> set[str]:  # (the names its expressions read)
        return effects([st], {})[1]

    if any(isinstance(x, Assign) and x.dest.root == RESULT for st in low.body
           for x in _statements(st)):
        return False
    match [st for st in rows.body if val in reads(st)]:
        case [Loop(q, v, SubArray(Var(a), Lookup(Var(p0), r0), Lookup(Var(p1), r1)), _, body)] \
                if a in (idx, val) and p0 == p1 == pos and r1 == Add(r0, IntConst(1)) \
                and r0 in (Var(rows.key), Var(rows.val)):
            value: Expr = Var(v) if a == val else Lookup(Var(val), Var(q))
            names = {val, v} if a == val else {val}  # (what reads a value)
        case _:
            return False
    if sum(val in reads(st) for st in low.body) != 1:
        return False
    match [st for st in body if names & reads(st)]:  # (a term of reals: a row's may be
        case [AddInto(Dest(root), term, t)] if t == REAL:  # empty, a value in it then lost)
            terms = _factors(term)
        case [MulAddInto(Dest(root), left, right, ta, tb)] if ta == tb == REAL:
            terms = _factors(left) + _factors(right)
        case _:
            return False
    return root == RESULT and value in terms


def _factors(e: Expr) -> list[Expr]:
    """The factors of a product (a, b for a * b), else e itself."""
    match e:
        case Mul(a, b):
            return _factors(a) + _factors(b)
    return [e]


def _statements(st: Stmt) -> Iterator[Stmt]:
    """``st`` and the statements inside it."""
    yield st
    if isinstance(st, Loop | When):
        for s in st.body:
            yield from _statements(s)


def _row_only(body: Sequence[Stmt], arrays: tuple[str, str, str], row: set[str]) -> bool:
    """Does ``body`` read the arrays (pos, idx, val) of one CSR input only at the row
    ``row`` names: pos(r) and pos(r + 1), idx and val at the keys of loops over
    idx(pos(r):pos(r + 1)) or val(pos(r):pos(r + 1))?"""
    pos, idx, val = arrays
    entries: set[str] = set()  # the keys of loops over the row's positions

    def bound(e: Expr) -> bool:  # pos(r) or pos(r + 1)
        match e:
            case Lookup(Var(p), Var(r)) if p == pos and r in row:
                return True
            case Lookup(Var(p), Add(Var(r), IntConst(1))) if p == pos and r in row:
                return True
        return False

    def expr(e: Expr) -> bool:
        match e:
            case _ if bound(e):
                return True
            case Lookup(Var(a), Var(q)) if a in (idx, val) and q in entries:
                return True
            case Var(a):
                return a not in arrays
        return all(expr(c) for c in children(e))

    def stmts(ss: Sequence[Stmt]) -> bool:
        for st in ss:
            match st:
                case Loop(key, _, SubArray(Var(a), lo, hi), _, inner) if a in (idx, val) \
                        and bound(lo) and bound(hi):
                    entries.add(key)
                    ok = stmts(inner)
                case Loop(key, _, Single(Var(r), value), _, inner) if r in row:
                    row.add(key)  # (the key is r: the same row)
                    ok = expr(value) and stmts(inner)
                case Loop(_, _, dom, _, inner) | When(dom, inner):
                    ok = expr(dom) and stmts(inner)
                case _:
                    ok = all(expr(e) for e in _exprs(st))
            if not ok:
                return False
        return True

    return stmts(body)


def workspaces(low: Lowered) -> dict[str, str]:
    """The accumulators that may be kept in an array of their keys' size (``sdql::work``,
    a dense workspace), each with the name of that size: declared at the top of the
    kernel, one layer of scalars whose keys a declared size bounds (``Decl.keys``),
    written by key only (``acc[k] += …``) and read only by loops over it and lookups into
    it, after it is pruned (SMMM's column sums of A: a store each instead of a hash map's
    probe)."""
    found = {st.name: st.keys for st in low.body
             if isinstance(st, Decl) and st.keys not in (None, NO_KEYS)
             and isinstance(st.type, DictT) and not st.type.dense and st.type.val in (REAL, INT)}

    def exprs(e: Expr) -> None:  # an accumulator read otherwise than by a lookup: not one
        match e:
            case Lookup(Var(), key):
                return exprs(key)
            case Var(x):
                found.pop(x, None)
        for c in children(e):
            exprs(c)

    def dest(d: Dest, keys: int | None) -> None:
        for k in d.keys:
            exprs(k)
        if d.root in found and (keys is None or len(d.keys) != keys):
            del found[d.root]

    def walk(stmts: Sequence[Stmt]) -> None:
        for st in stmts:
            match st:
                case Decl() | Prune():
                    pass
                case Bind(_, value, _):
                    exprs(value)
                case Loop(_, _, dom, _, body):
                    if not isinstance(dom, Var):
                        exprs(dom)
                    walk(body)
                case When(cond, body):
                    exprs(cond)
                    walk(body)
                case AddInto(d, value, _):
                    dest(d, 1)
                    exprs(value)
                case MulAddInto(d, a, b, _, _):
                    dest(d, 1)
                    exprs(a)
                    exprs(b)
                case Enter(_, d, _) | Assign(d, _):
                    dest(d, None)
                    if isinstance(st, Assign):
                        exprs(st.value)
                case _:
                    assert_never(st)

    walk(low.body)
    return found


@dataclass(frozen=True)
class ByKey:
    """A kernel whose one writing loop runs over the rows r of a compressed layer and, in
    each, over its entries p (``idx(pos(r):pos(r+1))``, inside other loops over the row
    or not), writing the result only at the row keyed by the entry's key ``j = idx(p)``:
    ``result[j][…] += …``, βAᵀA's rows.  Run by key instead — for each j, its entries
    (r, p) with r ascending (``sdql::by_key``, a counting sort of the positions), then the
    loops that were around the entries' loop — it writes the result's rows in key order,
    each whole before the next, appended as CSR (``rows``), and every entry's updates in
    the order the rows' loop made them: the same sums, rounded the same way."""

    rows: Loop  # over 0 .. n-1
    around: tuple[Loop, ...]  # between the two, outermost first (each holds the next only)
    entries: Loop  # over idx(pos(r):pos(r+1))
    pos: str
    idx: str


def by_key(low: Lowered) -> ByKey | None:
    writing = [st for st in low.body  # (the prune at the end ends the rows: not a write)
               if not isinstance(st, Prune) and RESULT in effects([st], {})[0]]
    if len(writing) != 1:
        return None
    match writing[0]:
        case Loop(r, rv, Range(IntConst(0), _), _, body) as outer:
            pass
        case _:
            return None
    around: list[Loop] = []
    while True:  # the loop over the row's entries whose key keys every write, if any
        match body:
            case (Loop(_, j, SubArray(Var(idx), Lookup(Var(pos), Var(a)), Lookup(
                    Var(pos2), Add(Var(b), IntConst(1)))), _, inner) as entries,) \
                    if pos == pos2 and a == b and a in (r, rv) and _keyed(inner, Var(j)):
                return ByKey(outer, tuple(around), entries, pos, idx)
            case (Loop(_, _, _, _, below) as loop,):
                around.append(loop)
                body = below
            case _:
                return None


def diagonal_rows(low: Lowered) -> tuple[Loop, Stmt] | None:
    """A kernel writing its rows in order (``results.in_order``: one loop at the top, over
    positions in ascending order, writes row k at its key k) whose loop writes exactly
    one entry at each key k, on the diagonal: one ``result[k][k] += v`` in the loop's
    body itself (not under a condition, not in an inner loop), and nothing else into the
    result — the Jacobian of an elementwise operation, VVA's identity.  Its entries are
    then stored a block of rows at a time, their keys checked once a block
    (``sdql::csr_writer::rows_ahead``)."""
    loop = next(st for st in low.body if isinstance(st, Loop) and RESULT in effects([st], {})[0])
    writes = [st for st in loop.body if RESULT in effects([st], {})[0]]
    match writes:  # (a product of integers is checked: sdql::mul_add_into's way)
        case [AddInto(Dest(_, (_, j))) as write]:
            pass
        case [MulAddInto(Dest(_, (_, j)), _, _, ta, tb) as write] if ta == tb == REAL:
            pass
        case _:
            return None
    return (loop, write) if j == Var(loop.key) else None


AHEAD = 16  # entries of the by-key loop: how far ahead its scattered reads are prefetched


def _exprs(st: Stmt) -> Iterator[Expr]:
    """The expressions of ``st`` and of the statements inside it."""
    match st:
        case Decl() | Prune():
            pass
        case Bind(_, value, _):
            yield value
        case Enter(_, dest, _):
            yield from dest.keys
        case Loop(_, _, dom, _, body) | When(dom, body):
            yield dom
            for s in body:
                yield from _exprs(s)
        case AddInto(dest, value, _) | Assign(dest, value):
            yield from dest.keys
            yield value
        case MulAddInto(dest, a, b, _, _):
            yield from (*dest.keys, a, b)
        case _:
            assert_never(st)


def _loops(st: Stmt) -> Iterator[Loop]:
    """The loops of ``st``, itself included, outermost first."""
    match st:
        case Loop(_, _, _, _, body) | When(_, body):
            if isinstance(st, Loop):
                yield st
            for s in body:
                yield from _loops(s)


def _keyed(stmts: Sequence[Stmt], j: Var) -> bool:
    """Does every write into the result in ``stmts`` go to row ``j`` (or a name bound to
    it)?"""
    ok = True

    def walk(stmts: Sequence[Stmt], rows: set[Expr], entered: set[str]) -> None:
        nonlocal ok
        for st in stmts:
            match st:
                case Loop(key, _, Single(k, _), _, body) if k in rows:  # key = j, once
                    walk(body, rows | {Var(key)}, entered)
                case Loop(_, _, _, _, body) | When(_, body):
                    walk(body, rows, entered)
                case Bind(name, Var() as x, _) if x in rows:
                    rows = rows | {Var(name)}
                case Enter(name, dest, _) if dest.root in entered:
                    entered = entered | {name}
                case Enter(name, dest, _) if dest.root == RESULT:
                    ok = ok and bool(dest.keys) and dest.keys[0] in rows
                    entered = entered | {name}
                case AddInto(dest) | MulAddInto(dest) | Assign(dest) if dest.root == RESULT:
                    ok = ok and bool(dest.keys) and dest.keys[0] in rows

    walk(stmts, {j}, set())
    return ok


def effects(stmts: Sequence[Stmt], alias: dict[str, str]) -> tuple[set[str], set[str]]:
    """The destinations outside ``stmts`` they write into (an entry entered, ``alias``, is
    its destination's), and the names their expressions read."""
    roots: set[str] = set()
    reads: set[str] = set()
    inside: set[str] = set()  # accumulators declared in here

    def read(*es: Expr) -> None:
        for e in es:
            reads.update(free_vars(e))

    def write(d: Dest) -> None:
        read(*d.keys)
        root = alias.get(d.root, d.root)
        if root not in inside:
            roots.add(root)

    for st in stmts:
        match st:
            case Decl(name, _):
                inside.add(name)
            case Bind(_, value, _):
                read(value)
            case Enter(name, dest, _):
                write(dest)
                alias = {**alias, name: alias.get(dest.root, dest.root)}
            case Loop(_, _, dom, _, body) | When(dom, body):
                read(dom)
                r, w = effects(body, alias)
                roots |= {x for x in r if x not in inside}
                reads |= w
            case AddInto(dest, value, _) | Assign(dest, value):
                write(dest)
                read(value)
            case MulAddInto(dest, a, b, _, _):
                write(dest)
                read(a, b)
            case Prune(name):
                if alias.get(name, name) not in inside:
                    roots.add(alias.get(name, name))
            case _:
                assert_never(st)
    return roots, reads


def translation_unit(kernels: Sequence[Kernel], door: bool = False) -> str:
    """A C++ file: the runtime, the unary operations of ``sdqlite.syntax.ops`` the kernels call
    (outside the domain, or not finite, is a failure), the kernels; ``door``: with the
    front door's checks (for the object of the runtime alone)."""
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
    return (f"// Generated by sdqlite (codegen/emit.py).\n#include \"{RUNTIME}\"\n"
            + (f"#include \"{DOOR}\"\n" if door else "") + "\n"
            + namespace + "\n".join(k.source for k in kernels))


def _param_type(t: Type, flat: str | None = None) -> str:
    if flat is not None:
        return f"const sdql::arr<{flat}>&"
    return cpp_type(t) if _scalar(t) else f"const {cpp_type(t)}&"


_NONE: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())


@dataclass
class Extents:
    """Flat arrays' lengths, as the formats state them (``Format.lengths``, in the kernel's
    flat names) and the layouts and the front door make true of the data: a scalar input
    ``n``, ``n+1``, ``@p`` (the last entry of pointer array ``p``, every entry of which lies
    in 0 .. it: the door checks p monotone from 0) or ``@p+1``.  A loop over positions that
    such a length bounds reads the arrays of that length without a check (``sdql::at``):

      for k in (0:n), for k in a(0:n) with a of length n   k < n    (a COO's entries)
      for k in a(p(e1):p(e2)) with a of length @p          k < @p   (a row's entries)

    and the arrays one longer (a pointer array of the layer below) at k and at k + 1.
    ``same`` names counts the door makes equal to another (a dense input's length to a
    CSR input's rows, their declared sizes one: ``api._rows``)."""

    lengths: dict[str, str]
    same: dict[str, str] = field(default_factory=dict)

    def of(self, count: str) -> tuple[frozenset[str], frozenset[str]]:
        """The arrays a position below ``count`` reads (those of that length or one more),
        and those the next position reads (one more)."""
        counts = {count, self.same.get(count, count)}
        longer = frozenset(a for a, n in self.lengths.items() if n in {c + "+1" for c in counts})
        return frozenset(a for a, n in self.lengths.items() if n in counts) | longer, longer

    def inside(self, dom: Expr) -> tuple[frozenset[str], frozenset[str]]:
        """The arrays a loop over ``dom`` may read at its key, and at its key + 1, unchecked."""
        match dom:
            case Range(IntConst(0), Var(n)):
                return self.of(n)
            case SubArray(Var(a), IntConst(0), Var(n)) if self.lengths.get(a) == n:
                return self.of(n)
            case SubArray(Var(a), Lookup(Var(p), _), Lookup(Var(q), _)) \
                    if p == q and self.lengths.get(a) == "@" + p:
                return self.of("@" + p)
        return frozenset(), frozenset()


@dataclass
class _Emitter:
    names: Names
    types: dict[str, Type]  # IR name -> type
    spans: list[Span | None]
    ops: set[str]
    parallel: dict[int, str] = field(default_factory=dict)  # id(loop) -> its destination
    extents: Extents = field(default_factory=lambda: Extents({}))
    #: a loop key -> the flat arrays it reads unchecked, at it and at it + 1
    unchecked: dict[str, tuple[frozenset[str], frozenset[str]]] = field(default_factory=dict)
    by_key: ByKey | None = None  # the rows' loop to run by key (a CSR result)
    #: the checks (their parameters) of CSR inputs whose values the result checks
    summed: set[str] = field(default_factory=set)
    #: the rows' loop writing one entry a row on the diagonal, and that write
    #: (``diagonal_rows``); ``bare`` while its write is emitted as a bare store
    diagonal: tuple[Loop, Stmt] | None = None
    bare: bool = False
    work: dict[str, str] = field(default_factory=dict)  # a workspace -> its size's C++ name
    flat: frozenset[str] = frozenset()  # the inputs read as flat arrays
    #: a loop that checks a CSR input's rows, by id -> the kernel's parameter saying the
    #: input's column count (or -1) and the input's pos, idx and val (``rows_checked``)
    checks: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)
    #: an index array -> the declared size its entries are below; a dense input -> the
    #: declared size that is its length; a loop's value read from an index array -> the
    #: size it is below (the door checks all three: keys inside the shape, shapes agreeing)
    entries_below: dict[str, str] = field(default_factory=dict)
    length: dict[str, str] = field(default_factory=dict)
    within: dict[str, str] = field(default_factory=dict)

    # ---- statements ---------------------------------------------------------------------
    def block(self, stmts: Sequence[Stmt], depth: int) -> str:
        return "".join(self.stmt(s, depth) for s in stmts)

    def stmt(self, s: Stmt, depth: int) -> str:
        pad = "  " * depth
        match s:
            case Decl(name, t) if name in self.work:  # (one layer of scalars)
                self.types[name] = t
                assert isinstance(t, DictT)
                work = f"sdql::work<{cpp_type(t.val)}>"
                return f"{pad}{work} {self.names(name)}{{{self.work[name]}}};\n"
            case Decl(name, t):
                self.types[name] = t
                return f"{pad}{cpp_type(t)} {self.names(name)}{{}};\n"
            case Bind(name, value, t):
                self.types[name] = t
                code, _ = self.expr(value)
                decl = f"const {cpp_type(t)}" if _scalar(t) else "const auto&"
                return f"{pad}{decl} {self.names(name)} = {code};\n"
            case Enter(name, dest, _):  # a destination: written into, never read
                return f"{pad}auto&& {self.names(name)} = {self.dest(dest)};\n"
            case Loop(key, val, dom, dt, body) if self.by_key is not None \
                    and s is self.by_key.rows:
                return self.keyed(self.by_key, depth)
            case Loop(key, val, dom, dt, body):
                return self.loop(key, val, dom, dt, body, depth, self.parallel.get(id(s)),
                                 self.checks.get(id(s)), self.diagonal is not None
                                 and s is self.diagonal[0])
            case When(cond, body):
                code, _ = self.expr(cond)
                return f"{pad}if ({code}) {{\n{self.block(body, depth + 1)}{pad}}}\n"
            case AddInto(dest, value, _) | MulAddInto(dest, value, _, _, _) \
                    if self.bare and self.diagonal is not None and s is self.diagonal[1]:
                (code, _), k = self.expr(value), self.expr(dest.keys[0])[0]
                if isinstance(s, MulAddInto):
                    code = f"{code} * {self.expr(s.right)[0]}"
                return f"{pad}{self.names(dest.root)}.diagonal({k}, {code});\n"
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

    def counted(self, k: str, bounds: tuple[str, str], value: str, body: Sequence[Stmt],
                depth: int, check: tuple[str, str, str, str] | None = None,
                diagonal: bool = False) -> str:
        """A loop over the positions bounds[0] .. bounds[1]-1 in blocks of ``sdql::POLL``:
        it polls for Ctrl-C once a block, so that the positions of a block run as a plain
        counted loop (one the compiler vectorizes).  A loop over a CSR input's rows that
        ``check``s them (``rows_checked``) has blocks of about ``sdql::CHECK_BLOCK``
        entries, each checked before it runs.  The ``diagonal`` rows' loop
        (``diagonal_rows``) runs a block with bare stores where the writer finds its rows'
        keys inside and room for their entries, else with the writer's checks: the body
        twice (the one with a call that may add its way kept its cursors in memory: VVA's
        kernel 2.3 ns a row, against 1.3 so)."""
        pad = "  " * depth
        end, stop = self.names.fresh(f"{k}_end"), self.names.fresh(f"{k}_stop")
        block = f"sdql::block_end({k}, {end})"
        if check is not None:
            inner, *arrays = check
            reads = ", ".join(map(self.names, arrays))
            values = ", sdql::VALUES_IN_RESULT" if inner in self.summed else ""
            block = f"sdql::checked_block({k}, {end}, {reads}, {inner}{values})"
        head = (f"{pad}for (sdql::i64 {k} = {bounds[0]}, {end} = {bounds[1]}; {k} < {end};) {{\n"
                f"{pad}  SDQL_POLL();  // Ctrl-C stops the kernel\n")
        if not diagonal:
            return (f"{head}{pad}  for (const sdql::i64 {stop} = {block}; {k} < {stop}; "
                    f"++{k}) {{\n{pad}    {value};\n"
                    f"{self.block(body, depth + 2)}{pad}  }}\n{pad}}}\n")
        d = self.names(RESULT)
        self.bare = True
        bare = self.block(body, depth + 3)
        self.bare = False
        return (f"{head}{pad}  const sdql::i64 {stop} = {block};\n"
                f"{pad}  if ({d}.rows_ahead({k}, {stop})) {{  // rows {k} .. {stop}-1: bare\n"
                f"{pad}    for (; {k} < {stop}; ++{k}) {{\n{pad}      {value};\n{bare}"
                f"{pad}    }}\n{pad}    {d}.rows_behind({stop});\n"
                f"{pad}  }} else {{\n"
                f"{pad}    for (; {k} < {stop}; ++{k}) {{\n{pad}      {value};\n"
                f"{self.block(body, depth + 3)}{pad}    }}\n{pad}  }}\n{pad}}}\n")

    def keyed(self, b: ByKey, depth: int) -> str:
        """The rows' loop of ``b`` run by key: for each key j of the result's rows, the
        entries (r, p) whose key is j, r ascending; in each, the loops that were around the
        entries' loop, then its body."""
        pad = "  " * depth
        rows, entries = b.rows, b.entries
        assert isinstance(rows.dom, Range)
        for x in (rows.key, rows.val, entries.key, entries.val):
            self.types[x] = INT
        self.unchecked[rows.key] = self.unchecked[rows.val] = self.extents.inside(rows.dom)
        self.unchecked[entries.key] = self.extents.inside(entries.dom)
        r, rv, p, j = (self.names(x) for x in (rows.key, rows.val, entries.key, entries.val))
        tv, q, q_end, j_end, j_stop = (self.names.fresh(x) for x in (
            "by_key", "q", "q_end", f"{j}_end", f"{j}_stop"))
        inner = "  " * (depth + 4)
        body: tuple[Stmt, ...] = entries.body
        for loop in reversed(b.around):  # (over the row r, inside the entry now)
            body = (Loop(loop.key, loop.val, loop.dom, loop.dom_type, body),)
        d = self.names(RESULT)
        whole = self.names.fresh(f"{d}_all")
        at_entry, rows_read = self.read_ahead(b, body)
        expect = (f"{pad}  {d}.expect({tv}.pairs_in({j}_lo, {j}_hi));  // each entry's row "
                  f"written by the row's entries\n" if (b.pos, b.idx) in rows_read else "")
        return (f"{pad}{{  // by key: the result's rows in order, each whole\n"
                f"{pad}  const auto {tv} = sdql::by_key({self.names(b.pos)}, "
                f"{self.names(b.idx)}, {self.expr(rows.dom.hi)[0]}, {d}.rows());\n"
                f"{pad}  sdql::parallel(sdql::i64(0), {tv}.keys(), {d}, [&](sdql::i64 {j}_lo, "
                f"sdql::i64 {j}_hi, auto& {whole}) {{  // rows in chunks\n"
                f"{pad}  decltype(auto) {d} = sdql::view({whole});\n"
                + expect
                + f"{pad}  for (sdql::i64 {j} = {j}_lo, {j_end} = {j}_hi; {j} < {j_end};) {{\n"
                f"{pad}    SDQL_POLL();  // Ctrl-C stops the kernel\n"
                f"{pad}    for (const sdql::i64 {j_stop} = sdql::block_end({j}, {j_end}); "
                f"{j} < {j_stop}; ++{j}) {{\n"
                f"{pad}      for (sdql::i64 {q} = {tv}.pos[{j}], {q_end} = {tv}.pos[{j} + 1]; "
                f"{q} < {q_end}; ++{q}) {{\n"
                + self.ahead(tv, q, at_entry, rows_read, inner)
                + f"{inner}const sdql::i64 {r} = {tv}.row[{q}];\n"
                + (f"{inner}const sdql::i64 {rv} = {r};\n" if rv != r else "")
                + f"{inner}const sdql::i64 {p} = {tv}.at[{q}];\n"
                + self.block(body, depth + 4)
                + f"{pad}      }}\n{pad}    }}\n{pad}  }}\n{pad}  }});\n{pad}}}\n")

    def read_ahead(self, b: ByKey, body: Sequence[Stmt]) -> tuple[
            frozenset[str], dict[tuple[str, str], frozenset[str]]]:
        """What the by-key loop's entries read from flat arrays at places the counting
        sort scattered: arrays at the entry's position p, and rows r's entries
        (``idx(pos(r):pos(r+1))``, each (pos, idx) with the arrays read at their
        positions)."""
        def read_at(stmts: Sequence[Stmt], key: str) -> frozenset[str]:  # a(key), a flat
            return frozenset(t.dict.name for st in stmts for e in _exprs(st)
                             for t in subterms(e) if isinstance(t, Lookup)
                             and isinstance(t.dict, Var) and t.dict.name in self.flat
                             and t.key == Var(key))

        rows = {b.rows.key, b.rows.val}
        rows_read: dict[tuple[str, str], frozenset[str]] = {}
        for loop in (x for st in body for x in _loops(st)):
            match loop.dom:
                case SubArray(Var(idx), Lookup(Var(pos), Var(x)), _) \
                        if x in rows and {idx, pos} <= self.flat:
                    rows_read[pos, idx] = rows_read.get((pos, idx), frozenset()) | read_at(
                        loop.body, loop.key)
        return read_at(body, b.entries.key), rows_read

    def ahead(self, tv: str, q: str, at_entry: frozenset[str],
              rows_read: Mapping[tuple[str, str], frozenset[str]], pad: str) -> str:
        """Prefetches for the entry AHEAD places on (the row's pointer with it) and, half
        as far, for its row's first entries: the counting sort's order is the rows' order
        scattered, a cache miss each (βAᵀA: 0.44 s to 0.33 s at n = 10⁵, density 10⁻⁴)."""
        far = [f"sdql::ahead({self.names(a)}, {tv}.at[{q} + {AHEAD}]);" for a in sorted(at_entry)]
        far += [f"sdql::ahead({self.names(pos)}, {tv}.row[{q} + {AHEAD}]);"
                for pos, _ in sorted(rows_read)]
        near = [f"const sdql::i64 s = sdql::lookup({self.names(pos)}, {tv}.row[{q} + "
                f"{AHEAD // 2}]); " + " ".join(f"sdql::ahead({self.names(a)}, s);"
                                                for a in sorted({idx, *reads}))
                for (pos, idx), reads in sorted(rows_read.items())]
        out = ""
        if far:
            out += f"{pad}if ({q} + {AHEAD} < {tv}.entries()) {{ {' '.join(far)} }}\n"
        for line in near:
            out += f"{pad}if ({q} + {AHEAD // 2} < {tv}.entries()) {{ {line} }}\n"
        return out

    def loop(self, key: str, val: str, dom: Expr, dt: DictT, body: Sequence[Stmt],
             depth: int, into: str | None = None,
             check: tuple[str, str, str, str] | None = None, diagonal: bool = False) -> str:
        """sum(<key, val> in dom): a counted loop over (lo:hi) or a(lo:hi), a for-each over
        a dictionary, every position of an array.  A counted loop ``into`` a destination
        (``parallel_loops``) runs its positions in chunks on several threads, each chunk
        adding into its own copy of the destination (``sdql::parallel``)."""
        pad = "  " * depth
        self.types[key], self.types[val] = INT, dt.val
        self.unchecked[key] = self.extents.inside(dom)  # (binders are renamed apart)
        if isinstance(dom, Range):  # each position its own value
            self.unchecked[val] = self.unchecked[key]
        k, v = self.names(key), self.names(val)
        elem = f"const {cpp_type(dt.val)}" if _scalar(dt.val) else "const auto&"
        before = ""  # a statement the loop needs first
        match dom:
            case Range(lo, hi):  # positions lo .. hi-1, each its own value
                bounds, value = (self.expr(lo)[0], self.expr(hi)[0]), f"const sdql::i64 {v} = {k}"
            case SubArray(a, lo, hi):
                arr = f"{k}_arr"
                before = f"{pad}const auto& {arr} = {self.expr(a)[0]};\n"
                bounds = self.expr(lo)[0], self.expr(hi)[0]
                read = "at" if isinstance(a, Var) and a.name in self.unchecked[key][0] \
                    else "lookup"
                if isinstance(a, Var) and a.name in self.entries_below:
                    self.within[val] = self.entries_below[a.name]
                value = f"{elem} {v} = sdql::{read}({arr}, {k})"
            case Single(one_key, one_value):  # one entry unless its value is zero: no loop
                if isinstance(one_key, Var) and one_key.name in self.unchecked:
                    self.unchecked[key] = self.unchecked[one_key.name]  # (the same position)
                return (f"{pad}if ({elem} {v} = {self.expr(one_value)[0]}; "
                        f"!sdql::is_zero({v})) {{\n"
                        f"{pad}  const sdql::i64 {k} = {self.expr(one_key)[0]};\n"
                        f"{self.block(body, depth + 1)}{pad}}}\n")
            case Var() if not dt.dense:
                head = f"for (const auto& [{k}, {v}] : {self.expr(dom)[0]}) {{\n"
                poll = f"{pad}  SDQL_POLL();  // Ctrl-C stops the kernel\n"
                return f"{pad}{head}{poll}{self.block(body, depth + 1)}{pad}}}\n"
            case Var():
                d = self.expr(dom)[0]
                bounds, value = (f"{d}.start", f"{d}.end()"), f"{elem} {v} = {d}.at({k})"
            case _:
                raise CodegenError("a loop over a domain that was not named (internal)",
                                   dom.span)
        if into is None:
            return before + self.counted(k, bounds, value, body, depth, check, diagonal)
        # A chunk reads the inputs and scalars it uses from copies of its own (a view is
        # three words): what threads share may change under any store, for all the
        # compiler knows, and would be read again at every position.
        d = self.names(into)
        whole = self.names.fresh(f"{d}_all")
        _, reads = effects(body, {})  # (the bounds are read outside the chunks)
        table = dict(self.names.table)
        copies = ""
        for x in sorted(reads - {into, key, val}):  # (those bound inside are not typed yet)
            t = self.types.get(x)
            if t is not None and (_scalar(t) or (isinstance(t, DictT) and t.dense)):
                outer = self.names(x)
                self.names.table[x] = mine = self.names.fresh(f"{outer}_c")
                copies += f"{pad}  const auto {mine} = {outer};\n"
        text = (f"{before}{pad}sdql::parallel({bounds[0]}, {bounds[1]}, {d}, "
                f"[&](sdql::i64 {k}_lo, sdql::i64 {k}_hi, auto& {whole}) {{  // in chunks\n"
                f"{pad}  decltype(auto) {d} = sdql::view({whole});\n{copies}"
                + self.counted(k, (f"{k}_lo", f"{k}_hi"), value, body, depth + 1, check)
                + f"{pad}}});\n")
        self.names.table = table
        return text

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
            case Lookup(Var(a) as d, Var(k) as key, _, t) if a in self.unchecked.get(k, _NONE)[0]:
                assert t is not None, "elaborated"  # a position a loop bounds (Extents)
                return f"sdql::at({self.expr(d)[0]}, {self.expr(key)[0]})", t
            case Lookup(Var(a) as d, Add(Var(k), IntConst(1)) as key, _, t) \
                    if a in self.unchecked.get(k, _NONE)[1]:
                assert t is not None, "elaborated"
                return f"sdql::at({self.expr(d)[0]}, {self.expr(key)[0]})", t
            case Lookup(Var(a) as d, Var(k) as key, _, t) \
                    if self.length.get(a) is not None and self.length.get(a) == self.within.get(k):
                assert t is not None, "elaborated"  # x(j), j an entry of an index array
                return f"sdql::at({self.expr(d)[0]}, {self.expr(key)[0]})", t  # below x's size
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

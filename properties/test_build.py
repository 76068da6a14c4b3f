"""Laws of the C++ backend's boundary with the machine: building (``codegen/build.py``)
and calling (``codegen/native.py``), DESIGN.md "Build and load".

1. *The object cache is a function of what an object depends on*: a source built twice
   is compiled once and loaded from the cache after; a different source, other flags
   or another compiler is another object; the cache keeps the exact source it compiled;
   the object does what the source says.  Two builds of one source at once (threads or
   processes) compile it once: the second waits for the first and loads its object.
2. *The compiler's identity holds the target exactly when the flags ask for the
   machine's own* (``-march=native``/``-mtune=native``): an object built for this
   machine's target is not taken for one built for another.
3. *A compiler failure is a BuildError that shows what the compiler said and leaves
   nothing behind*: the generated file's path, the compiler's first 12 non-blank lines
   in order (``...`` when it said more), the exit status when it said nothing, and no
   object, half-written or whole, in the cache; the next build with a working compiler
   succeeds.  A missing Boost names the Debian package.
4. *Where the cache is comes from the environment, in a stated order*
   (``SDQLITE_CACHE``, else ``XDG_CACHE_HOME/sdqlite``, else ``~/.cache/sdqlite``), and
   an error names the variable and the path it could not create (the cache itself
   when the system names none), each shortened to 80 characters.
5. *A kernel's failure status reads as the interpreter's error*: a unary operation's
   domain or range failure is the interpreter's own message at the kernel's span (no
   span for a status that names none); overflow, memory and out-of-size writes have
   their own messages, each for the status the runtime sets by its name (Ctrl-C is
   Python's KeyboardInterrupt); a buffer handed back is read in place, and owned as long
   as an array over it lives.
6. *Python calls the object as C++ defines it, and releases what it hands back*: each
   function Python calls is declared to ctypes with C++'s return type and parameter
   sizes, and after every call, succeeded or failed, no result is left unreleased.
7. *A cache entry is loaded only when it is the object of its key*: truncated (its hash
   rewritten to match, too), replaced by another kernel's object (its hash too), a pipe
   in its place, its hash missing or garbled, or a build's temporary file left by a
   process that is gone, the next build removes it and builds anew (in the process that
   finds it too), and the kernel gives its value; a temporary file of a build still
   under way is left alone.  A process killed while it builds takes its compiler with
   it (the driver and the driver's own children), and the next build leaves no
   temporary behind.
8. *A kernel is built with the runtime precompiled exactly when the precompiled runtime
   is the one its build recorded*: once the cache holds two objects, the next build of a
   file that includes the runtime makes it (``pch-KEY/``, its hash recorded beside it) and
   builds against it; one replaced by another runtime's precompiled header is taken only
   with its hash recorded; replaced, truncated or garbage (its hash rewritten to match), a
   pipe in its place, its hash missing, the build gives the kernel's value, and a faulty
   one is not used again.  It is made once (two builds at once: once, under the lock; a
   failed making leaves nothing, and the kernel reads the header), its hash is read once
   a process, and a kernel whose own code fails keeps it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import gc
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import sdqlite
from codegen import build as B
from codegen import inputs
from codegen import native as N
from codegen.emit import Kernel, translation_unit
from sdqlite.errors import BuildError, CodegenError, EvalError
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.types import REAL
from semantics.interp import unop

EXAMPLES = min(20, settings().max_examples)  # each example runs the compiler


def _put(values: dict[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@contextmanager
def environment(**values: str | None) -> Iterator[None]:
    """The environment variables set (None: unset) for the block, then as they were."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        _put(values)
        yield
    finally:
        _put(saved)


@contextmanager
def fresh_cache() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="sdqlite-build-"))
    try:
        with environment(SDQLITE_CACHE=str(root)):
            yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def c_source(value: int, note: str) -> str:
    """A translation unit whose one function returns ``value``."""
    return f'extern "C" long long f() {{ return {value}LL; }}\n// {note}\n'


def call_f(built: B.Built) -> int:
    f = built.library.f
    f.restype = ctypes.c_longlong
    return int(f())


notes = st.text(st.characters(codec="ascii", categories=("L", "N")), max_size=12)
values = st.integers(-(2**62), 2**62)


# ---- 1. the cache -----------------------------------------------------------------------


@settings(max_examples=EXAMPLES)
@given(values, values, notes, st.sampled_from(["-O0", "-O1"]))
def test_the_cache_is_a_function_of_source_flags_and_compiler(
        a: int, b: int, note: str, flags: str) -> None:
    other = "-O1" if flags == "-O0" else "-O0"
    with fresh_cache() as top, environment(SDQLITE_CXXFLAGS=flags, CXX=None):
        root = top / "not" / "yet"  # made, with its parents, by the first build
        os.environ["SDQLITE_CACHE"] = str(root)
        first = B.build(c_source(a, note))
        assert not first.cached and call_f(first) == a
        assert first.source.read_text() == c_source(a, note) and first.path.parent == root
        again = B.build(c_source(a, note))
        assert again.cached and again.path == first.path and call_f(again) == a
        changed = B.build(c_source(b, note + "x"))  # another source: another object
        assert not changed.cached and changed.path != first.path and call_f(changed) == b
        with environment(SDQLITE_CXXFLAGS=other):  # other flags: another object
            flagged = B.build(c_source(a, note))
            assert not flagged.cached and flagged.path != first.path
        compiler = root / "other-compiler"  # another compiler: another object
        compiler.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo other; fi\n'
                            f'exec {B.compiler()} "$@"\n')
        compiler.chmod(0o755)
        with environment(CXX=str(compiler)):
            moved = B.build(c_source(a, note))
            assert not moved.cached and moved.path != first.path and call_f(moved) == a
        # every object is whole and loadable, and nothing but sources, objects, their
        # hashes and locks
        assert {p.suffix for p in root.iterdir()} <= {".cpp", ".so", ".sha256", ".lock", ""}


@settings(max_examples=min(3, settings().max_examples))
@given(values)
def test_two_builds_at_once_compile_once(value: int) -> None:
    with fresh_cache() as root, environment(SDQLITE_CXXFLAGS="-O0"):
        log = root / "compilations"
        slow = root / "slow-cxx"  # logs each compilation and takes its time over it
        slow.write_text(f'#!/bin/sh\ncase "$*" in *" -o "*) echo x >> {log}; sleep 0.3;; '
                        f'esac\nexec {B.compiler()} "$@"\n')
        slow.chmod(0o755)
        source = c_source(value, "at once")
        with environment(CXX=str(slow)), ThreadPoolExecutor(2) as pool:
            built = list(pool.map(lambda _: B.build(source), range(2)))
        assert log.read_text() == "x\n"  # one compilation
        assert built[0].path == built[1].path and [call_f(b) for b in built] == [value] * 2


# ---- 2. the compiler's identity ---------------------------------------------------------

OPTIONS = ["-O0", "-O2", "-g", "-march=native", "-mtune=native", "-march=x86-64",
           "-DNATIVE=-march=native"]


@settings(max_examples=min(30, settings().max_examples))
@given(st.lists(st.sampled_from(OPTIONS), max_size=3, unique=True))
@example(["-march=native"]).via("each option that names the machine alone")
@example(["-mtune=native"]).via("each option that names the machine alone")
def test_the_identity_holds_the_target_exactly_for_native_builds(opts: list[str]) -> None:
    cxx = B.compiler()
    version = B._identity(cxx, ())
    identity = B._identity(cxx, tuple(opts))
    native = any(o in ("-march=native", "-mtune=native") for o in opts)
    assert identity.startswith(version) and version
    assert (len(identity) > len(version)) == native
    if native:
        assert "-march=" in identity[len(version):]  # what the compiler says about targets


# ---- 3. a compiler failure -----------------------------------------------------------------

# what a compiler prints: printable lines (sh's echo reads backslashes, the quote ends it)
lines = st.text(st.characters(min_codepoint=32, max_codepoint=126, exclude_characters="'\\"),
                max_size=30)


@settings(max_examples=min(60, settings().max_examples))
@given(st.lists(lines, max_size=20), st.integers(0, 3), st.booleans())
@example(["x"] * 12, 1, False).via("twelve lines are all shown")
@example(["x"] * 13, 1, False).via("the thirteenth is left off")
@example(["", " ", "err"], 2, True).via("blank lines are not counted")
@example([], 0, False).via("a compiler that succeeds writing nothing")
@example([], 4, True).via("a compiler that fails silently, leaving a partial object")
@example(["fatal error: boost/unordered/unordered_flat_map.hpp: No such file"], 1, False)
@example(["fatal error: 'boost/unordered/unordered_flat_map.hpp' file not found"], 1, False)
@example(["In file included from /usr/include/boost/unordered/unordered_flat_map.hpp:13,",
          "x.cpp:8:29: error: 'begin' was not declared in this scope"], 1, False).via(
    "an error in generated code, the header named on the way, was said to be Boost missing")
def test_a_compiler_failure_shows_what_it_said_and_leaves_nothing(
        said: list[str], status: int, partial: bool) -> None:
    with fresh_cache() as root:
        fake = root / "fake-cxx"  # a compiler that says `said` and exits with `status`
        printed = "".join("echo '" + ln.replace("'", "'\\''") + "' >&2\n" for ln in said)
        # the object is the argument after -o; a partial one is written when asked
        touch = ('out=; for a; do [ "$prev" = -o ] && out="$a"; prev="$a"; done\n'
                 'echo partial > "$out"\n') if partial else ""
        fake.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && exit 0\n{printed}{touch}"
                        f"exit {status}\n")
        fake.chmod(0o755)
        source = c_source(len(said), f"status {status}")
        if status == 0 and partial:  # "succeeds" with an object that is no object
            with environment(CXX=str(fake), SDQLITE_CXXFLAGS="-O0"), \
                    pytest.raises(BuildError, match=r"^cannot load .*\.so"):
                B.build(source)
            return
        with environment(CXX=str(fake), SDQLITE_CXXFLAGS="-O0"), \
                pytest.raises(BuildError) as caught:
            B.build(source)
        message = caught.value.message
        assert not list(root.glob("*.so*"))  # no object, whole or half-written
        shown = [ln for ln in said if ln.strip()]
        if any(m in ln for ln in said for m in ("unordered_flat_map.hpp: No such file",
                                                 "unordered_flat_map.hpp' file not found")):
            assert B.HEADER_PACKAGE in message and "apt-get install" in message
        else:
            head, _, body = message.partition(":\n")
            cpp = head.removeprefix("the C++ compiler failed on the generated file ")
            assert cpp != head and Path(cpp).read_text() == source
            if shown:
                assert body.split("\n") == shown[:12] + (["..."] if len(shown) > 12 else [])
            elif status:
                assert body == f"{fake} exited with status {status}, printing nothing"
            else:
                assert body == f"{fake} wrote no shared object, printing nothing"
        with environment(CXX=None, SDQLITE_CXXFLAGS="-O0"):  # nothing in the way after
            assert call_f(B.build(source)) == len(said)


@given(st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=100))
def test_a_missing_compiler_says_how_to_install_one(name: str) -> None:
    cxx = "no-such-cxx-" + name
    with environment(CXX=cxx), pytest.raises(BuildError) as caught:
        B.build(c_source(0, name))
    assert caught.value.message == (f"no C++ compiler: {B._shown(cxx)!r} was not found (on "
                                    f"Debian: sudo apt-get install g++ {B.HEADER_PACKAGE})")


# ---- 4. where the cache is ---------------------------------------------------------------

paths = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1,
                max_size=120).map(lambda s: "/tmp/" + s)


@given(st.one_of(st.none(), st.just(""), paths), st.one_of(st.none(), st.just(""), paths))
def test_the_cache_directory_comes_from_the_environment_in_order(
        cache: str | None, xdg: str | None) -> None:
    with environment(SDQLITE_CACHE=cache, XDG_CACHE_HOME=xdg):
        where, origin = B.cache_dir()
    if cache:
        assert where == Path(cache) and origin == f"SDQLITE_CACHE={B._shown(cache)}"
    elif xdg:
        assert where == Path(xdg) / "sdqlite" and origin == f"XDG_CACHE_HOME={B._shown(xdg)}"
    else:
        assert where == Path.home() / ".cache" / "sdqlite" and str(where) in origin


@given(st.text(max_size=200))
@example("a" * 80).via("80 characters are shown whole")
@example("a" * 81).via("81 are shortened")
def test_a_shown_path_is_at_most_80_characters_and_keeps_both_ends(text: str) -> None:
    shown = B._shown(text)
    if len(text) <= 80:
        assert shown == text
    else:
        assert len(shown) == 83 and shown == text[:40] + "..." + text[-40:]


@settings(max_examples=min(20, settings().max_examples))
@given(st.integers(0, 3), st.integers(1, 300))
def test_a_cache_that_cannot_hold_files_is_an_error_naming_where_it_came_from(
        depth: int, length: int) -> None:
    top = Path(tempfile.mkdtemp(prefix="sdqlite-cache-"))
    try:
        (top / "afile").write_text("")
        cache = top / "afile" / Path(*(["d"] * depth)) / ("n" * length)
        with environment(SDQLITE_CACHE=str(cache), SDQLITE_CXXFLAGS="-O0"), \
                pytest.raises(BuildError) as caught:
            B.build(c_source(depth, "unwritable"))
        message = caught.value.message
        shown = B._shown(str(cache))
        assert message.startswith(f"SDQLITE_CACHE={shown}: cannot create {shown}: ")
        assert message.endswith(("Not a directory", "File name too long"))
    finally:
        shutil.rmtree(top)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc")
def test_a_cache_that_takes_no_new_files_names_the_file_it_could_not_create() -> None:
    with environment(SDQLITE_CACHE="/proc", SDQLITE_CXXFLAGS="-O0"), \
            pytest.raises(BuildError) as caught:
        B.build(c_source(7, "in /proc"))
    assert re.fullmatch(r"SDQLITE_CACHE=/proc: cannot create /proc/[0-9a-f]+\.lock: No such "
                        r"file or directory", caught.value.message)


def test_a_cache_that_fails_without_naming_a_file_is_named_itself(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_locks(*_: object) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)  # as codegen/build.py calls it
    with fresh_cache() as root, environment(SDQLITE_CXXFLAGS="-O0"), \
            pytest.raises(BuildError) as caught:
        B.build(c_source(8, "no locks"))
    assert caught.value.message == (f"SDQLITE_CACHE={root}: cannot create {root}: "
                                    f"{os.strerror(errno.ENOLCK)}")


def test_a_relative_cache_is_under_the_working_directory_and_never_an_option(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``SDQLITE_CACHE=-rf``, relative and led by a dash (it reached g++ as an option): the
    cache is the directory ``-rf`` under the working directory, the object is built there
    and gives its value, and no argument the compiler is given is ``-rf``."""
    log = tmp_path / "arguments"
    cxx = tmp_path / "logging-cxx"  # writes each argument on a line, then compiles
    cxx.write_text(f"#!/bin/sh\nfor a; do printf '%s\\n' \"$a\" >> {log}; done\n"
                   f'exec {B.compiler()} "$@"\n')
    cxx.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    with environment(SDQLITE_CACHE="-rf", CXX=str(cxx), SDQLITE_CXXFLAGS="-O0"):
        where, origin = B.cache_dir()
        built = B.build(c_source(13, "a dash-led cache"))
    there = tmp_path.resolve() / "-rf"
    assert where == there and origin == "SDQLITE_CACHE=-rf"
    assert not built.cached and built.path.parent == there and call_f(built) == 13
    arguments = log.read_text().splitlines()
    assert "-o" in arguments and "-rf" not in arguments
    assert all(a.startswith(str(there)) for a in arguments if "-rf" in a)


# ---- 5. a kernel's failure status ----------------------------------------------------------


@pytest.fixture(scope="module")
def native() -> Iterator[N.Native]:
    """A built kernel with two spans (log and sqrt)."""
    with fresh_cache(), environment(SDQLITE_CXXFLAGS="-O0"):
        compiled = sdqlite.compile("x : real\nlog(x) + sqrt(x)")
        spec = compiled.specialize(compiled.read({"x": 1.0}))
        assert spec.native is not None and len(spec.kernel.spans) == 2
        yield spec.native


OPS = list(UNARY_OPS)
CODES = [N.DOMAIN, N.RANGE, N.REAL_OVERFLOW, N.INT_OVERFLOW, N.NO_MEMORY, N.OUTSIDE,
         N.INTERRUPTED, 0, 6]
reals = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@given(st.sampled_from(CODES), st.integers(0, len(OPS) - 1), st.integers(-3, 4), reals,
       st.binary(max_size=40).filter(lambda b: b"\0" not in b))
@example(N.DOMAIN, OPS.index("log"), 0, -1.0, b"").via("log(-1) at the first span")
@example(N.DOMAIN, OPS.index("log"), 2, -1.0, b"").via("a span past the last")
@example(N.DOMAIN, OPS.index("log"), -1, -1.0, b"").via("no span")
@example(N.RANGE, OPS.index("exp"), 1, 1000.0, b"").via("exp(1000) at the second span")
@example(N.RANGE, OPS.index("exp"), 1, 1.0, b"").via("a finite result the C++ refused")
def test_a_failure_status_reads_as_the_interpreters_error(
        native: N.Native, code: int, op: int, span: int, value: float, text: bytes) -> None:
    status = N.Status(0, 1, code, op, span, value, text)
    err = native.failure(status)
    at = native.kernel.spans[span] if 0 <= span < len(native.kernel.spans) else None
    if code in (N.DOMAIN, N.RANGE):
        try:
            unop(OPS[op], value, at)
        except EvalError as expected:
            assert type(err) is EvalError and err.message == expected.message
            assert err.span == at
        else:
            assert type(err) is EvalError and err.span == at
            assert err.message.startswith(f"{OPS[op]}({value}): the compiled code found no")
        return
    wanted = {N.REAL_OVERFLOW: (EvalError, "real overflow"),
              N.INT_OVERFLOW: (EvalError, "integer overflow"),
              N.NO_MEMORY: (EvalError, "out of memory"),
              N.OUTSIDE: (CodegenError, f"the compiled code wrote key {int(value)} outside")}
    if code == N.INTERRUPTED:  # Ctrl-C: the kernel stopped, Python's own interrupt
        assert type(err) is KeyboardInterrupt
        return
    kind, start = wanted.get(code, (CodegenError, "the compiled code failed: "
                                    + text.decode(errors="replace")))
    assert type(err) is kind and err.message.startswith(start)
    assert isinstance(err, CodegenError) == (code not in (N.REAL_OVERFLOW, N.INT_OVERFLOW,
                                                          N.NO_MEMORY))


#: a kernel failing each way the runtime reports, and the error Python raises for it: the
#: runtime sets each status by its name (sdqlite_runtime.h), native.py reads its number
FAILING = [
    ("sdql::fail(sdql::DOMAIN, OP_LOG, -1.0, 0);", EvalError, "^log\\(-1.0\\)"),
    ("sdql::fail(sdql::RANGE, OP_EXP, 1000.0, 0);", EvalError, "^exp\\(1000.0\\)"),
    ("volatile double big = 1e308; volatile double r = big * 10.0; (void)r;", EvalError,
     "^real overflow"),
    ("sdql::iadd(std::numeric_limits<sdql::i64>::max(), 1);", EvalError, "^integer overflow"),
    ("throw std::bad_alloc();", EvalError, "^out of memory"),
    ("sdql::vec<double> r{2}; r[5] += 1.0;", CodegenError,
     "^the compiled code wrote key 5 outside the result's size"),
    ("double m[2] = {0, 0}; sdql::i64 n[1] = {2}; sdql::dense_ref<1> r{m, n}; r[2] += 1.0;",
     CodegenError, "^the compiled code wrote key 2 outside the result's size"),
    ("sdql::fail(sdql::INTERRUPTED);", KeyboardInterrupt, "^$"),
    ('throw std::runtime_error("no such thing");', CodegenError,
     "^the compiled code failed: no such thing$"),
]


def test_each_failure_the_runtime_reports_reads_as_its_error() -> None:
    kernels = [Kernel(f"fails{i}", f"extern \"C\" int sdql_entry_fails{i}(void* const*, "
                      "const sdql::i64*, sdql::status* st, sdql::output** out) {\n  return "
                      f"sdql::run(st, out, [&]() -> sdql::output* {{ {body} return "
                      "sdql::encode(0.0); });\n}\n", (), REAL, [None])
               for i, (body, _, _) in enumerate(FAILING)]
    ops = {f"OP_{op.upper()}": i for i, op in enumerate(OPS)}
    source = "".join(f"#define {name} {i}\n" for name, i in ops.items())
    with environment(SDQLITE_CXXFLAGS="-O0 -DSDQL_CHECKED"):  # (a key outside: checked)
        built = B.build(source + translation_unit(kernels))
    for k, (_, kind, message) in zip(kernels, FAILING, strict=True):
        with pytest.raises(kind, match=message):
            N.Native(built, k)([])


@settings(max_examples=min(50, settings().max_examples))  # (a gc.collect() each: ~0.15 s)
@given(st.sampled_from([np.int64, np.float64]), st.integers(1, 50), st.integers(0, 2**31))
def test_a_buffer_handed_back_is_read_in_place_and_owned(
        dtype: type, n: int, seed: int) -> None:
    """A result's buffer is read by numpy where the kernel left it (no copy), and the
    output that owns it lives as long as an array over it (freed when the last goes)."""
    data: Any = np.random.default_rng(seed).integers(-1000, 1000, size=n).astype(dtype)
    freed: list[object] = []
    owner = N.Output(freed.append)
    owner.handle.value = 1  # a handle to free
    view = np.asarray(N._View(owner, data.ctypes.data, n, np.dtype(dtype)))
    assert view.dtype == dtype and view.shape == (n,) and np.array_equal(view, data)
    data[0] += 1
    assert view[0] == data[0]  # the same memory
    del owner
    assert not freed  # the array keeps its owner
    del view
    gc.collect()
    assert len(freed) == 1


# ---- 6. the boundary's declarations, and results released ---------------------------------

#: C++ types of the extern "C" functions, as ctypes declares them (a pointer: its size)
C_TYPES: dict[str, Any] = {"sdql::i64": ctypes.c_int64, "int": ctypes.c_int, "void": None}
PROTOTYPE = re.compile(r"^(?:extern \"C\" )?([\w:]+) (sdql_\w+)\(([^)]*)\) \{", re.M)


def _prototypes(text: str) -> dict[str, tuple[str, list[str]]]:
    return {name: (ret, [p.rsplit(" ", 1)[0] for p in " ".join(params.split()).split(", ")
                         if p])
            for ret, name, params in PROTOTYPE.findall(text)}


def test_ctypes_declares_each_function_as_the_cpp_does(native: N.Native) -> None:
    """Each function Python calls in a kernel's object — the entry point, the result's
    buffers, their release, the count of results not released, the runtime's checks and
    its dense-to-CSR conversion — is declared to ctypes
    as C++ defines it: the same return type (a 64-bit length, not C's default int) and
    parameters of the same sizes (law 6)."""
    native = N.Native(native.built, native.kernel)  # declared here, not by the fixture
    runtime = "".join(h.read_text() for h in B.HEADERS)
    found = {**_prototypes(runtime), **_prototypes(native.kernel.source)}
    checks = inputs._checker()
    declared = {native.kernel.entry: native.entry, "sdql_output_buffers": native.buffers,
                "sdql_output_free": native.free, "sdql_outputs_live": native.live,
                "sdql_check_compressed": checks.sdql_check_compressed,
                "sdql_check_coo": checks.sdql_check_coo,
                "sdql_not_finite": checks.sdql_not_finite,
                "sdql_dense_counts": checks.sdql_dense_counts,
                "sdql_dense_entries": checks.sdql_dense_entries}
    assert set(declared) == set(found), (sorted(found), sorted(declared))
    # (the checks are in the object of the runtime alone, not in each kernel's)
    assert not hasattr(native.built.library, "sdql_check_compressed")
    for name, fn in declared.items():
        ret, params = found[name]
        assert fn.restype is C_TYPES[ret], (name, ret, fn.restype)
        argtypes = native.ENTRY if fn is native.entry else fn.argtypes  # (made, not checked)
        assert [ctypes.sizeof(a) for a in argtypes] == [
            ctypes.sizeof(C_TYPES.get(p, ctypes.c_void_p)) for p in params], (name, params)
    native.entry.argtypes = list(native.ENTRY)  # a call makes its arguments of those types
    assert native([[np.array([4.0])]])[0][0] == math.log(4.0) + 2.0


@settings(max_examples=min(20, settings().max_examples))
@given(st.lists(st.sampled_from([1.0, 4.0, -1.0, 0.25]), min_size=1, max_size=4))
def test_every_result_is_released(native: N.Native, xs: list[float]) -> None:
    """After each call, succeeded or failed (log(-1)), no result the kernel made is left
    unreleased (law 6).  (``native`` for its cache and flags: the kernel is the same.)"""
    compiled = sdqlite.compile("x : real\nlog(x) + sqrt(x)")
    for x in xs:
        spec = compiled.specialize(compiled.read({"x": x}))
        assert spec.native is not None
        try:
            compiled(x=x)
        except EvalError:
            assert x < 0
        assert spec.native.live() == 0


# ---- 7. cache faults -----------------------------------------------------------------------

FAULTS = ["truncated", "truncated, its hash rewritten", "another object",
          "another object and its hash", "a pipe", "no hash", "a garbled hash",
          "a temporary file of a dead build"]
#: a process that builds the source of f() returning 7 and calls it (the faults are
#: made between processes: an object loaded in this one stays mapped, and dlopen of its
#: path again gives the one loaded)
BUILD_7 = """
from codegen import build as B
from properties.test_build import c_source, call_f
print(call_f(B.build(c_source(7, "good"))))
"""


def _build_7(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BUILD_7], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent, timeout=300,
                          env={**os.environ, "SDQLITE_CACHE": str(root),
                               "SDQLITE_CXXFLAGS": "-O0"})


@settings(max_examples=len(FAULTS), deadline=None)
@given(st.sampled_from(FAULTS))
def test_a_faulty_cache_entry_is_built_again_not_loaded(fault: str) -> None:
    with fresh_cache() as root:
        assert _build_7(root).stdout.split() == ["7"]
        (so,) = root.glob("*.so")
        digest = so.with_suffix(".sha256")
        with environment(SDQLITE_CXXFLAGS="-O0"):  # built here, never loaded here
            other = B.build(c_source(9, "other")).path
        match fault:
            case "truncated":
                so.write_bytes(so.read_bytes()[:1000])
            case "truncated, its hash rewritten":  # the ELF headers whole, segments cut
                cut = so.read_bytes()[:so.stat().st_size // 2]
                so.write_bytes(cut)
                digest.write_text(hashlib.sha256(cut).hexdigest())
            case "another object":
                shutil.copy(other, so)
            case "another object and its hash":
                shutil.copy(other, so)
                shutil.copy(other.with_suffix(".sha256"), digest)
            case "a pipe":
                so.unlink()
                os.mkfifo(so)
            case "no hash":
                digest.unlink()
            case "a garbled hash":
                digest.write_bytes(b"\xff\xfe")
            case _:  # killed mid-build: no object, its temporary file left behind
                so.unlink()
                digest.unlink()
                (root / f"{so.stem}.so.999999999").write_text("half")
        done = _build_7(root)
        if fault == "another object and its hash":  # the hash holds, the key does not
            assert done.returncode == 1 and "holds another kernel's object" in done.stderr
            assert "the cache entry was removed" in done.stderr
            done = _build_7(root)
        assert done.stdout.split() == ["7"], (done.returncode, done.stderr[-2000:])
        assert not (root / f"{so.stem}.so.999999999").exists()


#: faults this process can find without having loaded the object (its hash no longer
#: the object's, or unreadable): the check removes the entry and says it is unsound
IN_PROCESS_FAULTS = ["truncated", "truncated, its hash rewritten", "a byte appended",
                     "a garbled hash"]


@pytest.mark.parametrize("fault", IN_PROCESS_FAULTS)
def test_a_faulty_cache_entry_found_by_this_process_is_built_again_here(fault: str) -> None:
    """Law 7 in the process that finds the fault (the test above finds it in a fresh
    one): the object built by another process is made faulty before this one loads it,
    and this process's build removes it, builds it anew and loads that (an unsound
    entry taken as sound was loaded after its removal: a BuildError)."""
    with fresh_cache() as root:
        assert _build_7(root).stdout.split() == ["7"]
        (so,) = root.glob("*.so")
        digest = so.with_suffix(".sha256")
        match fault:
            case "truncated":
                so.write_bytes(so.read_bytes()[:1000])
            case "truncated, its hash rewritten":
                cut = so.read_bytes()[:so.stat().st_size // 2]
                so.write_bytes(cut)
                digest.write_text(hashlib.sha256(cut).hexdigest())
            case "a byte appended":
                so.write_bytes(so.read_bytes() + b"\0")
            case _:
                digest.write_bytes(b"\xff\xfe")
        with environment(SDQLITE_CXXFLAGS="-O0"):
            built = B.build(c_source(7, "good"))  # BUILD_7's source, flags and cache
        assert built.path == so and not built.cached and call_f(built) == 7


def test_a_temporary_file_of_a_build_still_running_is_left_alone() -> None:
    """Law 7's cleaning takes only what a process that is gone left: the temporary files
    of a build whose process is alive (another build of the same key, under way) stay,
    those of a dead one go."""
    source = c_source(5, "running")
    alive = subprocess.Popen(["sleep", "60"])
    try:
        with fresh_cache() as root, environment(SDQLITE_CXXFLAGS="-O0"):
            key = B._key(source)
            theirs = [root / f"{key}.so.{alive.pid}", root / f"{key}.key.{alive.pid}.cpp"]
            gone = [root / f"{key}.so.999999999", root / f"{key}.key.999999999.cpp"]
            for tmp in theirs + gone:
                tmp.write_text("half")
            assert call_f(B.build(source)) == 5
            assert all(tmp.exists() for tmp in theirs)
            assert not any(tmp.exists() for tmp in gone)
    finally:
        alive.kill()
        alive.wait()


#: a translation unit g++ takes about two seconds over at -O0 (a million steps of constant
#: evaluation), whose f() returns 11
SLOW = """constexpr long slow() {
  long s = 0;
  for (long i = 0; i < 1000; ++i) for (long j = 0; j < 1000; ++j) s += (i ^ j) % 7;
  return s;
}
static_assert(slow() > 0);
extern "C" long long f() { return 11; }
"""
BUILD_SLOW = """
from codegen import build as B
from properties.test_build import SLOW, call_f
print(call_f(B.build(SLOW)))
"""


def _processes() -> dict[int, tuple[int, str, bytes]]:
    """The processes alive now (zombies left out): pid -> (its parent's pid, its start
    time, its command line)."""
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rpartition(")")[2].split()
            line = (d / "cmdline").read_bytes()
        except OSError:  # not a process, or gone meanwhile
            continue
        if fields[0] != "Z":
            found[int(d.name)] = (int(fields[1]), fields[19], line)
    return found


def _descendants(pid: int, procs: dict[int, tuple[int, str, bytes]]) -> set[int]:
    below = {p for p, (parent, _, _) in procs.items() if parent == pid}
    return below.union(*(_descendants(p, procs) for p in below))


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc")
def test_a_build_killed_takes_its_compiler_with_it_and_the_next_build_cleans_up(
        tmp_path: Path) -> None:
    """SIGKILL a process while g++ compiles for it (a fresh cache: the build really runs):
    within a second no process it started is left — the driver nor the driver's own
    children (cc1plus) — and none names the cache; the next build in that cache gives
    the kernel's value and leaves the source, the object, its hash and the lock alone."""
    root = tmp_path / "cache"
    run: dict[str, Any] = {
        "args": [sys.executable, "-c", BUILD_SLOW], "cwd": Path(__file__).resolve().parent.parent,
        "env": {**os.environ, "SDQLITE_CACHE": str(root), "SDQLITE_CXXFLAGS": "-O0"}}

    def naming_the_cache() -> set[int]:
        return {p for p, (_, _, line) in _processes().items() if str(root).encode() in line}

    builder = subprocess.Popen(**run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not naming_the_cache() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # the driver has started its compiler proper
        procs = _processes()
        started = {p: procs[p] for p in _descendants(builder.pid, procs)}
        assert any(str(root).encode() in line for _, _, line in started.values()), started
    finally:
        builder.kill()
        builder.wait()
    deadline = time.monotonic() + 1.0
    while True:
        procs = _processes()
        left = {p for p, what in started.items() if procs.get(p) == what} | naming_the_cache()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left, [procs[p][2].split(b"\0")[0] for p in left if p in procs]
    done = subprocess.run(**run, capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["11"], (done.returncode, done.stderr[-2000:])
    (so,) = root.glob("*.so")
    assert sorted(p.name for p in root.iterdir()) == [so.stem + s for s in (
        ".cpp", ".lock", ".sha256", ".so")]


# ---- 8. the runtime precompiled ----------------------------------------------------------

PLANTED = 'extern "C" int sdql_planted() { return 1; }\n'


def runtime_source(value: int) -> str:
    """A kernel's translation unit: the runtime, then f() returning ``value``."""
    return translation_unit([]) + c_source(value, "with the runtime")


def _build_rt(value: int) -> list[str]:
    """Build (here: a mutant of the build is on) a file of the runtime and f() returning
    ``value``: f()'s value, and whether the object has sdql_planted() (which only a
    planted runtime defines)."""
    with environment(SDQLITE_CXXFLAGS="-O0"):
        built = B.build(runtime_source(value))
    return [str(call_f(built)), str(hasattr(built.library, "sdql_planted"))]


def _plant(gch: Path) -> None:
    """In ``gch``'s place, the runtime and sdql_planted() precompiled with its flags."""
    with tempfile.TemporaryDirectory() as d:
        header = Path(d) / B.RUNTIME.name
        header.write_text(B.RUNTIME.read_text() + PLANTED)
        subprocess.run([B.compiler(), *B.BASE_FLAGS, "-O0",
                        "-x", "c++-header", str(header), "-o", str(gch)],
                       check=True, capture_output=True)


def _seeded(root: Path) -> Path:
    """The cache's runtime precompiled, made by its third object's build (the first two
    read the header as text)."""
    for value in (1, 2):
        assert _build_rt(value) == [str(value), "False"]
        assert not list(root.glob("pch-*"))
    assert _build_rt(3) == ["3", "False"]
    (gch,) = root.glob(f"pch-*/{B.PCH}")
    assert (gch.parent / "sha256").read_text() == B._sha256(gch)
    return gch


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache seeded once (``_seeded``)."""
    root = tmp_path_factory.mktemp("seed")
    with environment(SDQLITE_CACHE=str(root)):
        _seeded(root)
    return root


def _copied(seed: Path, root: Path) -> Path:
    """``root`` seeded as ``_seeded`` seeds it, by a copy of the cache ``seed`` (its
    objects, which make the next build take the precompiled runtime, and that): the
    precompiled runtime in it."""
    shutil.copytree(seed, root, dirs_exist_ok=True)
    (gch,) = root.glob(f"pch-*/{B.PCH}")
    return gch


def test_a_cache_s_third_object_is_built_with_the_runtime_precompiled() -> None:
    """Law 8: the precompiled runtime is taken (a planted one, its hash recorded, gives
    its sdql_planted() to the next kernel), and only with its hash recorded (planted
    without: removed, made again, and not taken)."""
    with fresh_cache() as root:
        gch = _seeded(root)
        _plant(gch)
        (gch.parent / "sha256").write_text(B._sha256(gch))
        assert _build_rt(4) == ["4", "True"]
        _plant(gch)
        (gch.parent / "sha256").write_text("0" * 64)
        assert _build_rt(5) == ["5", "False"]
        assert (gch.parent / "sha256").read_text() == B._sha256(gch)
        assert _build_rt(6) == ["6", "False"]


def test_a_file_without_the_runtime_makes_no_precompiled_runtime() -> None:
    """Law 8: only a build of a file that includes the runtime makes it."""
    with fresh_cache() as root, environment(SDQLITE_CXXFLAGS="-O0"):
        for value in range(3):
            assert call_f(B.build(c_source(value, "no runtime"))) == value
        assert not list(root.glob("pch-*"))


PCH_FAULTS = ["truncated, its hash rewritten", "garbage, its hash rewritten", "a pipe",
              "no hash", "a directory"]


@pytest.mark.parametrize("fault", PCH_FAULTS)
def test_a_faulty_precompiled_runtime_is_not_used_again(fault: str, seed: Path) -> None:
    """Law 8's faults: the build gives the kernel's value, and after it the cache holds a
    sound precompiled runtime, not the faulty one, or none (g++ fails on a truncated one,
    passes over garbage; a pipe's hash read would block for ever: after two minutes the
    test writes the pipe's end, and fails)."""
    with fresh_cache() as root:
        gch = _copied(seed, root)
        digest = gch.parent / "sha256"
        faulty = None  # what must not be there after
        match fault:
            case "truncated, its hash rewritten":
                faulty = gch.read_bytes()[:gch.stat().st_size // 2]
                gch.write_bytes(faulty)
                digest.write_text(B._sha256(gch))
            case "garbage, its hash rewritten":
                faulty = b"garbage" * 1000
                gch.write_bytes(faulty)
                digest.write_text(B._sha256(gch))
            case "a pipe":
                gch.unlink()
                os.mkfifo(gch)
            case "no hash":
                digest.unlink()
            case _:
                gch.unlink()
                gch.mkdir()
                _plant(gch / "planted.gch")  # (g++ takes any one in a directory so named)
        B._checked_pch.clear()  # (as a process that has not read it yet finds it)
        with ThreadPoolExecutor(1) as pool:
            job = pool.submit(_build_rt, 7)
            try:
                got = job.result(timeout=120)
            except TimeoutError:
                for _ in range(600):  # each open for reading waits for a writer: one each
                    if job.done():
                        break
                    with contextlib.suppress(OSError):
                        os.close(os.open(gch, os.O_WRONLY | os.O_NONBLOCK))
                    time.sleep(0.1)
                raise AssertionError("the build blocked on the cache's pipe") from None
        assert got == ["7", "False"]
        assert not gch.exists() or (gch.is_file() and digest.read_text() == B._sha256(gch)
                                    and gch.read_bytes() != faulty)
        assert _build_rt(8) == ["8", "False"]


def _logging_compiler(root: Path, header: str = "") -> tuple[Path, Path]:
    """g++ behind a script that logs each command line (then, for a precompilation, runs
    ``header`` instead if given): the script and its log."""
    log, cxx = root / "cxx.log", root / "logging-cxx"
    real = B.compiler()
    instead = (f'case "$*" in *c++-header*) {header} ;; esac\n') if header else ""
    cxx.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n{instead}exec "{real}" "$@"\n')
    cxx.chmod(0o755)
    return cxx, log


def _precompilations(log: Path) -> int:
    return sum("c++-header" in line for line in log.read_text().splitlines())


def test_builds_of_one_process_precompile_once_and_hash_it_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Law 8, its cost: the runtime is precompiled once, and its hash read once a process
    (by the one that made it, at its making), however many kernels are built against it."""
    hashed: list[Path] = []
    sha256 = B._sha256

    def counted(path: Path) -> str:
        hashed.append(path)
        return sha256(path)

    monkeypatch.setattr(B, "_sha256", counted)
    with fresh_cache() as root:
        cxx, log = _logging_compiler(root)
        with environment(CXX=str(cxx)):
            for value in range(6):
                assert _build_rt(value) == [str(value), "False"]
            assert _precompilations(log) == 1
            assert sum(p.name.startswith(B.PCH) for p in hashed) == 1  # (at its making)
            B._checked_pch.clear()  # as a process that finds it made
            for value in range(6, 9):
                assert _build_rt(value) == [str(value), "False"]
        assert _precompilations(log) == 1
        assert sum(p.name.startswith(B.PCH) for p in hashed) == 2


def test_two_builds_at_once_precompile_the_runtime_once() -> None:
    """Law 8 under the lock: two threads that build at once in a cache of two objects make
    the runtime precompiled once; the second waits for it and takes it."""
    with fresh_cache() as root:
        cxx, log = _logging_compiler(root)
        with environment(CXX=str(cxx), SDQLITE_CXXFLAGS="-O0"):  # (as each thread sets it)
            for value in (1, 2):
                _build_rt(value)
            with ThreadPoolExecutor(2) as pool:
                got = list(pool.map(_build_rt, (3, 4)))
        assert got == [["3", "False"], ["4", "False"]]
        assert _precompilations(log) == 1


@pytest.mark.parametrize("how", ["fails, a partial file left", "fails, writing nothing"])
def test_a_precompilation_that_fails_leaves_nothing_and_the_build_reads_the_header(
        how: str) -> None:
    """Law 8: a compiler that fails on the runtime alone still builds the kernel, which
    then reads the header (no precompiled runtime on its command line), and nothing of the
    failure is left for the next build to take."""
    header = 'for a; do [ "$prev" = -o ] && echo partial > "$a"; prev="$a"; done; exit 1' \
        if how == "fails, a partial file left" else "exit 1"
    with fresh_cache() as root:
        cxx, log = _logging_compiler(root, header)
        with environment(CXX=str(cxx)):
            for value in (1, 2, 3):
                assert _build_rt(value) == [str(value), "False"]
        assert _precompilations(log) == 1
        assert "-Winvalid-pch" not in log.read_text()
        assert not [p for p in root.glob("pch-*/*")]


def test_a_failing_build_compiles_once_and_keeps_the_precompiled_runtime() -> None:
    """Law 8 and 3: an error in the kernel's own code is the compiler's error after one
    compilation (without a precompiled runtime, none is tried again), and the
    precompiled runtime stays (the error was not its)."""
    wrong = runtime_source(9) + "this is not C++;\n"
    with fresh_cache() as root:
        cxx, log = _logging_compiler(root)
        with environment(CXX=str(cxx), SDQLITE_CXXFLAGS="-O0"):
            with pytest.raises(BuildError, match=r"the C\+\+ compiler failed"):
                B.build(wrong)
            assert sum(".cpp" in line for line in log.read_text().splitlines()) == 1
            gch = _seeded(root)
            made = B._stamp(gch)
            with pytest.raises(BuildError, match=r"the C\+\+ compiler failed"):
                B.build(wrong)
        assert B._stamp(gch) == made


def test_a_temporary_file_of_a_precompilation_is_removed_once_its_process_is_gone(
        seed: Path) -> None:
    """Law 7's cleaning, for the precompiled runtime: a killed precompilation's temporary
    file goes, one of a precompilation still under way stays, and a file not so named
    stays."""
    alive = subprocess.Popen(["sleep", "60"])
    try:
        with fresh_cache() as root:
            gch = _copied(seed, root)
            gch.unlink()
            theirs, gone, other = (gch.parent / f"{B.PCH}.{alive.pid}",
                                   gch.parent / f"{B.PCH}.999999999",
                                   gch.parent / f"{B.PCH}.notes")
            for tmp in (theirs, gone, other):
                tmp.write_text("half")
            assert _build_rt(4) == ["4", "False"]
            assert theirs.exists() and other.exists() and not gone.exists()
            assert (gch.parent / "sha256").read_text() == B._sha256(gch)
    finally:
        alive.kill()
        alive.wait()

"""Build and load generated C++ (DESIGN.md, "Build and load").

The system compiler (``$CXX``, else ``g++``) builds a shared object with
``-O3 -march=native`` by default (``$SDQLITE_CXXFLAGS`` replaces the optimization flags:
``-O0`` for quick test builds, ``-O1 -g -fsanitize=address,undefined`` for the sanitizer
run).  Objects are cached under the user's cache directory (``$SDQLITE_CACHE``, else
``$XDG_CACHE_HOME/sdqlite``, else ``~/.cache/sdqlite``), named by a hash of the source,
the runtime header, the flags and the compiler; a build goes to a temporary file that is
renamed into place (atomic), under a lock, so two processes compiling at once never load
a half-written file.  Objects are loaded with ``ctypes``.  Whatever stops a build on this
machine (a cache path that cannot hold files, a compiler that is missing, will not run or
fails) is a `BuildError` naming the variable it came from.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sdqlite.errors import BuildError

HERE = Path(__file__).parent
RUNTIME = HERE / "sdqlite_runtime.h"
DEFAULT_FLAGS = "-O3 -march=native"
#: always on: the language standard, a shared object, and no fused multiply-add (the
#: interpreter rounds a * b before adding it; contraction would round once)
BASE_FLAGS = ("-std=c++17", "-fPIC", "-shared", "-ffp-contract=off")
HEADER_PACKAGE = "libboost1.81-dev"  # Debian 12: boost::unordered_flat_map (Boost >= 1.81)
#: what g++ and clang say when that header is missing (an error in code that merely
#: includes it names it too: "In file included from .../unordered_flat_map.hpp")
BOOST_MISSING = ("boost/unordered/unordered_flat_map.hpp: No such file",
                 "'boost/unordered/unordered_flat_map.hpp' file not found")


def compiler() -> str:
    cxx = os.environ.get("CXX", "g++")
    path = shutil.which(cxx)
    if path is None:
        raise BuildError(f"no C++ compiler: {_shown(cxx)!r} was not found (on Debian: "
                         f"sudo apt-get install g++ {HEADER_PACKAGE})")
    return path


def flags() -> list[str]:
    text = os.environ.get("SDQLITE_CXXFLAGS", DEFAULT_FLAGS)
    try:
        return shlex.split(text)
    except ValueError as err:  # an unclosed quote
        raise BuildError(f"SDQLITE_CXXFLAGS={_shown(text)}: {err}") from None


def cache_dir() -> tuple[Path, str]:
    """The cache directory, and where it came from (for errors)."""
    root = os.environ.get("SDQLITE_CACHE")
    if root:
        return Path(root), f"SDQLITE_CACHE={_shown(root)}"
    xdg = os.environ.get("XDG_CACHE_HOME")
    path = (Path(xdg) if xdg else Path.home() / ".cache") / "sdqlite"
    return path, (f"XDG_CACHE_HOME={_shown(xdg)}" if xdg else f"the cache {_shown(str(path))}")


def _shown(text: str, most: int = 80) -> str:
    """A path or variable as an error shows it: at most ``most`` characters."""
    return text if len(text) <= most else f"{text[:most // 2]}...{text[-most // 2:]}"


@cache
def _identity(cxx: str, opts: tuple[str, ...]) -> str:
    """What the object depends on besides its source: the compiler's version and, with
    -march=native, the target it resolves to on this machine."""
    version = _run([cxx, "--version"]).stdout
    target = ""
    if any(o.startswith("-march=native") or o.startswith("-mtune=native") for o in opts):
        target = _run([cxx, *opts, "-Q", "--help=target"]).stdout
    return version + target


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except OSError as err:  # not an executable, not allowed to run it
        raise BuildError(f"CXX={_shown(os.environ.get('CXX', 'g++'))}: cannot run the C++ "
                         f"compiler {_shown(cmd[0])}: {err.strerror or err}") from None


@dataclass(frozen=True)
class Built:
    library: ctypes.CDLL
    path: Path  # the shared object
    source: Path  # the C++ file it was built from
    cached: bool  # found in the cache rather than compiled now


def build(source: str) -> Built:
    """Compile ``source`` (a translation unit including the runtime) and load it."""
    cxx, opts = compiler(), flags()
    runtime = RUNTIME.read_bytes()
    key = hashlib.sha256(b"\0".join([source.encode(), runtime, " ".join(opts).encode(),
                                     _identity(cxx, tuple(opts)).encode()])).hexdigest()[:24]
    root, origin = cache_dir()
    cpp, so = root / f"{key}.cpp", root / f"{key}.so"
    try:
        root.mkdir(parents=True, exist_ok=True)
        cached = so.exists()
        if not cached:
            with open(root / f"{key}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; others then find it
                if not so.exists():
                    _compile(cxx, opts, source, cpp, so)
    except OSError as err:  # the cache cannot hold files: a file, /proc, too long a name
        what = err.filename if isinstance(err.filename, str) else str(root)
        raise BuildError(f"{origin}: cannot create {_shown(what)}: "
                         f"{err.strerror or err}") from None
    try:
        return Built(ctypes.CDLL(str(so)), so, cpp, cached)
    except OSError as err:
        raise BuildError(f"cannot load {so}: {err}") from None


def _compile(cxx: str, opts: list[str], source: str, cpp: Path, so: Path) -> None:
    tmp_cpp = cpp.with_suffix(f".cpp.{os.getpid()}")
    tmp_cpp.write_text(source, encoding="utf-8")
    os.replace(tmp_cpp, cpp)
    tmp = so.with_suffix(f".so.{os.getpid()}")
    done = _run([cxx, *BASE_FLAGS, *opts, "-I", str(HERE), str(cpp), "-o", str(tmp)])
    if done.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise BuildError(_compiler_failure(cxx, done, cpp))
    os.replace(tmp, so)  # atomic: a reader sees no object or a whole one


def _compiler_failure(cxx: str, done: subprocess.CompletedProcess[str], cpp: Path) -> str:
    if any(said in done.stderr for said in BOOST_MISSING):
        return (f"the C++ backend needs Boost >= 1.81 (boost::unordered_flat_map): on Debian, "
                f"sudo apt-get install {HEADER_PACKAGE} (generated file: {cpp})")
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    if not lines:  # a compiler that fails silently, or "succeeds" without an object
        lines = [f"{_shown(cxx)} " + (f"exited with status {done.returncode}"
                                      if done.returncode else "wrote no shared object")
                 + ", printing nothing"]
    shown = "\n".join(lines[:12]) + ("\n..." if len(lines) > 12 else "")
    return f"the C++ compiler failed on the generated file {cpp}:\n{shown}"

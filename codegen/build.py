"""Build and load generated C++ (DESIGN.md, "Build and load").

The system compiler (``$CXX``, else ``g++``) builds a shared object with
``-O3 -march=native`` by default (``$SDQLITE_CXXFLAGS`` replaces the optimization flags:
``QUICK_FLAGS`` for the tests' quick builds, ``-O1 -g -fsanitize=address,undefined`` for
the sanitizer run).  Objects are cached under the user's cache directory
(``$SDQLITE_CACHE``, else ``$XDG_CACHE_HOME/sdqlite``, else ``~/.cache/sdqlite``), named
by a hash of the source, the runtime header, the flags and the compiler; a build goes to
a temporary file that is renamed into place (atomic), under a lock, so two processes
compiling at once never load a half-written file.  Once the cache holds two objects, the
runtime is precompiled (``_precompiled``) and later builds take it.  Objects are loaded
with ``ctypes``.
Whatever stops a build on this machine (a cache path that cannot hold files, a compiler
that is missing, will not run or fails) is a `BuildError` naming the variable it came from.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import itertools
import os
import shlex
import shutil
import signal
import stat
import struct
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sdqlite.errors import BuildError

HERE = Path(__file__).parent
RUNTIME = HERE / "sdqlite_runtime.h"
HEADERS = (RUNTIME, HERE / "sdqlite_door.h")  # what a generated file may include
DEFAULT_FLAGS = "-O3 -march=native"
#: the tests' quick builds, much of a test run's time: -Og builds a small kernel in a fifth
#: less time than -O0 (0.9 against 1.1 s, the runtime precompiled; a batch of twenty
#: programs in about the same), and the kernel runs faster
QUICK_FLAGS = "-Og"
#: always on: the language standard, a shared object, no fused multiply-add (the
#: interpreter rounds a * b before adding it; contraction would round once), and no errno
#: from the maths library (the runtime reads results, never errno: exp(x) called twice is
#: then computed once, logistic regression's gradient 14% faster)
BASE_FLAGS = ("-std=c++17", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno")
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
    if root:  # absolute: a relative one such as "-rf" reached g++ as an option
        return Path(os.path.abspath(root)), f"SDQLITE_CACHE={_shown(root)}"
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


def _environment() -> dict[str, str]:
    """The compiler's environment: this process's, without what is preloaded into it (the
    sanitizer runs preload a sanitizer's runtime into Python, not meant for g++)."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              preexec_fn=_die_with_parent, env=_environment())
    except OSError as err:  # not an executable, not allowed to run it
        raise BuildError(f"CXX={_shown(os.environ.get('CXX', 'g++'))}: cannot run the C++ "
                         f"compiler {_shown(cmd[0])}: {err.strerror or err}") from None


def _die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In the compiler's process: be sent ``sig`` when Python dies (SIGKILL during a build
    left g++ running)."""
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_PDEATHSIG, sig)


PR_SET_PDEATHSIG = 1
#: the compilation runs under sh in a process group of its own, and sh is sent SIGTERM when
#: Python dies: it kills the group, the driver's own children with it (cc1plus, as, ld: no
#: death signal reaches them, and they ran on after the driver was killed)
GUARD = 'trap "kill -KILL 0" TERM; "$@" & wait $!'


def _run_guarded(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """``_run`` for a compilation: the compiler and all it starts end when Python does,
    killed (SIGKILL: the guard) or interrupted (Ctrl-C: here)."""
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", GUARD, "sh", *cmd], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                process_group=0, env=_environment(),
                                preexec_fn=lambda: _die_with_parent(signal.SIGTERM))
    except OSError as failed:
        raise BuildError(f"cannot run the shell /bin/sh: {failed.strerror or failed}") from None
    with proc:
        try:
            out, err = proc.communicate()
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@dataclass(frozen=True)
class Built:
    library: ctypes.CDLL
    path: Path  # the shared object
    source: Path  # the C++ file it was built from
    cached: bool  # found in the cache rather than compiled now


def _key(source: str, includes: tuple[str, ...] = ()) -> str:
    cxx, opts = compiler(), flags()
    return _digest([source.encode(), b"".join(h.read_bytes() for h in HEADERS),
                    *(d.encode() for d in includes)], cxx, opts)


def _digest(data: list[bytes], cxx: str, opts: list[str]) -> str:
    """A cache name for what an entry depends on: ``data``, the flags and the compiler."""
    return hashlib.sha256(b"\0".join([*data, " ".join(opts).encode(),
                                      _identity(cxx, tuple(opts)).encode()])).hexdigest()[:24]


def cached(source: str) -> bool:
    """Is the object of ``source`` in the cache already?"""
    try:
        return (cache_dir()[0] / f"{_key(source)}.so").is_file()
    except (BuildError, OSError):
        return False


def build(source: str, includes: tuple[str, ...] = ()) -> Built:
    """Compile ``source`` (a translation unit including the runtime) and load it;
    ``includes``: directories searched for headers besides the runtime's (Python's).

    What is loaded is checked first: the object must be a regular file whose hash is the
    one its build recorded (``KEY.sha256``), and it must say its own key (``sdql_key``,
    compiled in beside the source).  A cache entry that fails — truncated, replaced by another
    kernel's object, a pipe — is removed and built again, never loaded: dlopen of a
    truncated object ended the process with a bus error, of a pipe blocked for ever."""
    cxx, opts = compiler(), flags()
    key = _key(source, includes)
    root, origin = cache_dir()
    cpp, so = root / f"{key}.cpp", root / f"{key}.so"
    try:
        root.mkdir(parents=True, exist_ok=True)
        cached = _sound(so, key)
        if not cached:
            with open(root / f"{key}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; others then find it
                if not _sound(so, key):
                    _clean(root, key)
                    _compile(cxx, opts, source, cpp, so, key, includes)
    except OSError as err:  # the cache cannot hold files: a file, /proc, too long a name
        what = err.filename if isinstance(err.filename, str) else str(root)
        raise BuildError(f"{origin}: cannot create {_shown(what)}: "
                         f"{err.strerror or err}") from None
    try:
        lib = ctypes.CDLL(str(so))
        lib.sdql_key.restype = ctypes.c_char_p
        if lib.sdql_key() != key.encode():
            raise OSError("it holds another kernel's object")
    except (OSError, AttributeError) as err:
        so.unlink(missing_ok=True)
        raise BuildError(f"cannot load {so}: {err} (the cache entry was removed: call again "
                         "to build it anew)") from None
    return Built(lib, so, cpp, cached)


def _sound(so: Path, key: str) -> bool:
    """Is ``so`` a regular file with the hash its build recorded?  An entry that is not
    (a pipe, a truncated or replaced object, no record) is removed: it is built again."""
    digest = so.with_suffix(".sha256")
    try:
        if not stat.S_ISREG(os.lstat(so).st_mode):
            so.unlink()
            return False
        if digest.read_text().strip() == _sha256(so) and _whole(so):
            return True
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError):
        pass
    so.unlink(missing_ok=True)
    return False


def _whole(so: Path) -> bool:
    """Does ``so`` hold every byte its ELF headers name?  dlopen maps the segments the
    program headers name, and reading one cut short is a bus error: an object truncated
    with its hash rewritten to match ended the process so."""
    data = so.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return False
    end, wide = "<" if data[5] == 1 else ">", data[4] == 2
    try:  # (offset, size) of each header table and each segment
        if wide:
            phoff, shoff = struct.unpack_from(end + "QQ", data, 32)
            phsize, phnum, shsize, shnum = struct.unpack_from(end + "HHHH", data, 54)
            segments = [struct.unpack_from(end + "8xQ16xQ", data, phoff + i * phsize)
                        for i in range(phnum)]
        else:
            phoff, shoff = struct.unpack_from(end + "II", data, 28)
            phsize, phnum, shsize, shnum = struct.unpack_from(end + "HHHH", data, 42)
            segments = [struct.unpack_from(end + "4xI8xI", data, phoff + i * phsize)
                        for i in range(phnum)]
    except struct.error:  # a header table beyond the end
        return False
    spans = [(phoff, phsize * phnum), (shoff, shsize * shnum), *segments]
    return all(offset + size <= len(data) for offset, size in spans)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _clean(root: Path, key: str) -> None:
    """Remove the temporary files of builds of ``key`` whose process is gone (a build
    killed with SIGKILL leaves its ``KEY.so.<pid>`` or ``KEY.key.<pid>.cpp``)."""
    for tmp in root.glob(f"{key}.*.*"):
        pid = next((part for part in tmp.name.split(".")[1:] if part.isdigit()), "")
        if pid and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _compile(cxx: str, opts: list[str], source: str, cpp: Path, so: Path, key: str,
             includes: tuple[str, ...] = ()) -> None:
    tmp_cpp = cpp.with_suffix(f".cpp.{os.getpid()}")
    tmp_cpp.write_text(source, encoding="utf-8")
    os.replace(tmp_cpp, cpp)
    tmp = so.with_suffix(f".so.{os.getpid()}")
    named = so.with_suffix(f".key.{os.getpid()}.cpp")  # the object says which key it is
    named.write_text(f'extern "C" const char* sdql_key() {{ return "{key}"; }}\n')
    # (made once the cache holds two objects, such as the checks' and a kernel's: who builds
    # one kernel does not wait for it)
    pch = _precompiled(cxx, opts, so.parent) if f'#include "{RUNTIME.name}"' in source \
        and len(list(itertools.islice(so.parent.glob("*.so"), 2))) == 2 else []
    try:
        def run(pch: list[str]) -> subprocess.CompletedProcess[str]:
            return _run_guarded([cxx, *BASE_FLAGS, *opts, *pch, "-I", str(HERE),
                                 *(f"-I{d}" for d in includes), str(cpp), str(named), "-o",
                                 str(tmp)])
        done = run(pch)
        if pch and done.returncode != 0:  # the precompiled header's fault if without it
            done = run([])
            faulty = done.returncode == 0
        else:  # or g++ passed it over
            faulty = bool(pch) and str(Path(pch[-1]) / PCH) in done.stderr
        if faulty:  # made again next time
            shutil.rmtree(pch[-1], ignore_errors=True)
    finally:  # (Ctrl-C too)
        named.unlink(missing_ok=True)
    if done.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise BuildError(_compiler_failure(cxx, done, cpp))
    digest = so.with_suffix(f".sha256.{os.getpid()}")
    digest.write_text(_sha256(tmp))
    os.replace(digest, so.with_suffix(".sha256"))
    os.replace(tmp, so)  # atomic: a reader sees no object or a whole one


#: the runtime precompiled by g++ (RUNTIME.gch), once per runtime, flags and compiler, in a
#: directory of the cache that comes before the header's on the include path: g++ looks for
#: HEADER.gch in each directory before HEADER, and takes it only if it was made with these
#: flags (else it reads on; clang reads none).  A small kernel's build takes half the time
#: (1.4 -> 0.7 s at -O3): the runtime and Boost are no longer parsed as text.
PCH = RUNTIME.name + ".gch"
_checked_pch: dict[Path, tuple[int, int, int, int]] = {}  # a sound one's inode, size, mtime, mode


def _precompiled(cxx: str, opts: list[str], root: Path) -> list[str]:
    """The options that put first on the include path a directory DIR holding the runtime
    precompiled for these flags (made now, once, under a lock), DIR last; or none where it
    cannot be had: the build then reads the header."""
    key = _digest([RUNTIME.read_bytes()], cxx, opts)
    where = root / f"pch-{key}"
    gch = where / PCH
    try:
        if not _sound_pch(gch):
            with open(root / f"pch-{key}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                made = _sound_pch(gch)  # (by another build, while this one waited)
                if not made:
                    where.mkdir(exist_ok=True)
                    for old in where.glob(f"{PCH}.*"):  # what a killed build left
                        pid = old.name.rsplit(".", 1)[-1]
                        if pid.isdigit() and not _alive(int(pid)):
                            old.unlink(missing_ok=True)
                    tmp = where / f"{PCH}.{os.getpid()}"
                    done = _run_guarded([cxx, *BASE_FLAGS, *opts, "-x", "c++-header",
                                         str(RUNTIME), "-o", str(tmp)])
                    if done.returncode != 0:
                        tmp.unlink(missing_ok=True)
                        return []
                    (where / "sha256").write_text(_sha256(tmp))  # (none written: OSError)
                    os.replace(tmp, gch)
                    _checked_pch[gch] = _stamp(gch)
    except OSError:
        return []
    return ["-Winvalid-pch", "-I", str(where)]  # (g++ names one it passes over)


def _sound_pch(gch: Path) -> bool:
    """Is ``gch`` a regular file with the hash its build recorded (checked once a process,
    while it stays the same file)?  One that is not is removed: g++ given a pipe would wait
    for ever, and given another runtime's header, build against it."""
    try:
        stamp = _stamp(gch)
        if _checked_pch.get(gch) == stamp or (
                stat.S_ISREG(stamp[3])
                and (gch.parent / "sha256").read_text().strip() == _sha256(gch)):
            _checked_pch[gch] = stamp
            return True
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError):
        pass
    if gch.is_dir() and not gch.is_symlink():
        shutil.rmtree(gch, ignore_errors=True)
    else:
        gch.unlink(missing_ok=True)
    return False


def _stamp(path: Path) -> tuple[int, int, int, int]:
    st = os.lstat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode


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

"""Calling a built kernel: buffers in, buffers out, failures as SDQLite errors.

The entry point ``sdql_entry_<name>(data, lens, status, out)`` reads its inputs from an
array of buffer pointers and their lengths (``codegen/data.py``): a flat array as one
buffer read in place, any other value as its 2L + 1 buffers.  A dense destination is
the caller's zeroed numpy array, written in place (its pointer and shape come last); a
number comes back in the status; any other result comes back as an output handle whose
buffers numpy reads without a copy, owned by an object that frees the handle when the
last array over it goes.

A failure inside the kernel comes back as a status: a unary operation outside its domain
(re-raised by the interpreter's own ``unop``, so both backends say the same), real or
integer overflow, out of memory, or Ctrl-C (called from the main thread, the kernel
stops within a loop iteration and ``KeyboardInterrupt`` is raised, nothing leaked).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from codegen.build import Built
from codegen.data import Buffers, address, layers, leaf_dtype
from codegen.emit import Kernel
from sdqlite.errors import CodegenError, EvalError
from sdqlite.syntax.ops import UNARY_OPS
from sdqlite.syntax.types import REAL, DictT
from semantics.interp import unop

DOMAIN, RANGE, REAL_OVERFLOW, INT_OVERFLOW, NO_MEMORY, OUTSIDE, INTERRUPTED, RECHECK = (
    1, 2, 3, 4, 5, 7, 8, 9)
CATCH_SIGINT = 1  # Status.flags: the kernel stops on Ctrl-C


class Unchecked(Exception):
    """The kernel found a block of an input it was to check not plainly right
    (``Kernel.checks``): the caller checks the input and runs it again."""


class Status(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_int64), ("threads", ctypes.c_int64),
                ("code", ctypes.c_int64), ("op", ctypes.c_int64),
                ("span", ctypes.c_int64), ("value", ctypes.c_double),
                ("message", ctypes.c_char * 256), ("real", ctypes.c_double),
                ("integer", ctypes.c_int64)]


class Output:
    """A kernel's output handle; freed when this object goes (numpy arrays over its
    buffers keep it).  It exists before the call, so that an interrupt between the
    kernel's return and the reading of its buffers leaks nothing."""

    def __init__(self, free: Any) -> None:
        self.handle = ctypes.c_void_p()
        self._free = free

    def __del__(self) -> None:
        if self.handle.value:
            self._free(self.handle)
            self.handle.value = None


_INT32, _INT64 = np.dtype(np.int32), np.dtype(np.int64)


class _View:
    """A buffer of an ``Output`` as numpy sees it (``__array_interface__``), keeping the
    output alive as long as an array over it is."""

    def __init__(self, owner: Output, ptr: int, n: int, dtype: np.dtype[Any]) -> None:
        self.owner = owner
        self.__array_interface__ = {"shape": (n,), "typestr": dtype.str,
                                    "data": (ptr, False), "version": 3}


@dataclass
class Native:
    """A loaded kernel."""

    #: the entry point's parameters, as ``__call__`` makes its arguments
    ENTRY = (ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64),
             ctypes.POINTER(Status), ctypes.POINTER(ctypes.c_void_p))

    built: Built
    kernel: Kernel

    def __post_init__(self) -> None:
        lib = self.built.library
        self.entry = getattr(lib, self.kernel.entry)
        # each argument is made as its type in ENTRY below, so ctypes need not check it
        # (a fifth of a scalar kernel's call)
        self.entry.argtypes = None
        self.entry.restype = ctypes.c_int
        self.buffers = lib.sdql_output_buffers  # its buffers; which are of 32-bit ints
        self.buffers.argtypes = [ctypes.c_void_p, ctypes.c_int64,
                                 ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)]
        self.buffers.restype = ctypes.c_int64
        self.free = lib.sdql_output_free
        self.free.argtypes = [ctypes.c_void_p]
        self.free.restype = None
        self.live = lib.sdql_outputs_live  # results not yet freed
        self.live.argtypes = []
        self.live.restype = ctypes.c_int64
        self.arrays: dict[int, tuple[Any, Any]] = {}  # the argument arrays' types, by length
        # an output handle comes back for a dictionary not written into the caller's array
        self.handed = self.kernel.dest != "dense" and isinstance(self.kernel.result, DictT)
        if self.handed:  # its buffers: 2L index buffers (64-bit, or 32), then the leaves
            t = self.kernel.result
            self.count = 2 * len(layers(t)) + 1
            self.leaf = np.dtype(leaf_dtype(t))

    def __call__(self, inputs: list[Buffers], dest: Any = None, threads: int = 1,
                 work: Sequence[int] = (), checks: Sequence[int] | None = None) -> Buffers:
        """Run on the inputs' buffers (in the kernel's input order): the result's buffers,
        or ``[dest]`` for a dense destination (a zeroed C-contiguous float64 array); for
        ``vec`` ``dest`` is its size, for ``rows`` its rows and columns.  The
        kernel's loops at the top may use up to ``threads`` threads; ``work``: the sizes
        of its workspaces (``Kernel.work``); ``checks``: for each input the kernel may
        check (``Kernel.checks``), its column count if it is to, else -1 (the default)."""
        ptrs, lens = self.arguments(inputs, dest, work, checks)
        n = max(1, len(ptrs))
        if n not in self.arrays:
            self.arrays[n] = ctypes.c_void_p * n, ctypes.c_int64 * n
        pointers, lengths = self.arrays[n]
        status = Status(flags=CATCH_SIGINT if _main_thread() else 0, threads=threads)
        # (made before the call, so that an interrupt after it leaks nothing)
        out = Output(self.free) if self.handed else None
        code = self.entry(pointers(*ptrs), lengths(*lens), ctypes.byref(status),
                          # (no output: a handle of its own, which the kernel sets to null;
                          # one shared by all calls would be written by concurrent ones)
                          ctypes.byref(ctypes.c_void_p() if out is None else out.handle))
        if code != 0:
            raise self.failure(status)
        if self.kernel.dest == "dense":
            return [dest]
        t = self.kernel.result
        if not isinstance(t, DictT):  # a number, in the status
            return [np.array([status.real], dtype=np.float64) if t == REAL else
                    np.array([status.integer], dtype=np.int64)]
        assert out is not None
        return self.collect(out)

    def arguments(self, inputs: list[Buffers], dest: Any = None, work: Sequence[int] = (),
                  checks: Sequence[int] | None = None) -> tuple[list[int | None], list[int]]:
        """The entry point's buffer pointers and lengths for a call (``__call__``'s
        parameters)."""
        flat = [a for bufs in inputs for a in bufs]
        assert all(a.flags.c_contiguous for a in flat), "buffers are contiguous"
        ptrs: list[int | None] = [address(a) for a in flat]
        lens: list[int] = [a.size for a in flat]
        kind = self.kernel.dest
        if kind == "dense":
            assert dest is not None and dest.flags.c_contiguous and dest.dtype == np.float64
            ptrs += [address(dest)] + [None] * (dest.ndim - 1)
            lens += dest.shape
        elif kind == "vec":
            ptrs.append(None)
            lens.append(int(dest))
        elif kind == "rows":  # its rows and columns
            ptrs += [None, None]
            lens += [int(dest[0]), int(dest[1])]
        assert len(work) == len(self.kernel.work), "a size for each workspace"
        ptrs += [None] * len(work)
        lens += work
        checks = [-1] * len(self.kernel.checks) if checks is None else checks
        assert len(checks) == len(self.kernel.checks), "a column count or -1 for each"
        ptrs += [None] * len(checks)
        lens += checks
        return ptrs, lens

    def collect(self, out: Output) -> Buffers:
        """The buffers of a result handed back in ``out``, read without a copy."""
        n = self.count
        data, counts = (ctypes.c_void_p * n)(), (ctypes.c_int64 * n)()
        narrowed = self.buffers(out.handle, n, data, counts)
        result: Buffers = []
        for k, (ptr, count) in enumerate(zip(data, counts, strict=True)):
            dtype = (_INT32 if narrowed >> k & 1 else _INT64) if k < n - 1 else self.leaf
            result.append(np.zeros(0, dtype=dtype) if count == 0 or not ptr else
                          np.asarray(_View(out, ptr, count, dtype)))
        return result

    def failure(self, st: Status) -> BaseException:
        span = self.kernel.spans[st.span] if 0 <= st.span < len(self.kernel.spans) else None
        if st.code in (DOMAIN, RANGE):
            name = list(UNARY_OPS)[st.op]
            try:
                unop(name, float(st.value), span)  # the interpreter's own message
            except EvalError as err:
                return err
            return EvalError(f"{name}({st.value}): the compiled code found no finite result",
                             span)
        if st.code == REAL_OVERFLOW:
            return EvalError("real overflow: the result holds a number that is not finite")
        if st.code == INT_OVERFLOW:
            return EvalError("integer overflow: a result does not fit in 64 bits, the C++ "
                             "backend's int (the interpreter's integers are unbounded)")
        if st.code == NO_MEMORY:
            return EvalError("out of memory while running the compiled code")
        if st.code == OUTSIDE:
            return CodegenError(f"the compiled code wrote key {int(st.value)} outside the "
                                "result's size: the sizes analysis (sdqlite/check/sizes.py) "
                                "was wrong here; please report it")
        if st.code == INTERRUPTED:
            return KeyboardInterrupt()
        if st.code == RECHECK:
            return Unchecked()
        return CodegenError(f"the compiled code failed: {st.message.decode(errors='replace')}")


def _main_thread() -> bool:
    """Only the main thread takes SIGINT in Python: a kernel run from another thread
    leaves the handler alone."""
    return threading.current_thread() is threading.main_thread()

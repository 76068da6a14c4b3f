"""Calling a built kernel: buffers in, buffers out, failures as SDQLite errors.

The entry point ``sdql_<name>(data, status, out)`` reads its inputs from an array of
buffer pointers (``codegen/data.py``), and hands back an output handle whose buffers are
copied into numpy arrays and then freed.  A failure inside the kernel comes back as a
status: a unary operation outside its domain (re-raised by the interpreter's own
``unop``, so both backends say the same), real or integer overflow, or out of memory.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from codegen.build import Built
from codegen.data import Buffers, layers, leaf_dtype
from codegen.emit import Kernel
from sdqlite.errors import CodegenError, EvalError
from sdqlite.syntax.ops import UNARY_OPS

DOMAIN, RANGE, REAL_OVERFLOW, INT_OVERFLOW, NO_MEMORY, OUTSIDE = 1, 2, 3, 4, 5, 7


class Status(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int64), ("op", ctypes.c_int64), ("span", ctypes.c_int64),
                ("value", ctypes.c_double), ("message", ctypes.c_char * 256)]


@dataclass
class Native:
    """A loaded kernel."""

    built: Built
    kernel: Kernel

    def __post_init__(self) -> None:
        lib = self.built.library
        self.entry = getattr(lib, self.kernel.entry)
        self.entry.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(Status),
                               ctypes.POINTER(ctypes.c_void_p)]
        self.entry.restype = ctypes.c_int
        self.buffer = lib.sdql_output_buffer
        self.buffer.argtypes = [ctypes.c_void_p, ctypes.c_int64,
                                ctypes.POINTER(ctypes.c_void_p)]
        self.buffer.restype = ctypes.c_int64
        self.free = lib.sdql_output_free
        self.free.argtypes = [ctypes.c_void_p]
        self.free.restype = None
        self.live = lib.sdql_outputs_live  # results not yet freed (none between calls)
        self.live.argtypes = []
        self.live.restype = ctypes.c_int64

    def __call__(self, inputs: list[Buffers]) -> Buffers:
        """Run on the inputs' buffers (in the kernel's input order); the result's buffers."""
        arrays = [a for bufs in inputs for a in bufs]
        for a in arrays:
            assert a.flags.c_contiguous, "buffers are contiguous"
        data = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        status, out = Status(), ctypes.c_void_p()
        if self.entry(data, ctypes.byref(status), ctypes.byref(out)) != 0:
            raise self.failure(status)
        try:
            t = self.kernel.result
            result: Buffers = []
            for k in range(2 * len(layers(t)) + 1):
                ptr = ctypes.c_void_p()
                n = self.buffer(out, k, ctypes.byref(ptr))
                dtype = np.int64 if k < 2 * len(layers(t)) else leaf_dtype(t)
                result.append(_copy(ptr.value, n, dtype))
            return result
        finally:
            self.free(out)

    def failure(self, st: Status) -> Exception:
        from semantics.interp import unop

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
                                "result's size: the sizes analysis (sdqlite/check/sizes.py) was "
                                "wrong here; please report it")
        return CodegenError(f"the compiled code failed: {st.message.decode(errors='replace')}")


def _copy(ptr: int | None, n: int, dtype: Any) -> Any:
    if n == 0 or ptr is None:
        return np.zeros(0, dtype=dtype)
    raw = (ctypes.c_char * (n * np.dtype(dtype).itemsize)).from_address(ptr)  # any size:
    return np.frombuffer(raw, dtype=dtype).copy()  # string_at's length is a C int

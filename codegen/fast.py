"""The front door's fast path: a call with data of a signature seen before, made in C++.

The Python door (``api.Door``) costs about 30 µs a call in Python: reading each input,
its checks, its buffers, the ctypes call, the result (``make bench``'s fixed cost of a
scalar kernel: 32 µs; 2.1 µs through this path).  For a small kernel that is most of the
call (scipy's VVD at n = 10⁴: 5 µs).  So the first call of a signature
also writes a *plan* (``plan``): for each input its kind, type, shape and index widths;
for each of the kernel's buffers, which part of which input it is; the destination; the
entry point.  Later calls go to ``sdqlite_call.cpp`` (a Python extension built once, like
a kernel, cached), which checks the data against the plan and runs the kernel, or
declines: data of another signature, or not plainly right, or a kernel that fails.  A
declined call goes the Python door's way, which says what is wrong, so the fast path only
answers what the door would (``properties/test_fast_door.py``).

Plans are made for the common kinds of input only (the tables below): a C-contiguous
float64 numpy array, a CSR matrix laid out in CSR (which the kernel checks as it reads it,
``Kernel.checks``, or the extension checks whole before it runs), a COO vector, a Python
float; the extension checks a plan's shape as it reads it (a plan it
cannot hold is declined, one made otherwise is a TypeError, never a crash).  Where
Python's headers are missing, or the extension does not build, every call takes the
Python door.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import sys
import sysconfig
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np

from codegen import data as D
from codegen import results as R
from codegen.build import build
from codegen.native import Native, Output, Status
from sdqlite.errors import BuildError
from sdqlite.syntax.types import BOOL, INT, REAL, DictT, Type

SOURCE = Path(__file__).parent / "sdqlite_call.cpp"

# the tables of sdqlite_call.cpp, in its order
NUMPY, CSR, COO, FLOAT = range(4)  # an input's kind
#: a flat array's part (``inputs.flat_arrays``: numpy's len and V, CSR's len, pos, idx and
#: val, COO's len, row and val; sdqlite_call.cpp's ``takes`` checks each against its kind)
PARTS = {"len": 0, "pos": 1, "idx": 2, "row": 2, "val": 3, "V": 4}
DATA, CONST = 4, 5  # an input read whole; an array of the plan's own
DESTS = {"value": 0, "dense": 1, "vec": 2, "rows": 3}
BACK_REAL, BACK_INT, BACK_BOOL, ARRAY, HANDLE = range(5)  # what comes back
FIELDS = 14  # a plan's fields
PLANS = 8  # plans a compiled program keeps (each declined costs a little)

#: plans are made (tests turn it off to compare with the Python door)
enabled = True

Plan = tuple[Any, ...]
Caller = Callable[[tuple[Plan, ...], dict[str, Any]], Any]
_lock = threading.Lock()
_loaded: list[Caller | None] = []  # once a process


def caller() -> Caller | None:
    """The extension's ``call``, built and loaded once a process; None where it cannot be
    (no Python headers, a build that fails, a status laid out otherwise)."""
    with _lock:
        if not _loaded:
            _loaded.append(_load())
        return _loaded[0]


def _load() -> Caller | None:
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        return None
    # (the interpreter named in the source: another Python's extension is another object)
    text = f"// for {sys.implementation.cache_tag} {sys.version}, numpy {np.__version__}\n" \
        + SOURCE.read_text()
    try:
        built = build(text, includes=(include, np.get_include()))
        loader = importlib.machinery.ExtensionFileLoader("sdqlite_call", str(built.path))
        spec = importlib.util.spec_from_loader("sdqlite_call", loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (BuildError, ImportError, OSError):
        return None
    layout = (ctypes.sizeof(Status), Status.message.offset, Status.real.offset, FIELDS)
    call: Caller = module.call
    return call if module.layout() == layout else None


def plan(door: Any, given: Mapping[str, Any], output: R.Output, threads: int,
         parallel_from: int) -> Plan | None:
    """The plan of a door (an ``api.Door``: api imports this module), from its first
    call's data ``given`` (``output``, ``threads`` and ``parallel_from`` as
    ``Compiled.run`` has them); None for data of kinds the fast path does not take (the
    Python door takes them)."""
    call = caller() if enabled else None
    if call is None:
        return None
    spec, low = door.spec, door.lowering
    kernel, native = spec.kernel, cast(Native, spec.native)
    names = tuple(x for x, *_ in door.inputs)
    index = {x: i for i, x in enumerate(names)}
    items = []
    for x, t, kind, _ in door.inputs:
        item = _item(t, kind, given[x], low.formats[x].name, door.elements,
                     low.flat.get(x, {}), x in kernel.checks)
        if item is None:
            return None
        items.append(item)
    slots: list[tuple[int, int, Any]] = []
    owners = {name: (x, part) for x, params in low.flat.items() for part, name in params.items()}
    for name, t in low.inputs:
        if name in owners:  # a flat array of an input in the one format _item takes it in
            x, part = owners[name]
            slots.append((index[x], PARTS[part], None))
        else:  # an input read whole (_item takes scipy data in their own formats only)
            i = index[name]
            consts = _whole(given[name], t) if items[i][0] == NUMPY else []
            if consts is None:
                return None
            slots += [(-1, CONST, c) for c in consts] + [(i, DATA, None)]
    dest, t = kernel.dest, spec.result
    handed = None
    if not isinstance(t, DictT):  # a number, in the status
        back = {REAL: BACK_REAL, INT: BACK_INT, BOOL: BACK_BOOL}[t]
        finish = None
    elif dest == "dense":
        back = ARRAY
        finish = None if R.itself(t, output) else partial(_finished, spec, door.bounds, output)
    else:  # (sdqlite_call.cpp collects its buffers as Native.collect does)
        back = HANDLE
        finish = partial(_finished, spec, door.bounds, output)
        handed = (_address(native.buffers), native.count, native.leaf.num)
    shape = tuple(R.shape(dest, t, spec.sizes, door.bounds)) if dest == "dense" else \
        tuple(int(n) for n in R.allocate(dest, t, spec.sizes, door.bounds)) if dest == "rows" \
        else (int(R.allocate(dest, t, spec.sizes, door.bounds)),) if dest == "vec" else ()
    return (names, tuple(items), tuple(slots), (DESTS[dest], shape),
            tuple(door.bounds[n] for n in kernel.work), tuple(index[x] for x in kernel.checks),
            _address(native.entry), back, finish, partial(Output, native.free), handed,
            threads, parallel_from, threading.main_thread().ident)


def _address(function: Any) -> int | None:
    return ctypes.cast(function, ctypes.c_void_p).value


def _item(t: Type, kind: str, data: Any, fmt: str, elements: Mapping[str, str],
          params: Mapping[str, str], checked: bool) -> tuple[Any, ...] | None:
    """An input's kind, exact type and shape, and a sparse input's index widths (bytes),
    as the plan holds them; None where the fast path does not take it."""
    width = {"std::int32_t": 4, "sdql::i64": 8}
    # (the door's signature has checked each input's dimensions against its type already)
    match kind:
        case "value" if type(data) is float:  # (a real: a float is read as one)
            return (FLOAT, float, ())
        case "numpy" if data.dtype == np.float64 and (not params or fmt == "dense"):
            return (NUMPY, np.ndarray, tuple(data.shape))  # (exactly: api.Door's signature)
        case "scipy" if data.dtype == np.float64 and data.format == "csr" and fmt == "csr":
            # (a matrix the kernel does not check, βAᵀA's read by key, is checked whole
            # by the extension before the kernel runs: the last field)
            return (CSR, type(data), tuple(data.shape), width[elements[params["pos"]]],
                    width[elements[params["idx"]]], int(not checked))
        case "scipy" if data.dtype == np.float64 and data.format == "coo" and fmt == "coo":
            keys = data.coords[0].dtype.itemsize  # (a kernel is built for the width it gets)
            return (COO, type(data), tuple(data.shape), keys) if keys in (4, 8) else None
    return None


def _whole(a: Any, t: Type) -> list[Any] | None:
    """The arrays a numpy array read whole comes with (its dense layers' pointers, which
    its shape fixes: ``D.from_numpy``), its values last; None where it is not all dense."""
    layers = D.layers(t)
    if len(layers) != a.ndim or not all(layer.dense for layer in layers):
        return None
    return [] if a.ndim == 1 else D.from_numpy(a, t)[:-1]  # (as api.as_is)


def _finished(spec: Any, bounds: Mapping[str, int], output: R.Output, result: Any) -> Any:
    """The result as ``Compiled.run`` gives it, from what the extension returns: the dense
    array written in place, or a handed-back result's buffers (``Native.collect``)."""
    dest = spec.kernel.dest
    return R.convert([result] if dest == "dense" else result, spec.kernel.result, spec.result,
                     spec.sizes, bounds, output, checked=dest == "rows")


__all__: Sequence[str] = ("caller", "plan")

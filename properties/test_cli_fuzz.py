"""The command line never breaks, whatever it is given (the front doors' totality).

Programs and data files are mutated — spans deleted, duplicated or replaced by tokens of
the language, bytes flipped, files truncated — from seeds that work (the paper's example
programs with their inputs; small ``.npy``/``.mtx`` files), and run through the CLI's
entry point in-process (``check``, ``eval``, ``grad``, ``opt``).  Law: every run ends
within a time budget with exit status 0, 1 or 2 (2: the command line itself), and a
failing run prints a one-line ``...: error: ...`` message that names where the fault
is (the program's ``file:line:col``, a file, an input or the command), never a
traceback or an "internal error".
"""

from __future__ import annotations

import contextlib
import io
import re
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sdqlite.ui.cli import main

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 30  # seconds a case may take before it counts as a hang


@dataclass(frozen=True)
class Seed:
    program: str  # a paper example (paper_examples/NAME.sdql)
    inputs: tuple[str, ...]  # NAME=VALUE literals, or NAME=@npy / NAME=@mtx for a data file
    wrt: str


SEEDS = [
    Seed("dot_v1", ("V1={0 -> 1.5, 3 -> -2.0}", "V2={0 -> 2.0, 2 -> 1.0, 3 -> 0.5}"), "V1"),
    Seed("batax", ("A=@mtx", "beta=0.5", "x=@npy"), "x"),
    Seed("matmul", ("M1=@mtx", "M2={0 -> {1 -> 2.0}, 2 -> {0 -> -1.0}}"), "M1"),
    Seed("trace", ("M=@mtx",), "M"),
    Seed("scalar_vector", ("s=2.5", "V={1 -> 4.0, 3 -> -1.0}"), "s"),
    Seed("map", ("V={0 -> 0.5, 2 -> -1.0}",), "V"),
]
TOKENS = ["sum", "(", ")", "<", ">", ",", "in", "let", "=", "if", "then", "not", "{", "}",
          "->", "+", "-", "*", ":", "[", "]", "x", "V'", "_", "0", "1", "2.5", "true",
          "sin", "log", "unique", "zero[real]", "real", "int", "dense_int", "int[n]", "@",
          "@ csr", "gradient", "1e400", "99999999999999999999", "\n", "(0:3)", "M(i)"]
MTX = ("%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 1.5\n2 3 -2.0\n"
       "3 1 0.5\n3 3 4.0\n")


def _npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array([0.5, -1.0, 2.0]))
    return buf.getvalue()


@st.composite
def _edits(draw: st.DrawFn, text: str) -> str:
    """``text`` with up to three edits: a span deleted, duplicated or replaced by a token."""
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        match draw(st.sampled_from(["delete", "duplicate", "replace", "insert"])):
            case "delete":
                text = text[:i] + text[j:]
            case "duplicate":
                text = text[:j] + text[i:j] + text[j:]
            case "replace":
                text = text[:i] + draw(st.sampled_from(TOKENS)) + text[j:]
            case _:
                text = text[:i] + " " + draw(st.sampled_from(TOKENS)) + " " + text[i:]
    return text


@st.composite
def _bytes_edits(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` truncated, or with a few bytes changed."""
    if draw(st.booleans()):
        return data[:draw(st.integers(0, len(data)))]
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    return bytes(out)


@dataclass(frozen=True)
class Case:
    command: str
    program: str
    inputs: tuple[str, ...]
    npy: bytes
    mtx: bytes
    wrt: str


@st.composite
def cases(draw: st.DrawFn) -> Case:
    seed = draw(st.sampled_from(SEEDS))
    source = (ROOT / "paper_examples" / f"{seed.program}.sdql").read_text(encoding="utf-8")
    what = draw(st.sampled_from(["program", "input", "data", "nothing"]))
    program = draw(_edits(source)) if what == "program" else source
    inputs = list(seed.inputs)
    if what == "input" and inputs:
        k = draw(st.integers(0, len(inputs) - 1))
        inputs[k] = draw(_edits(inputs[k]))
    npy, mtx = _npy(), MTX.encode()
    if what == "data":
        if draw(st.booleans()):
            npy = draw(_bytes_edits(npy))
        else:
            mtx = draw(_edits(MTX)).encode(errors="replace")
    command = draw(st.sampled_from(["check", "eval", "grad", "opt"]))
    wrt = draw(st.sampled_from([seed.wrt, seed.wrt, "nope", "i"]))
    return Case(command, program, tuple(inputs), npy, mtx, wrt)


@contextlib.contextmanager
def _budget(seconds: int) -> Iterator[None]:
    def hang(signum: int, frame: object) -> None:
        raise AssertionError(f"the case ran over its budget of {seconds} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


LOCATED = re.compile(r"^(\S.*?): error: \S")


def _run(case: Case) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "prog.sdql"
        prog.write_text(case.program, encoding="utf-8", errors="replace")
        (Path(tmp) / "d.npy").write_bytes(case.npy)
        (Path(tmp) / "d.mtx").write_bytes(case.mtx)
        inputs = [s.replace("=@npy", f"={tmp}/d.npy").replace("=@mtx", f"={tmp}/d.mtx")
                  for s in case.inputs]
        argv = [case.command, str(prog)]
        if case.command in ("eval", "grad"):
            argv += [arg for spec in inputs for arg in ("--input", spec)]
        if case.command in ("grad", "opt"):
            argv += ["--wrt", case.wrt]
        if case.command == "opt":
            argv += ["--time-limit", "1"]
        out, err = io.StringIO(), io.StringIO()
        with _budget(BUDGET), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as exit_:  # argparse: the command line itself
                status = int(exit_.code or 0)
        text = err.getvalue()
        assert status in (0, 1, 2), (argv, status, text)
        assert "Traceback" not in text and "internal error" not in text, (argv, text)
        if status != 0:
            first = text.splitlines()[0] if text else ""
            if status == 1:
                assert LOCATED.match(first), (argv, text)
            else:
                assert "error:" in text, (argv, text)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(cases())
@example(Case("check", "x : real\n" + "gradient (" * 8 + "sin(x) * x" + ") x" * 8, (),
              b"", b"", "x"))
@example(Case("eval", "{" + ", ".join(f"{i} -> 1.0" for i in range(5000)) + "}", (), b"",
              b"", "x"))
@example(Case("grad", "x : real\n" + "sin(" * 2000 + "x" + ")" * 2000,
              ("x=0.5",), b"", b"", "x"))
@example(Case("check", "[" * 800 + "1.0" + "]" * 800, (), b"", b"", "x"))
@example(Case("eval", "2.0 * 1" + "0" * 400, (), b"", b"", "x"))
@example(Case("eval", "1" * 4400, (), b"", b"", "x"))
def test_the_cli_ends_cleanly_on_mutated_input(case: Case) -> None:
    _run(case)

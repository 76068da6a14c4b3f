"""The REPL session: declarations, inputs, :type, :load, multi-line entries."""

import io
import re
from pathlib import Path

import numpy as np
import pytest

from sdqlite.errors import DataError, ParseError, SDQLTypeError
from sdqlite.syntax.parser import HINTS, parse_program, parse_type
from sdqlite.ui.repl import repl
from sdqlite.ui.session import SYNTAX, Session


def test_declare_bind_evaluate() -> None:
    s = Session()
    assert s.handle("V : {int -> real}") == "V : {int -> real}"
    assert s.handle(":input V = {1 -> 2.0, 3 -> -1.0}") == "V : {int -> real}"
    assert s.handle("sum(<i,a> in V) a * a") == "5.0\n  : real"
    assert s.handle(":type V * V") == "{int -> {int -> real}}"


def test_empty_literal_takes_declared_type() -> None:
    s = Session()
    s.handle("V : {int -> real}")
    s.handle(":input V = {}")
    assert s.handle("V") == "{}\n  : {int -> real}"


def test_input_from_npy(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.array([1.0, 2.0]))
    s = Session()
    assert s.handle(f":input x = {tmp_path / 'x.npy'}") == "x : {dense_int -> real}"
    assert s.handle("x(1) * 2") == "4.0\n  : real"


def test_load_file(tmp_path: Path) -> None:
    p = tmp_path / "f.sdql"
    p.write_text("s : real\nV : {int -> real}\n")
    s = Session()
    assert s.handle(f":load {p}") == "s : real\nV : {int -> real}"
    assert set(s.types) == {"s", "V"}


def test_errors_name_what_was_expected() -> None:
    s = Session()
    s.handle("V : {int -> real}")
    with pytest.raises(SDQLTypeError, match=r"expected real, found \{int -> real\}"):
        s.handle(":type 1.0 + V")
    with pytest.raises(DataError, match="no value for input V"):
        s.handle("V")
    with pytest.raises(DataError, match="unknown command"):
        s.handle(":frobnicate")


def test_loop_multiline_and_errors(monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    script = "\n".join([
        "V : {int -> real}",
        ":input V = {0 -> 2.0}",
        "sum(<i, a> in V)",
        "  { i -> a * a }",
        "",
        "W + 1",
        ":quit",
    ])
    monkeypatch.setattr("sys.stdin", io.StringIO(script + "\n"))
    assert repl() == 0
    out = capsys.readouterr()
    assert "{ 0 -> 4.0 }\n  : {int -> real}" in out.out
    assert "<repl>:1:1: error: unbound variable W" in out.err


@pytest.mark.parametrize(("typed", "hint"), [
    ("x ^ 2.0", "^"), ("x ** 2.0", "**"), ("x / 2.0", "/"), ("x % 2.0", "%"),
    ("x == 2.0", "=="), ("x != 2.0", "!="), ("!(x = 1.0)", "!"), ("x && x", "&&"),
    ("x || x", "||"), ("if x = 1.0 then x else 2.0", "else")])
def test_what_other_languages_write_gets_a_hint(typed: str, hint: str) -> None:
    """Each row of the parser's HINTS, typed, is a parse error that gives its hint, and
    ``:help syntax`` lists them all."""
    s = Session()
    s.handle("x : real")
    with pytest.raises(ParseError) as caught:
        s.handle(typed)
    assert f"({HINTS[hint]})" in caught.value.message
    listed = s.handle(":help syntax")
    assert all(v in listed for v in HINTS.values())


@pytest.mark.parametrize(("construct", "example", "note"), SYNTAX)
def test_help_syntax_lists_each_construct_with_an_example_that_parses(
        construct: str, example: str, note: str) -> None:
    """Issue 27: ``:help syntax`` listed only the hints; now SDQLite's constructs too,
    each with an example the parser reads (a type as a type, a declaration as one)."""
    if construct == "TYPE":
        parse_type(example)
    else:
        program = parse_program(example)
        assert (program.decls if construct == "NAME : TYPE" else program.expr), example
    line = next(ln for ln in Session().handle(":help syntax").splitlines()
                if ln.lstrip().startswith(construct))
    assert example in line and note in line


@pytest.mark.parametrize(("entry", "words"), [
    (":grad x * x", "the variable to differentiate by is missing"),
    (":grad x", "the variable to differentiate by is missing"),
    (":grad", "usage: :grad EXPR X"),
    (":grad x ^ 2.0 x", "no power operator"),  # the body's own parse error, with its hint
])
def test_grad_without_its_variable_says_what_is_missing(entry: str, words: str) -> None:
    s = Session()
    s.handle("x : real")
    with pytest.raises((DataError, ParseError), match=re.escape(words)):
        s.handle(entry)
    s.handle(":input x = 3.0")
    assert "6.0" in s.handle(":grad x * x x").splitlines()  # d(x²)/dx = 2x at 3


@pytest.mark.parametrize("leave", [":quit", ":q", ":exit", "quit", "exit", "  exit  "])
def test_the_loop_ends_on_quit_and_exit(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], leave: str) -> None:
    """``quit`` and ``exit`` leave as Python's REPL's do; what follows is not read."""
    monkeypatch.setattr("sys.stdin", io.StringIO(f"1.0 + 1.0\n{leave}\n3.0 * 5.0\n"))
    assert repl() == 0
    out = capsys.readouterr().out
    assert "2.0" in out and "15.0" not in out


def test_loop_survives_failures_and_keeps_the_session(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bug, Ctrl-C, deep recursion or exhausted memory in one entry is reported in one
    line; the next entry still sees the declarations and inputs made before it."""
    failures: dict[str, BaseException] = {
        "bug": ValueError("kaboom\non two lines"), "ctrl-c": KeyboardInterrupt(),
        "deep": RecursionError("maximum recursion depth exceeded"), "mem": MemoryError()}
    handle = Session.handle

    def failing(self: Session, text: str) -> str:
        if text in failures:
            raise failures[text]
        return handle(self, text)

    monkeypatch.setattr(Session, "handle", failing)
    monkeypatch.delenv("SDQLITE_DEBUG", raising=False)
    script = ["V : {int -> real}", ":input V = {0 -> 2.0}", *failures, "sum(<i, a> in V) a"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(script) + "\n"))
    assert repl() == 0  # the end of input ends the loop
    out = capsys.readouterr()
    assert out.out.endswith("2.0\n  : real\n")
    assert out.err.splitlines() == [
        "sdqlite: internal error: ValueError: kaboom on two lines "
        "(set SDQLITE_DEBUG=1 for a traceback, and please report it)",
        "(interrupted)",
        "<repl>: error: input nested too deeply",
        "<repl>: error: out of memory",
    ]



def test_help_describes_multiline_entries() -> None:
    text = " ".join(Session().handle(":help").split())
    assert "goes on over further lines while it is incomplete; an empty line ends it" in text


def test_debug_shows_the_traceback_and_goes_on(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def failing(self: Session, text: str) -> str:
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(Session, "handle", failing)
    monkeypatch.setenv("SDQLITE_DEBUG", "1")
    monkeypatch.setattr("sys.stdin", io.StringIO("1.0\n2.0\n"))
    assert repl() == 0
    err = capsys.readouterr().err
    assert err.count("Traceback") == 2  # one per entry: the loop went on
    assert err.count("sdqlite: internal error: ZeroDivisionError: bug") == 2


def _terminal(keys: list[str], home: Path) -> str:
    """The REPL run in a pseudo-terminal (as a person at a keyboard runs it): each key
    sequence typed once the screen has settled; the whole screen afterwards."""
    import os
    import pty
    import select
    import sys
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: the REPL, with its own history file
        os.environ.update(TERM="xterm", HOME=str(home))
        os.execv(sys.executable, [sys.executable, "-m", "sdqlite", "repl"])
    screen = b""

    def settle(until: bytes = b"") -> None:
        nonlocal screen
        deadline, quiet = time.monotonic() + 60, time.monotonic() + 0.3
        while time.monotonic() < deadline and (until not in screen
                                               or time.monotonic() < quiet):
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    screen += os.read(fd, 1 << 16)
                except OSError:  # the REPL has left
                    return
                quiet = time.monotonic() + 0.3

    try:
        settle(b"sdql> ")
        for k in keys:
            os.write(fd, k.encode())
            settle()
        os.write(fd, b"\x04")  # Ctrl-D
        settle()
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    return screen.decode().replace("\r", "")


def test_up_arrow_brings_back_a_whole_multiline_entry_and_tab_completes(
        tmp_path: Path) -> None:
    """At a terminal, the up arrow gives the last entry back with all its lines, Enter runs
    it again; Tab completes a declared name and a command; history outlives the session."""
    up = "\x1b[A"
    screen = _terminal(["Alpha : real\n", ":inp\t Alpha = 3.0\n",
                        "sum(<i, a> in {0 -> 1.0, 1 -> 2.0})\n", "  a * Alpha\n",
                        up, "\n", "Alp\t * 2.0\n"], tmp_path)
    first = "sdql> sum(<i, a> in {0 -> 1.0, 1 -> 2.0})\n"
    assert first + "  ...   a * Alpha\n9.0\n  : real\n" in screen  # typed line by line
    assert first + "  a * Alpha\n9.0\n  : real\n" in screen  # recalled whole, run again
    assert "error" not in screen
    assert "ut Alpha = 3.0\nAlpha : real\n" in screen  # :inp, Tab: ":input" (and a bell)
    assert "sdql> Alpha * 2.0\n6.0\n" in screen
    history = (tmp_path / ".sdqlite_history").read_text()
    assert "sum(<i, a> in {0 -> 1.0, 1 -> 2.0})" in history and "  a * Alpha" in history


@pytest.mark.parametrize(("before", "word", "expected"), [
    ("", ":in", [":input", ":inputs"]),
    ("", ":a", [":all", ":anf"]),
    ("", "gra", ["gradient"]),
    ("1 + ", "s", ["sin", "sqrt", "sum"]),
    ("sum(<i, a> in ", "Al", ["Alpha"]),
    ("x : {int -> real} @ ", "", ["coo", "dense", "dict"]),  # a sparse vector's
    ("A : {int -> {int -> real}} @", "cs", ["csc", "csr"]),
    ("A : {int -> @ ", "cs", ["csc", "csf", "csr"]),  # every format: the type is unfinished
    (":load ", "tests/data/v", ["tests/data/v1.npy"]),
    (":input x = ", "tests/da", ["tests/data/"]),
    ("", "zzz", []),
])
def test_tab_completes_commands_names_words_formats_and_files(
        before: str, word: str, expected: list[str]) -> None:
    s = Session()
    s.handle("Alpha : real")
    assert s.complete(before, word) == expected


def test_a_large_value_prints_summarised_and_all_shows_it_whole() -> None:
    from sdqlite.ui.session import SHOWN
    from semantics.display import read_value, show_value

    s = Session()
    out = s.handle(f"sum(<i, _> in (0:{3 * SHOWN})) {{i -> {{0 -> 1.5, 1 -> 2.5}}}}")
    shown = ", ".join(f"{i} -> {{ 0 -> 1.5, 1 -> 2.5 }}" for i in range(SHOWN // 2))
    assert out == f"{{ {shown}, … ({3 * SHOWN:,} entries) }}\n  : {{int -> {{int -> real}}}}"
    whole = s.handle(":all")
    assert "…" not in whole
    assert read_value(whole)[0] == {i: {0: 1.5, 1: 2.5} for i in range(3 * SHOWN)}
    assert s.handle("[1.0, 2.0]").startswith("[1.0, 2.0]\n")  # small values print whole
    assert show_value(s.last) == "[1.0, 2.0]"
    with pytest.raises(DataError, match=":all shows the last value in full, and there is "
                                        "none yet"):
        Session().handle(":all")


def test_a_redeclaration_keeps_a_value_that_fits_and_unbinds_one_that_does_not() -> None:
    """Issue 27, bug 2: the value stayed under the new type unchecked (a sum over it was
    an internal AttributeError; after x : bool, x printed [1.0, 0.0, 2.0] : bool)."""
    s = Session()
    s.handle("x : {dense_int -> real}")
    s.handle(":input x = tests/data/v1.npy")
    assert s.handle("x : {dense_int -> real}") == "x : {dense_int -> real}"  # it fits
    assert s.handle("x") == "[1.0, 0.0, 2.0]\n  : {dense_int -> real}"
    out = s.handle("x : {int -> {int -> real}}")
    assert out.startswith("x : {int -> {int -> real}}\n  (x's value is unbound: input x is "
                          "declared {int -> {int -> real}}") and ":input x = VALUE" in out
    for entry in ("sum(<i, r> in x) sum(<j, v> in r) v", "x"):
        with pytest.raises(DataError, match="no value for input x"):
            s.handle(entry)
    s.handle(":input x = {0 -> {1 -> 2.0}}")
    assert "unbound" in s.handle("x : bool")
    with pytest.raises(DataError, match="no value for input x"):
        s.handle("x")


@pytest.mark.parametrize(("entry", "message"), [
    (":input x = {0 -> 1.0}", r"^:input x: expected real, found \{int -> real\}$"),
    (":input x = 1.0 2.0", r"^:input x: unexpected '2.0'"),
    (":input 3 = 1", r"^:input: expected NAME = PATH or NAME = VALUE"),
])
def test_an_input_error_in_the_repl_names_input_not_the_cli_option(entry: str,
                                                                    message: str) -> None:
    s = Session()
    s.handle("x : real")
    with pytest.raises(DataError, match=message):
        s.handle(entry)

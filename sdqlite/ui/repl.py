"""The interactive loop around ``sdqlite.ui.session.Session``: prompts, multi-line input
(continued while the text is an incomplete program), history (readline; a multi-line
entry is one item) and Tab completion."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from sdqlite.errors import SDQLiteError, format_error, internal_error
from sdqlite.syntax.parser import is_incomplete
from sdqlite.ui.session import Session

HISTORY = Path.home() / ".sdqlite_history"
BANNER = "SDQLite REPL — :help for commands, Ctrl-D to leave."


def _setup_readline(session: Session) -> ModuleType | None:
    """History kept in ~/.sdqlite_history and Tab completion (``Session.complete``), when
    Python has readline; the module, for ``_remember``."""
    try:
        import atexit
        import readline
    except ImportError:
        return None
    with contextlib.suppress(OSError):
        readline.read_history_file(HISTORY)
    readline.set_history_length(1000)
    atexit.register(lambda: _save(readline))
    readline.set_completer_delims(" \t\n()[]{}<>,=+-*@")  # ':', '/', '.' belong to words
    readline.parse_and_bind("bind ^I rl_complete" if "libedit" in (readline.__doc__ or "")
                            else "tab: complete")
    found: list[str] = []

    def complete(word: str, state: int) -> str | None:
        if state == 0:
            found[:] = session.complete(readline.get_line_buffer()[:readline.get_begidx()],
                                        word)
        return found[state] if state < len(found) else None

    readline.set_completer(complete)
    return readline


def _save(readline: object) -> None:
    with contextlib.suppress(OSError):
        readline.write_history_file(HISTORY)  # type: ignore[attr-defined]


def _remember(readline: Any, lines: list[str]) -> None:
    """A multi-line entry comes back whole with the up arrow: its lines, which readline
    kept one by one (blank ones not at all), become one history item."""
    kept = [line for line in lines if line.strip()]
    if len(kept) < 2:
        return
    end = readline.get_current_history_length()
    if [readline.get_history_item(i) for i in range(end - len(kept) + 1, end + 1)] != kept:
        return  # not what readline kept (history off, or a different library)
    for i in range(end - 1, end - len(kept) - 1, -1):
        readline.remove_history_item(i)  # 0-based, unlike get_history_item
    readline.add_history("\n".join(kept))


def repl(session: Session | None = None) -> int:
    """Read entries until EOF or :quit.  No entry ends the loop by failing: an error, an
    internal error or Ctrl-C is reported and the session (declarations, inputs) kept."""
    session = session or Session()
    interactive = sys.stdin.isatty()
    readline = _setup_readline(session) if interactive else None
    if interactive:
        print(BANNER)
    while True:
        try:
            text = _read_entry(interactive)
            if readline is not None:
                _remember(readline, text.split("\n"))
        except EOFError:
            if interactive:
                print()
            return 0
        except KeyboardInterrupt:
            print("\n(interrupted)")
            continue
        if text.strip() in (":quit", ":q", ":exit", "quit", "exit"):  # (as Python's)
            return 0
        out = _run_entry(session, text, sys.stdout if interactive else sys.stderr)
        if out:
            print(out)


def _run_entry(session: Session, text: str, errors: TextIO) -> str:
    """The entry's output, or "" after reporting why it has none."""
    try:
        return session.handle(text)
    except SDQLiteError as err:
        print(format_error(err, session.source, "<repl>"), file=errors)
    except KeyboardInterrupt:  # cancels this entry only
        print("(interrupted)", file=errors)
    except RecursionError:
        print("<repl>: error: input nested too deeply", file=errors)
    except MemoryError:
        print("<repl>: error: out of memory", file=errors)
    except Exception as err:  # a bug: say so in one line, keep the session
        if os.environ.get("SDQLITE_DEBUG"):
            traceback.print_exc()
        print(internal_error(err), file=errors)
    return ""


def _read_entry(interactive: bool) -> str:
    prompt, more = ("sdql> ", "  ... ") if interactive else ("", "")
    lines = [input(prompt)]
    while not lines[0].lstrip().startswith(":") and is_incomplete("\n".join(lines)):
        try:
            nxt = input(more)
        except EOFError:
            break
        if not nxt.strip():
            break
        lines.append(nxt)
    return "\n".join(lines)


"""The interactive loop around ``sdqlite.ui.session.Session``: prompts, multi-line input
(continued while the text is an incomplete program), and history (readline)."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from pathlib import Path
from typing import TextIO

from sdqlite.errors import SDQLiteError, format_error, internal_error
from sdqlite.syntax.parser import is_incomplete
from sdqlite.ui.session import Session

HISTORY = Path.home() / ".sdqlite_history"
BANNER = "SDQLite REPL — :help for commands, Ctrl-D to leave."


def _setup_history() -> None:
    try:
        import atexit
        import readline

        with contextlib.suppress(OSError):
            readline.read_history_file(HISTORY)
        readline.set_history_length(1000)
        atexit.register(lambda: _save(readline))
    except ImportError:
        pass


def _save(readline: object) -> None:
    with contextlib.suppress(OSError):
        readline.write_history_file(HISTORY)  # type: ignore[attr-defined]


def repl(session: Session | None = None) -> int:
    """Read entries until EOF or :quit.  No entry ends the loop by failing: an error, an
    internal error or Ctrl-C is reported and the session (declarations, inputs) kept."""
    session = session or Session()
    interactive = sys.stdin.isatty()
    if interactive:
        _setup_history()
        print(BANNER)
    while True:
        try:
            text = _read_entry(interactive)
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


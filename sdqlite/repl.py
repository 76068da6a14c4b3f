"""The interactive loop around ``sdqlite.session.Session``: prompts, multi-line input
(continued while the text is an incomplete program), and history (readline)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from sdqlite.errors import SDQLiteError, format_error
from sdqlite.parser import is_incomplete
from sdqlite.session import Session

HISTORY = Path.home() / ".sdqlite_history"


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
    session = session or Session()
    interactive = sys.stdin.isatty()
    if interactive:
        _setup_history()
        print("SDQLite REPL — :help for commands, Ctrl-D to leave.")
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
        if text.strip() in (":quit", ":q", ":exit"):
            return 0
        try:
            out = session.handle(text)
        except SDQLiteError as err:
            print(format_error(err, session.source, "<repl>"),
                  file=sys.stderr if not interactive else sys.stdout)
            continue
        except RecursionError:
            print("<repl>: error: input nested too deeply", file=sys.stderr)
            continue
        if out:
            print(out)


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


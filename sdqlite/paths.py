"""Paths from users: any string is handled, and an error says what the path names.

Every "is this a file?" of the front doors goes through ``path_kind``: an ``OSError`` or
``ValueError`` from the OS (a name too long, a NUL byte) means "not a path this system
can have", never an internal error.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Literal

from sdqlite.errors import DataError

Kind = Literal["file", "directory", "pipe", "device", "socket", "other"]


def path_kind(text: str) -> Kind | None:
    """What ``text`` names on this system (following links), or None when nothing."""
    try:
        mode = os.stat(text).st_mode
    except (OSError, ValueError):  # missing, or not a path this system can have
        return None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "socket" if stat.S_ISSOCK(mode) else "other"


def require_file(text: str, what: str, pipes: bool = False) -> Path:
    """``text`` as a path to read ``what`` from (a regular file; a pipe too when ``pipes``,
    e.g. the shell's ``<(...)``), else a ``DataError`` naming it and what it is."""
    kind = path_kind(text)
    if kind == "file" or (pipes and kind == "pipe"):
        return Path(text)
    if kind is not None:
        article = "an" if kind[0] in "aeiou" else "a"
        raise DataError(f"{text}: is {article} {kind}, not {what}")
    raise DataError(f"{text}: {_missing(text)}")


def _missing(text: str) -> str:
    try:
        os.stat(text)
    except ValueError:
        return "not a file name this system can have"
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            return "no such file (the name is too long for this system)"
        if err.errno not in (errno.ENOENT, errno.ENOTDIR):
            return f"cannot read: {err.strerror}"
    return "no such file"


def read_source(text: str) -> str:
    """The text of a source file (UTF-8)."""
    path = require_file(text, "a source file", pipes=True)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError) as err:  # UnicodeDecodeError is a ValueError
        raise DataError(f"{text}: cannot read: {err}") from None

"""One error hierarchy for the whole tool (DESIGN.md, "Errors").

Every error carries a span (where it is known) and a message that names what was
expected and what was found.  `format_error` renders it the way compilers do:
``file:line:col: error: message`` followed by the source line and a caret.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """A source region; lines and columns are 1-based, the end is exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


class SDQLiteError(Exception):
    """The root of all errors the tool reports to a user."""

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, file: str | None = None
                 ) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.file = file  # the program's file, when it came from one

    def __str__(self) -> str:
        """``file:line:col: message`` when the error is in the program (``<program>`` for
        source text); the message alone otherwise."""
        if self.span is None:
            return self.message
        return f"{self.file or '<program>'}:{self.span}: {self.message}"


class ParseError(SDQLiteError):
    """Text that is not an SDQLite program (or type, or value)."""


class SDQLTypeError(SDQLiteError):
    """A program that the bidirectional checker rejects."""


class DiffError(SDQLiteError):
    """A program outside what AD takes: ``gradient`` by a discrete input or a name that is
    not an input, τ not a real tensor type, a ``gradient`` not expanded yet."""


#: what the stages after AD say of a ``gradient`` node (the checker keeps it)
NOT_EXPANDED = ("gradient e x is used through its expansion: call sdqlite.ad.gradient.expand "
                "on the checked program first")


class EvalError(SDQLiteError):
    """A failure while evaluating a well-typed program (e.g. ``log(-1.0)``)."""


class DataError(SDQLiteError):
    """Input data that cannot be read, or that does not match its declaration."""


class CodegenError(SDQLiteError):
    """A failure of the C++ backend."""


class BuildError(CodegenError):
    """This machine cannot build or load a kernel: the cache directory (``$SDQLITE_CACHE``)
    cannot hold files, the compiler (``$CXX``) is missing or fails, ``$SDQLITE_CXXFLAGS``
    does not parse.  The message names the variable or file; the program is not at fault."""


def format_error(err: SDQLiteError, source: str | None = None, filename: str = "<input>") -> str:
    """Render ``file:line:col: error: message`` plus the source line and a caret."""
    if err.span is None:
        return f"{filename}: error: {err.message}"
    sp = err.span
    head = f"{filename}:{sp.line}:{sp.col}: error: {err.message}"
    if source is None:
        return head
    lines = source.splitlines()
    if not 1 <= sp.line <= len(lines):
        return head
    text = lines[sp.line - 1].expandtabs(1)
    width = sp.end_col - sp.col if sp.end_line == sp.line and sp.end_col > sp.col else 1
    width = max(1, min(width, len(text) - sp.col + 1))
    # A bounded excerpt: at most EXCERPT characters of the line, the span's start in view.
    lo = max(0, min(sp.col - 1 - EXCERPT // 4, len(text) - EXCERPT))
    hi = lo + EXCERPT
    left, right = ("..." if lo > 0 else ""), ("..." if hi < len(text) else "")
    width = min(width, hi - (sp.col - 1))
    caret = " " * (len(left) + sp.col - 1 - lo) + "^" * width
    return f"{head}\n  {left}{text[lo:hi]}{right}\n  {caret}"


EXCERPT = 100  # the most characters of a source line an error shows


def internal_error(err: BaseException) -> str:
    """One line for a bug (not the user's input): what the CLI and the REPL print."""
    text = " ".join(str(err).split())
    return (f"sdqlite: internal error: {type(err).__name__}{': ' + text if text else ''} "
            "(set SDQLITE_DEBUG=1 for a traceback, and please report it)")

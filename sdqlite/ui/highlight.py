"""A Pygments lexer for SDQLite (``sdql``): the words of ``sdqlite/syntax/grammar.lark``.

Registered as the Pygments plugin ``sdql`` (``pyproject.toml``), so that Sphinx, Jupyter
and IPython's ``Code`` highlight ```` ```sdql ```` blocks and the programs ``%%sdql --opt``
shows.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pygments.lexer import RegexLexer, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, Text

#: the grammar's keywords, types and unary operations (``OP`` in the grammar)
KEYWORDS = ("sum", "let", "in", "if", "then", "not", "gradient", "unique", "zero", "onehot")
CONSTANTS = ("true", "false")
TYPES = ("int", "dense_int", "real", "bool", "tensor")
OPERATIONS = ("sin", "cos", "exp", "log", "sqrt", "tanh", "inv")


class SDQLiteLexer(RegexLexer):
    name = "SDQLite"
    aliases: ClassVar[list[str]] = ["sdql", "sdqlite"]
    filenames: ClassVar[list[str]] = ["*.sdql"]

    tokens: ClassVar[dict[str, Any]] = {
        "root": [
            (r"\s+", Text),
            (r"//[^\n]*", Comment.Single),
            (r"/\*", Comment.Multiline, "comment"),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(CONSTANTS, suffix=r"\b"), Keyword.Constant),
            (words(TYPES, suffix=r"\b"), Keyword.Type),
            (words(OPERATIONS, suffix=r"\b"), Name.Builtin),
            (r"[A-Za-z_][A-Za-z0-9_]*'*", Name),
            (r"\d+\.\d*([eE][+-]?\d+)?|\d+[eE][+-]?\d+", Number.Float),
            (r"\d+", Number.Integer),
            (r"->|\*\*|⊗|[+\-*=:@]", Operator),
            (r"[(){}\[\]<>,]", Punctuation),
        ],
        "comment": [
            (r"[^*/]+", Comment.Multiline),
            (r"\*/", Comment.Multiline, "#pop"),
            (r"[*/]", Comment.Multiline),
        ],
    }

"""Syntax (§3, Fig. fig:langs): the AST, types as syntax, the grammar and parser, the
printer, derived forms, names and the unary-operation table.

The ground floor: imports nothing of sdqlite but ``sdqlite.errors``.
"""

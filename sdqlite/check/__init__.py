"""Checking (§3, Fig. fig:langs): the bidirectional type checker, which also types
``gradient e x`` (Fig. fig:api) without expanding it, and the declared-sizes analysis.

May import ``sdqlite.syntax`` (and ``sdqlite.errors``).
"""

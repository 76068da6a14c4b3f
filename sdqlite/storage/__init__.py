"""Storage (§5.3, Fig. fig:storage_spec): the formats table, data laid out in a format,
and storage composition.

May import ``sdqlite.syntax`` (and ``sdqlite.errors``); not the checker, AD or the
optimizer.
"""

"""The front ends: the command line, the REPL and the session state they share.

The top floor: may import everything below, ``codegen``, ``semantics`` and
``paper_examples`` included; nothing imports it but the façade ``sdqlite``.
"""

"""Optimization (§5, Fig. fig:trans, Fig. fig:arch): the rewrite rules and passes
(sparsity propagation, normalization), the generic e-graph engine, STOREL saturation
split by concern, and the pipeline that runs the stages in order.

May import ``sdqlite.storage``, ``sdqlite.ad``, ``sdqlite.check``, ``sdqlite.syntax``;
``egraph`` and ``extract`` import nothing of SDQLite (a generic engine).
"""

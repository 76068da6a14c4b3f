"""Automatic differentiation (§4, §5.1): ANF, forward mode ``D_τ[e]`` (Figs.
fig:diffrules, fig:forward_diffrules) and the ``gradient`` API's expansion (Fig. fig:api).

May import ``sdqlite.check`` and ``sdqlite.syntax``.
"""

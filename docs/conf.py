"""Sphinx configuration of the sdqlite site (``make docs``): MyST-NB executes every
notebook of ``docs/tutorial`` at build time, and a cell that fails fails the build (so
does any warning: ``sphinx-build -W``)."""

from __future__ import annotations

from pathlib import Path

import sdqlite

project = "sdqlite"
author = "the sdqlite developers"
release = sdqlite.__version__
copyright = "2026, the sdqlite developers"

extensions = ["myst_nb", "sphinx.ext.mathjax"]
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
root_doc = "index"

# ---- notebooks: executed at every build, an error stops it ------------------------------
nb_execution_mode = "force"
nb_execution_raise_on_error = True  # (a cell tagged raises-exception shows its error)
nb_execution_timeout = 300
nb_execution_show_tb = True  # a failing build prints the cell's traceback
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# ---- pages -------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"sdqlite {release}"
html_static_path: list[str] = []
pygments_style = "friendly"

# MathJax from Debian's libjs-mathjax, copied into the site, so that the pages render
# their mathematics with no network (make docs installs it); else from its CDN.
MATHJAX = Path("/usr/share/javascript/mathjax")
if (MATHJAX / "MathJax.js").exists():
    html_static_path.append(str(MATHJAX))
    mathjax_path = "MathJax.js?config=TeX-AMS-MML_HTMLorMML"
    # (MyST-NB marks notebook pages tex2jax_ignore and their math "math")
    mathjax2_config = {"tex2jax": {"inlineMath": [["\\(", "\\)"]],
                                   "displayMath": [["\\[", "\\]"]],
                                   "processClass": "math|output_area"}}

"""``python -m sdqlite``: the command line (``sdqlite --help``)."""

import sys

from sdqlite.ui.cli import main

sys.exit(main())

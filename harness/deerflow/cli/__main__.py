"""``python -m deerflow.cli ARGS``: the ``deerflow`` command (as the console script runs it)."""

import sys

from deerflow.cli import main

sys.exit(main())

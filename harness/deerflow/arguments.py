"""Command lines: a malformed one is one line on stderr and status 2, like every other user error.

argparse's own ``error`` prints the whole usage before the message; in a terminal (and in a
script's log) that is a screenful for a typo.  Every ``deerflow`` entry point parses with
:class:`OneLineParser` — the main CLI (its subcommands' parsers are of the same class:
``add_subparsers`` uses the parent's) and the processes started on their own
(``python -m deerflow.subagents.batches.worker_main``).  ``--help`` still shows the usage.

At the bottom of the package layers (it imports nothing of deerflow), so a capability's own
``main`` can use it without importing the CLI above it.
"""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a malformed command line as one line on stderr (status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


__all__ = ["OneLineParser"]

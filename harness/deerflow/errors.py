"""User-facing error kinds shared across the harness.

A :class:`UserError` is a problem with what a person gave us (config, input,
an unknown thread).  Entry points (CLI, server, magics) print its message and
nothing else: no traceback.  Model-visible tool errors live in
:mod:`deerflow.tools.errors`; everything else is a runtime failure.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from a person: one clear message, no traceback."""

    exit_code = 1


class ConfigError(UserError):
    """Invalid configuration.

    Args:
        problem: What is wrong and how to fix it.
        file: The file the bad value came from, if any.
        key: Dotted path of the offending key (``models[0].use``), if known.
    """

    exit_code = 2

    def __init__(self, problem: str, *, file: str | None = None, key: str | None = None) -> None:
        self.problem = problem
        self.file = file
        self.key = key
        where = []
        if file:
            where.append(f"in {file}")
        if key:
            where.append(f"at '{key}'")
        prefix = "config error" + (" " + " ".join(where) if where else "")
        super().__init__(f"{prefix}: {problem}")


class NotFoundError(UserError):
    """An id (thread, run, artifact) that does not exist for this user."""

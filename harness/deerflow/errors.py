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


class BudgetSpent(UserError):
    """The user's daily token budget (``usage.daily_token_budget``) is spent: no new run until 00:00 UTC.

    HTTP 429; in the CLI one line and exit status 4.  Runs already going are never cut.
    """

    exit_code = 4


class Busy(UserError):
    """What was asked for is held by an active run: try again later.

    HTTP 409; in the CLI one line and exit status 75 (``EX_TEMPFAIL``).
    """

    exit_code = 75


class ThreadBusy(Busy):
    """The thread already has an active run, in this process or another one.

    Whoever asks second gets this same answer wherever the first run lives (a
    Jupyter server, the CLI, a notebook's in-process client).

    Args:
        thread_id: The busy thread.
        run_id: The run holding it, if known.
        holder: Where that run executes (``host:pid``), when it is another process.
    """

    def __init__(self, thread_id: str, *, run_id: str | None = None, holder: str | None = None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.holder = holder
        detail = ", ".join(x for x in (f"run {run_id}" if run_id else "", f"in process {holder}" if holder else "") if x)
        super().__init__(f"thread {thread_id} already has an active run{f' ({detail})' if detail else ''}; "
                         "wait for it to finish or cancel it")

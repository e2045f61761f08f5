"""The error kinds of the harness, in one module that imports nothing from ``deerflow``.

Three kinds of error exist (see docs/ARCHITECTURE.md):

* **model** errors — bad tool arguments, a path outside the mounts, a file
  that is not there.  The model caused them and can recover, so they are
  returned to it as a ToolMessage with ``status="error"`` and a short,
  actionable message.  Tools raise :class:`ToolFailure` for these.
* **user** errors — :class:`UserError` and its kinds (:class:`ConfigError`,
  :class:`NotFoundError`, :class:`Busy`/:class:`ThreadBusy`): a problem with
  what a person gave us.  Entry points (CLI, server, magics) print its message
  and nothing else: no traceback.  The server maps each kind to its HTTP status
  in one place (``deerflow_jupyter.handlers.base.error_response``).
* **runtime** failures — bugs and broken infrastructure; logged with context.
  The tool-error middleware turns them into a generic error ToolMessage
  without a traceback so the run can continue.

Every package may import this module (it sits below all of them).
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from a person: one clear message, no traceback.

    ``code`` is set by the kinds that carry a machine-readable reason
    (``conflict``, ``not_found``...); hosts map it to their own answer (HTTP: one
    table in ``deerflow_jupyter.handlers.base``).
    """

    exit_code = 1
    code: str | None = None


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


class Conflict(UserError):
    """The request conflicts with what exists (an id already taken...): HTTP 409."""


class Busy(Conflict):
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


class ToolFailure(Exception):
    """A failure the model should see and can recover from.

    Args:
        message: What went wrong and what to do instead. Never contains host paths.
        code: A stable machine-readable reason (``path_outside_mounts``,
            ``not_found``, ``read_before_write``...).
    """

    def __init__(self, message: str, *, code: str = "tool_error") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def first_line(exc: BaseException, limit: int = 500) -> str:
    """The first line of ``exc``'s message, bounded: what a one-line report shows of a failure."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else ""

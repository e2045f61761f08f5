"""Errors a tool raises for the model to see.

Three kinds of error exist in the harness (see docs/ARCHITECTURE.md):

* **model** errors — bad tool arguments, a path outside the mounts, a file
  that is not there.  The model caused them and can recover, so they are
  returned to it as a ToolMessage with ``status="error"`` and a short,
  actionable message.  Tools raise :class:`ToolFailure` for these.
* **user** errors — bad config or input at a boundary; one clear message.
* **runtime** failures — bugs and broken infrastructure; logged with context.
  The tool-error middleware turns them into a generic error ToolMessage
  without a traceback so the run can continue.
"""

from __future__ import annotations


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

"""The typed events a run produces.

Every consumer — CLI, embedded client, notebook widget, chat persona, HTTP
API — reads the same events, produced by one projection
(:mod:`deerflow.runtime.projection`) from LangGraph's stream.  They are
pydantic models with a ``type`` discriminator, so ``--json`` output and the
SSE ``custom`` channel are just ``event.model_dump_json()``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    thread_id: str
    seq: int = 0
    ts: float = Field(default_factory=time.time)


class RunStarted(_Event):
    type: Literal["run_started"] = "run_started"
    model: str
    offline: bool = False
    notice: str | None = None
    interaction_mode: str = "interactive"


class MessageDelta(_Event):
    """A piece of assistant text as it streams."""

    type: Literal["message_delta"] = "message_delta"
    message_id: str
    text: str


class Message(_Event):
    """A complete assistant message (text part)."""

    type: Literal["message"] = "message"
    message_id: str
    text: str


class ToolCall(_Event):
    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    args: dict[str, Any]


class ToolResult(_Event):
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    status: Literal["success", "error"] = "success"
    code: str | None = None
    text: str


class Clarification(_Event):
    type: Literal["clarification"] = "clarification"
    call_id: str
    request: dict[str, Any]
    text: str


class Artifact(_Event):
    type: Literal["artifact"] = "artifact"
    path: str
    name: str
    mime_type: str | None = None
    size: int | None = None


class Todos(_Event):
    type: Literal["todos"] = "todos"
    todos: list[dict[str, Any]]


class Subagent(_Event):
    type: Literal["subagent"] = "subagent"
    task_id: str
    status: str
    label: str
    detail: dict[str, Any] = Field(default_factory=dict)


class WorkspaceChanges(_Event):
    type: Literal["workspace_changes"] = "workspace_changes"
    changes: dict[str, Any]


class Notice(_Event):
    """Something the user should know that is not an error (audit warnings, skipped servers)."""

    type: Literal["notice"] = "notice"
    kind: str
    text: str
    data: dict[str, Any] = Field(default_factory=dict)


NOTICE_LABELS = {"loop_detected": "Loop detected", "context_summarized": "Context summarized",
                 "incomplete_todos": "Unfinished todos", "subagent_limit": "Subagent limit",
                 "tools_promoted": "Tools promoted", "mcp_task_finished": "MCP task finished",
                 "consent_decision": "Consent", "token_budget": "Token budget",
                 "undelivered": "Not delivered", "partial": "Partly delivered"}
"""Readable labels of notice kinds; a kind not here (``notebook_context``, ``config_reloaded``) has a
text that says what it is, so it is shown alone."""


SHORT_ID_CHARS = 12
"""How many characters of a thread or run id every view shows (notebook, chat, terminal)."""


def short_id(value: str) -> str:
    """A thread or run id as views show it; ``%deerflow`` accepts it back as a unique prefix."""
    return value[:SHORT_ID_CHARS]


def notice_line(notice: Notice) -> str:
    """How a notice reads to a user: ``"Label: text"``, or the text alone (never the raw ``kind``)."""
    label = NOTICE_LABELS.get(notice.kind)
    return f"{label}: {notice.text}" if label else notice.text


RunStatus = Literal["success", "error", "cancelled", "interrupted", "stopped"]

STOPPED_BY = "stopped_by"
"""Key of a ``notice``'s ``data`` naming the guard that ended the run (loop detection...)."""


class RunFinished(_Event):
    """The last event of every run.

    ``status`` is ``interrupted`` when the run ended waiting for a human
    (a clarification), ``stopped`` when a guard ended it (``stopped_by`` names
    the guard, ``error`` says why); ``receipt`` is the delivery receipt when present.
    A run the server's stop ended is ``error`` with an ``error`` starting
    ``interrupted:`` (continue it with ``deerflow run --thread T --continue``).
    ``usage`` is the run's provider-reported token usage
    (:func:`deerflow.runtime.usage.UsageMeter.summary`), None when no model was called.
    """

    type: Literal["run_finished"] = "run_finished"
    status: RunStatus
    text: str = ""
    title: str | None = None
    artifacts: list[str] = Field(default_factory=list)
    receipt: dict[str, Any] | None = None
    error: str | None = None
    stopped_by: str | None = None
    usage: dict[str, Any] | None = None


class Error(_Event):
    type: Literal["error"] = "error"
    kind: Literal["user", "model", "runtime"] = "runtime"
    message: str


Event = Annotated[
    RunStarted | MessageDelta | Message | ToolCall | ToolResult | Clarification | Artifact | Todos
    | Subagent | WorkspaceChanges | Notice | RunFinished | Error,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(data: dict[str, Any] | str | bytes) -> Event:
    """Rebuild an event from its JSON form (what ``--json`` and SSE carry)."""
    if isinstance(data, (str, bytes)):
        return EVENT_ADAPTER.validate_json(data)
    return EVENT_ADAPTER.validate_python(data)

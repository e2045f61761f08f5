"""Request bodies of the API, validated at the boundary.

LangGraph SDK clients send many optional keys we do not use; they are
ignored.  The ones we act on are typed.  Run options
(:class:`~deerflow.run_options.RunOptions`) are checked strictly: an unknown
one is a 422 naming the closest valid option, and the internal-only ones are
refused.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deerflow.config.paths import UnsafeIdError, check_id
from deerflow.errors import UserError
from deerflow.run_options import LANGGRAPH_KEYS, PUBLIC_OPTIONS, RunOptions

STREAM_MODES = frozenset({"values", "messages", "messages-tuple", "updates", "custom"})


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ThreadCreate(_Body):
    thread_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"

    @field_validator("thread_id")
    @classmethod
    def _safe_id(cls, value: str | None) -> str | None:
        """The id names a folder: refused here, in one line, rather than deep in the harness."""
        if value is not None and not is_safe_id(value):
            raise ValueError("a thread id is 1-128 letters, digits, '_', '-', '.', '@' "
                             "(not starting with '.' or '-', no '..')")
        return value


class ThreadSearch(_Body):
    metadata: dict[str, Any] = Field(default_factory=dict)
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    status: str | None = None


class HistoryQuery(_Body):
    limit: int = Field(default=10, ge=1, le=1000)


class AssistantSearch(_Body):
    graph_id: str | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class RunCreate(_Body):
    assistant_id: str
    input: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    stream_mode: str | list[str] = "values"
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None

    @field_validator("stream_mode")
    @classmethod
    def _known_modes(cls, value: str | list[str]) -> str | list[str]:
        modes = [value] if isinstance(value, str) else value
        unknown = sorted(set(modes) - STREAM_MODES)
        if unknown:
            raise ValueError(f"unsupported stream_mode {unknown}; supported: {sorted(STREAM_MODES)}")
        return value

    def modes(self) -> set[str]:
        raw = {self.stream_mode} if isinstance(self.stream_mode, str) else set(self.stream_mode)
        return {"messages" if m == "messages-tuple" else m for m in raw}

    def prompt(self) -> str:
        """The text of the last human message in ``input.messages``."""
        if self.command is not None:
            raise UserError("'command' (resuming LangGraph interrupts) is not supported: "
                            "DeerFlow clarifications are answered with a new run")
        messages = (self.input or {}).get("messages")
        if not isinstance(messages, list) or not messages:
            raise UserError("input.messages must be a non-empty list of messages")
        for message in reversed(messages):
            text = _human_text(message)
            if text is not None:
                return text
        raise UserError("input.messages has no user message")

    def options(self) -> RunOptions:
        """Run options from ``config.configurable`` and ``context``.

        LangGraph's own ``configurable`` keys (``thread_id``...) are left aside;
        anything else must be a public run option.

        Raises:
            UserError: an internal-only option, an unknown one (naming the closest
                public option) or a value of the wrong type.  HTTP 422.
        """
        merged: dict[str, Any] = {}
        for source in ((self.config or {}).get("configurable") or {}, self.context or {}):
            if not isinstance(source, dict):
                raise UserError("config.configurable and context must be objects")
            merged.update({k: v for k, v in source.items() if k not in LANGGRAPH_KEYS})
        limit = (self.config or {}).get("recursion_limit")
        if isinstance(limit, int) and 1 <= limit <= 10_000:
            merged["recursion_limit"] = limit
        return RunOptions.parse(merged, allowed=PUBLIC_OPTIONS)


def is_safe_id(value: str) -> bool:
    """Whether ``value`` is usable as a thread (or user) id: one safe path component."""
    try:
        check_id(value, kind="thread")
    except UnsafeIdError:
        return False
    return True


def _human_text(message: Any) -> str | None:
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return None
    if message.get("role", message.get("type")) not in {"user", "human"}:
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return None

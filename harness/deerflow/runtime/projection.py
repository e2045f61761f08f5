"""From LangGraph stream chunks to typed events — the one projection.

A run is streamed with ``stream_mode=["messages", "updates", "custom"]``.
:class:`Projector` turns each ``(mode, chunk)`` pair into zero or more
:mod:`~deerflow.runtime.events`; it numbers them (``seq``) and remembers
what it already reported (artifacts, title) so every event appears once.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from pydantic import ValidationError

from deerflow.runtime import events as ev

# Nodes whose streamed tokens are the lead agent talking to the user.
_SPEAKING_NODES = {"model"}


def message_text(message: BaseMessage) -> str:
    """The plain text of a message (text blocks joined; other blocks ignored)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = [b.get("text", "") if isinstance(b, dict) else str(b) for b in content
             if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")]
    return "".join(parts)


class Projector:
    """Stateful projection of one run's stream."""

    def __init__(self, *, run_id: str, thread_id: str) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.seq = 0
        self.last_text = ""
        self.title: str | None = None
        self.artifacts: list[str] = []
        self.clarification: ev.Clarification | None = None

    def make(self, cls: type[ev._Event], **fields: Any) -> Any:
        """Build an event of ``cls`` stamped with this run's ids and the next seq."""
        self.seq += 1
        return cls(run_id=self.run_id, thread_id=self.thread_id, seq=self.seq, **fields)

    def feed(self, mode: str, chunk: Any) -> list[Any]:
        if mode == "messages":
            return self._on_token(*chunk)
        if mode == "updates":
            return list(self._on_updates(chunk))
        if mode == "custom":
            return self._on_custom(chunk)
        return []

    def _on_token(self, message: Any, metadata: dict[str, Any]) -> list[Any]:
        if not isinstance(message, AIMessageChunk) or metadata.get("langgraph_node") not in _SPEAKING_NODES:
            return []
        text = message_text(message)
        if not text:
            return []
        return [self.make(ev.MessageDelta, message_id=message.id or "", text=text)]

    def _on_updates(self, chunk: Any) -> Iterable[Any]:
        if not isinstance(chunk, dict):
            return
        for update in chunk.values():
            for item in update if isinstance(update, list) else [update]:
                if isinstance(item, dict):
                    yield from self._on_state_update(item)

    def _on_state_update(self, update: dict[str, Any]) -> Iterable[Any]:
        messages = update.get("messages") or []
        for message in messages if isinstance(messages, list) else [messages]:
            if isinstance(message, AIMessage):
                yield from self._on_ai_message(message)
            elif isinstance(message, ToolMessage):
                yield from self._on_tool_message(message)
        for path in update.get("artifacts") or []:
            if isinstance(path, str) and path not in self.artifacts:
                self.artifacts.append(path)
                yield self.make(ev.Artifact, path=path, name=path.rsplit("/", 1)[-1],
                                mime_type=mimetypes.guess_type(path)[0])
        if update.get("todos") is not None:
            yield self.make(ev.Todos, todos=[dict(t) for t in update["todos"]])
        if update.get("title") and update["title"] != self.title:
            self.title = update["title"]

    def _on_ai_message(self, message: AIMessage) -> Iterable[Any]:
        text = message_text(message)
        if text:
            self.last_text = text
            yield self.make(ev.Message, message_id=message.id or "", text=text)
        for call in message.tool_calls:
            yield self.make(ev.ToolCall, call_id=call["id"] or "", name=call["name"], args=call["args"])

    def _on_tool_message(self, message: ToolMessage) -> Iterable[Any]:
        artifact = message.artifact if isinstance(message.artifact, dict) else {}
        yield self.make(ev.ToolResult, call_id=message.tool_call_id, name=message.name or "",
                        status=message.status, code=artifact.get("code"), text=message_text(message))
        request = artifact.get("human_input")
        if isinstance(request, dict):
            self.clarification = self.make(ev.Clarification, call_id=message.tool_call_id,
                                           request=request, text=message_text(message))
            yield self.clarification

    def _on_custom(self, chunk: Any) -> list[Any]:
        """Tools and middlewares emit ``{"type": <event type>, ...}`` through the stream writer."""
        if not isinstance(chunk, dict) or "type" not in chunk:
            return []
        data = {k: v for k, v in chunk.items() if k not in {"run_id", "thread_id", "seq", "ts"}}
        try:
            event = ev.EVENT_ADAPTER.validate_python({**data, "run_id": self.run_id, "thread_id": self.thread_id})
        except ValidationError:
            return [self.make(ev.Notice, kind=str(chunk.get("type")), text=str(chunk.get("text", "")),
                              data={k: v for k, v in data.items() if k != "type"})]
        self.seq += 1
        event.seq = self.seq
        return [event]

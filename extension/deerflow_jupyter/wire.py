"""The LangGraph Platform wire format, for the subset of the API we serve.

Threads, thread states, runs and assistants are plain JSON objects shaped as
the official ``langgraph-sdk`` client expects; stream frames become SSE
events (``metadata``, ``values``, ``messages``, ``updates``, ``custom``,
``error``, ``end``).  DeerFlow's own typed events travel in ``custom``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from deerflow.persistence.store import RunRecord, ThreadRecord

ASSISTANT_ID = "lead_agent"
_EPOCH_ISO = "1970-01-01T00:00:00+00:00"

# LangGraph run statuses; DeerFlow's precise status is kept in metadata (``stopped``: a guard
# such as loop detection ended the run, named by ``metadata.stopped_by``).
_RUN_STATUS = {"running": "running", "pending": "pending", "success": "success",
               "interrupted": "success", "cancelled": "interrupted", "error": "error", "stopped": "error"}


def iso(ts: float | None) -> str:
    if ts is None:
        return _EPOCH_ISO
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).isoformat()


def to_jsonable(value: Any) -> Any:
    """JSON-ready form of state values, messages, updates and events."""
    if isinstance(value, BaseMessage):
        return value.model_dump(mode="json")
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def dumps(value: Any) -> str:
    return json.dumps(to_jsonable(value), ensure_ascii=False)


def assistant() -> dict[str, Any]:
    return {
        "assistant_id": ASSISTANT_ID, "graph_id": ASSISTANT_ID, "name": "DeerFlow lead agent",
        "description": "DeerFlow's lead agent: research, data analysis, files, code, skills.",
        "config": {}, "context": {}, "metadata": {"created_by": "system"}, "version": 1,
        "created_at": _EPOCH_ISO, "updated_at": _EPOCH_ISO,
    }


def thread(record: ThreadRecord, *, status: str = "idle", values: dict[str, Any] | None = None) -> dict[str, Any]:
    metadata = dict(record.metadata)
    if record.title:
        metadata.setdefault("title", record.title)
    return {
        "thread_id": record.thread_id, "created_at": iso(record.created_at), "updated_at": iso(record.updated_at),
        "metadata": metadata, "status": status, "values": to_jsonable(values or {}), "interrupts": {},
    }


def thread_state(snapshot: Any, thread_id: str) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` as the API's ThreadState."""
    if snapshot is None:
        return {"values": {}, "next": [], "tasks": [], "checkpoint": None, "metadata": {},
                "created_at": None, "parent_checkpoint": None, "interrupts": []}
    return {
        "values": to_jsonable(snapshot.values),
        "next": list(snapshot.next),
        "tasks": [],
        "checkpoint": _checkpoint(snapshot.config, thread_id),
        "metadata": to_jsonable(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": _checkpoint(snapshot.parent_config, thread_id),
        "interrupts": [],
    }


def _checkpoint(config: Any, thread_id: str) -> dict[str, Any] | None:
    if not config:
        return None
    conf = config.get("configurable", {})
    return {"thread_id": thread_id, "checkpoint_ns": conf.get("checkpoint_ns", ""),
            "checkpoint_id": conf.get("checkpoint_id")}


def run(record: RunRecord) -> dict[str, Any]:
    metadata = {"deerflow_status": record.status}
    if record.error:
        metadata["error"] = record.error
    if record.status == "stopped":
        metadata["stopped_by"] = record.result.get("stopped_by") or "guard"
    return {
        "run_id": record.run_id, "thread_id": record.thread_id, "assistant_id": ASSISTANT_ID,
        "created_at": iso(record.created_at), "updated_at": iso(record.updated_at),
        "status": _RUN_STATUS.get(record.status, record.status), "metadata": metadata,
        "multitask_strategy": "reject", "kwargs": {},
    }


def sse(event: str, data: Any, *, event_id: int | None = None) -> bytes:
    """One SSE message; ``data`` is JSON-encoded."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {dumps(data)}\n\n".encode()


def frame_to_sse(kind: str, data: Any, *, event_id: int) -> bytes | None:
    """A run frame as an SSE message in LangGraph's format (None if not forwarded)."""
    if kind == "event":
        return sse("custom", data, event_id=event_id)
    if kind == "values":
        return sse("values", data, event_id=event_id)
    if kind == "messages":
        message, metadata = data
        meta = {k: v for k, v in metadata.items() if isinstance(v, (str, int, float, bool, type(None)))}
        return sse("messages", [message, meta], event_id=event_id)
    if kind == "updates":
        return sse("updates", data, event_id=event_id)
    return None

"""What the embedded client returns: a finished run's result, a thread's record and state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from deerflow.persistence.store import ThreadRecord
from deerflow.runtime import events as ev


@dataclass
class RunResult:
    """What a finished run produced."""

    run_id: str
    thread_id: str
    status: str
    text: str
    artifacts: list[str]
    events: list[ev.Event] = field(default_factory=list)
    receipt: dict[str, Any] | None = None
    error: str | None = None
    clarification: dict[str, Any] | None = None

    @classmethod
    def from_events(cls, events: list[ev.Event]) -> Self:
        finished = next(e for e in reversed(events) if isinstance(e, ev.RunFinished))
        clar = next((e.request for e in events if isinstance(e, ev.Clarification)), None)
        return cls(finished.run_id, finished.thread_id, finished.status, finished.text, list(finished.artifacts),
                   events, finished.receipt, finished.error, clar)

    @property
    def stopped_by(self) -> str | None:
        """The guard that ended the run (status ``stopped``), e.g. ``loop_detection``."""
        finished = next((e for e in reversed(self.events) if isinstance(e, ev.RunFinished)), None)
        return finished.stopped_by if finished is not None else None

    @property
    def usage(self) -> dict[str, Any] | None:
        """The run's provider-reported token usage (totals, ``by_model``, ``by_source``); None without model calls."""
        finished = next((e for e in reversed(self.events) if isinstance(e, ev.RunFinished)), None)
        return finished.usage if finished is not None else None

    @property
    def notices(self) -> list[ev.Notice]:
        """The run's ``notice`` events (loop detected, unfinished todos, summarization...)."""
        return [e for e in self.events if isinstance(e, ev.Notice)]


@dataclass
class ThreadView:
    """A thread's record and its current state."""

    record: ThreadRecord
    values: dict[str, Any]

    @property
    def messages(self) -> list[Any]:
        return list(self.values.get("messages", []))

    @property
    def artifacts(self) -> list[str]:
        return list(self.values.get("artifacts", []))

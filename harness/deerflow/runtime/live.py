"""A run in progress: its record, its growing event log, and its subscribers.

Events are appended to an in-memory list; any number of readers iterate over
it from any position (``after=seq``), waiting on a condition for more.  That
one mechanism serves streaming, joining a run late and SSE resumption.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from deerflow.persistence.store import RunRecord
from deerflow.runtime import events as ev


@dataclass
class LiveRun:
    record: RunRecord
    events: list[Any] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    finished: ev.RunFinished | None = None
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def done(self) -> bool:
        return self.finished is not None

    async def publish(self, event: Any) -> None:
        async with self._changed:
            self.events.append(event)
            if isinstance(event, ev.RunFinished):
                self.finished = event
            self._changed.notify_all()

    async def stream(self, *, after: int = 0) -> AsyncIterator[Any]:
        """Yield events with ``seq > after`` until the run finishes."""
        index = 0
        while True:
            async with self._changed:
                await self._changed.wait_for(partial(self._has_more, index))
                batch = self.events[index:]
            index += len(batch)
            for event in batch:
                if event.seq > after:
                    yield event
            if self.done and index >= len(self.events):
                return

    def _has_more(self, index: int) -> bool:
        return len(self.events) > index or self.done

    async def wait(self) -> ev.RunFinished:
        async with self._changed:
            await self._changed.wait_for(lambda: self.done)
        assert self.finished is not None
        return self.finished

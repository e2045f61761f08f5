"""A run in progress: its record, its growing frame log, and its subscribers.

A run produces *frames*: typed DeerFlow events (kind ``event``) and, for the
LangGraph-compatible HTTP API, the raw LangGraph stream chunks (kinds
``values``, ``messages``, ``updates``).  Frames are appended to one in-memory
list; any number of readers iterate over it from any position, waiting on a
condition for more.  That one mechanism serves streaming, joining a run late
and SSE resumption (the frame index is the SSE event id).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from deerflow.persistence.store import RunRecord
from deerflow.runtime import events as ev

RAW_KINDS = ("values", "messages", "updates")
DROPPED = "dropped"
"""Kind of a raw frame whose data a finished run let go (see :meth:`LiveRun.drop_raw_frames`)."""


@dataclass
class LiveRun:
    record: RunRecord
    frames: list[tuple[str, Any]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    finished: ev.RunFinished | None = None
    raw_dropped: bool = False
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _ended: asyncio.Event = field(default_factory=asyncio.Event)  # what wait() waits on: set once, at the end
    _readers: int = 0  # streams attached now: a finished run keeps its raw chunks until they have read them
    _release_raw: bool = False

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def done(self) -> bool:
        return self.finished is not None

    @property
    def events(self) -> list[ev.Event]:
        """The typed events so far."""
        return [data for kind, data in self.frames if kind == "event"]

    async def publish(self, event: ev.Event) -> None:
        """Append a typed event (``run_finished`` marks the run done)."""
        await self._append("event", event)

    async def publish_raw(self, mode: str, chunk: Any) -> None:
        """Append a raw LangGraph chunk of a kind the HTTP API forwards."""
        if mode in RAW_KINDS:
            await self._append(mode, chunk)

    async def _append(self, kind: str, data: Any) -> None:
        self.frames.append((kind, data))
        if isinstance(data, ev.RunFinished):
            self.finished = data
            self._ended.set()
        if self._readers:  # a stream is attached and may be waiting: wake it (no stream, no lock to take)
            async with self._changed:
                self._changed.notify_all()

    async def stream_frames(
        self, *, after: int = -1, heartbeat: float | None = None
    ) -> AsyncIterator[tuple[int, str, Any]]:
        """Yield ``(index, kind, data)`` for frames with ``index > after`` until the run finishes.

        With ``heartbeat``, a ``(-1, "heartbeat", None)`` frame is yielded whenever that
        many seconds pass without a frame (SSE servers turn it into a keep-alive comment).
        """
        index = max(after + 1, 0)
        self._readers += 1
        try:
            while True:
                async with self._changed:
                    try:
                        async with asyncio.timeout(heartbeat):
                            await self._changed.wait_for(partial(self._has_more, index))
                    except TimeoutError:
                        batch = None
                    else:
                        batch = self.frames[index:]
                if batch is None:
                    yield -1, "heartbeat", None
                    continue
                for offset, (kind, data) in enumerate(batch):
                    yield index + offset, kind, data
                index += len(batch)
                if self.done and index >= len(self.frames):
                    return
        finally:
            self._readers -= 1
            if self._release_raw and self._readers == 0:
                self.drop_raw_frames()

    async def stream(self, *, after: int = 0) -> AsyncGenerator[ev.Event, None]:
        """Yield typed events with ``seq > after`` until the run finishes."""
        async for _, kind, data in self.stream_frames():
            if kind == "event" and data.seq > after:
                yield data

    def release_raw_frames(self) -> None:
        """Drop the raw chunks of this finished run now, or when its last attached stream has read them.

        A stream attached during the run may still be behind the run (a slow SSE client):
        it gets every frame; a stream that joins after the release gets the typed events.
        """
        self._release_raw = True
        if self._readers == 0:
            self.drop_raw_frames()

    def drop_raw_frames(self) -> int:
        """Let go of the raw LangGraph chunks of a finished run; the number dropped.

        ``values`` chunks are whole copies of the thread state (its whole history,
        once per step): a finished run kept for joining must not hold them.  The
        typed events stay, and each raw frame keeps its index (the SSE event id)
        as a ``dropped`` frame that readers skip; the state itself stays readable
        from the checkpointer.
        """
        if not self.done or self.raw_dropped:
            return 0
        self.raw_dropped = True
        dropped = 0
        for index, (kind, _) in enumerate(self.frames):
            if kind in RAW_KINDS:
                self.frames[index] = (DROPPED, None)
                dropped += 1
        return dropped

    def _has_more(self, index: int) -> bool:
        return len(self.frames) > index or self.done

    async def wait(self) -> ev.RunFinished:
        """The run's ``run_finished`` event, once it is published.

        Waits on its own event, not on the frames' condition: a caller that wants only the end
        (``?wait``, the scheduler) is not woken for each of the run's frames (several per step).
        """
        await self._ended.wait()
        assert self.finished is not None
        return self.finished

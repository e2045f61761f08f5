"""The one narrow bridge from a subagent back to its parent run's journal.

A subagent runs on the subagent controller's event loop, isolated from the
parent run: it never sees the parent's stream writer (the run journal that
becomes the run's events) or anything behind it.  Three kinds of records
still matter to the person watching the parent run, so they cross over
through :class:`ParentLoopRecorder`, under separate keys:

* ``loop_detection`` — the child repeated itself (warned or stopped);
* ``tool_promotion`` — the child promoted deferred tool schemas; an
  execution-local atomic claim reports each tool name once even when
  parallel searches promote it at the same time;
* ``tool_progress`` — a tool call started or ended (receipt, usage so far).

The child side calls :meth:`ParentLoopRecorder.record_middleware` from any
thread; it only *schedules* delivery onto the loop that owns the journal
(``call_soon_threadsafe``), where the sink runs in the parent's context (a
copy taken when the recorder was made inside the ``task`` call: LangGraph's
stream writer finds its run through context variables).  Before ``task`` returns it
awaits :meth:`drain`, which fences the recorder (later records are dropped
and logged) and waits until every scheduled delivery has run, so the
parent's events for a subagent always precede its final result.

Durable batch items have no parent run journal and do not use a recorder.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

logger = logging.getLogger(__name__)

RecordKey = Literal["loop_detection", "tool_promotion", "tool_progress"]
RECORD_KEYS: frozenset[str] = frozenset({"loop_detection", "tool_promotion", "tool_progress"})
Sink = Callable[[str, dict[str, Any]], None]


class ParentLoopRecorder:
    """Schedules a child's middleware records onto the parent's loop.

    Args:
        loop: The loop that owns the parent's journal (the running loop of the
            ``task`` call).  ``None`` for a synchronous parent: records are then
            delivered inline, under the recorder's lock.
        sink: Writes one record to the journal; called only on ``loop``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None, sink: Sink) -> None:
        self._loop = loop
        self._sink = sink
        self._context = contextvars.copy_context()
        self._lock = threading.Lock()
        self._pending = 0
        self._fenced = False
        self._promoted: set[str] = set()
        self._waiter: asyncio.Future[None] | None = None

    def record_middleware(self, key: str, payload: Mapping[str, Any]) -> bool:
        """Schedule one record for the parent's journal (any thread); False if dropped.

        ``key`` is one of :data:`RecordKey` (checked: the child side passes a string)."""
        if key not in RECORD_KEYS:
            raise ValueError(f"unknown record key {key!r}; use one of {sorted(RECORD_KEYS)}")
        data = dict(payload)
        with self._lock:
            if self._fenced:
                logger.info("subagent record %s arrived after its task returned; dropped", key)
                return False
            if key == "tool_promotion":
                data["names"] = self._claim(data.get("names") or [])
                if not data["names"]:
                    return False
            if self._loop is None:
                self._context.run(self._deliver, key, data)
                return True
            self._pending += 1
        self._loop.call_soon_threadsafe(self._on_loop, key, data, context=self._context)
        return True

    def _claim(self, names: Iterable[Any]) -> list[str]:
        """Atomically claim promotions not reported yet (called under the lock)."""
        fresh = [str(n) for n in names if str(n) not in self._promoted]
        self._promoted.update(fresh)
        return list(dict.fromkeys(fresh))

    def _on_loop(self, key: str, data: dict[str, Any]) -> None:
        try:
            self._deliver(key, data)
        finally:
            with self._lock:
                self._pending -= 1
                idle = self._pending == 0
            if idle and self._waiter is not None and not self._waiter.done():
                self._waiter.set_result(None)

    def _deliver(self, key: str, data: dict[str, Any]) -> None:
        try:
            self._sink(key, data)
        except (RuntimeError, ValueError, TypeError) as exc:  # a journal that refuses a record loses it, not the task
            logger.warning("could not journal a subagent %s record: %s", key, exc)

    async def drain(self) -> None:
        """Fence the recorder and wait until every scheduled record is journaled (on the parent loop)."""
        with self._lock:
            self._fenced = True
            if self._pending == 0 or self._loop is None:
                return
            # Deliveries and this check both run on the parent loop, so none can slip in between.
            self._waiter = self._loop.create_future()
        await self._waiter

    def fence(self) -> None:
        """Stop accepting records (synchronous parents have nothing to wait for)."""
        with self._lock:
            self._fenced = True

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending


__all__ = ["RECORD_KEYS", "ParentLoopRecorder", "RecordKey"]

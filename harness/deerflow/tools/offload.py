"""Blocking tool work off the event loop, with a deadline and a per-thread bound.

A tool call can block on anything the model points it at: a FIFO that never
gets a writer, a huge directory walk, a command that ignores its timeout.  In
the Jupyter server all runs share one event loop, so such work must never run
on it; and it must not run on the loop's *default* executor either, which has
``min(32, cpus + 4)`` workers that ``asyncio.to_thread`` and LangChain's
sync-tool path share: eight hung calls from one thread would take every worker
and stall every other thread's run.

:class:`Offloader` therefore runs each call on its own daemon thread and:

* waits for it at most ``deadline`` seconds, then returns control with a
  model-facing :class:`ToolFailure` (``code="tool_timeout"``) — Python cannot
  kill a thread, so the call is *abandoned*, not stopped;
* counts calls per key (the conversation thread id) until their thread really
  ends, abandoned ones included, and refuses a call once ``per_key`` are in
  flight (``code="tool_busy"``): a thread can wedge only its own tools;
* refuses every call once ``total`` threads are in flight, so the process
  cannot be driven out of threads either.

A thread whose call ended waits a while (``IDLE_SECONDS``) for the next call
instead of ending, at most ``IDLE_THREADS`` of them: starting an OS thread is a
context switch and a wait, paid twice per run (the workspace snapshots) and on
every file tool call.  An abandoned call keeps its thread (it is never idle), so
a hung call still cannot take a worker another call needs.

Both entry points exist because tools run under ``agent.invoke`` (the sync
path, on a LangGraph worker thread) and ``agent.ainvoke`` (on the loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import queue
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from deerflow.errors import ToolFailure

__all__ = ["OFFLOADER", "Offloader"]

T = TypeVar("T")

PER_KEY_LIMIT = 4
TOTAL_LIMIT = 256
IDLE_THREADS = 8
"""Threads kept waiting for the next call once theirs ended."""
IDLE_SECONDS = 30.0
"""How long an idle thread waits for a next call before it ends."""

Job = Callable[[], None]


class Offloader:
    """Runs blocking calls on bounded daemon threads; see the module docstring.

    Args:
        per_key: Calls one key (conversation thread) may have in flight.
        total: Calls the whole process may have in flight.
    """

    def __init__(self, *, per_key: int = PER_KEY_LIMIT, total: int = TOTAL_LIMIT) -> None:
        self.per_key = per_key
        self.total = total
        self._lock = threading.Lock()
        self._in_flight: Counter[str] = Counter()
        self._idle: list[queue.SimpleQueue[Job]] = []  # the inboxes of threads waiting for a call

    def in_flight(self, key: str | None = None) -> int:
        """Calls whose thread has not ended yet (for ``key``, or in all)."""
        with self._lock:
            return self._in_flight[key] if key is not None else sum(self._in_flight.values())

    def _acquire(self, key: str, what: str) -> None:
        with self._lock:
            if self._in_flight[key] >= self.per_key:
                raise ToolFailure(
                    f"{what} was not started: {self._in_flight[key]} earlier operations of this "
                    "conversation have not ended yet (still running, or stuck after timing "
                    "out). Wait for them, avoid paths or commands that hang, and try again.",
                    code="tool_busy",
                )
            if sum(self._in_flight.values()) >= self.total:
                raise ToolFailure(
                    f"{what} was not started: the server is busy. Try again in a minute.",
                    code="tool_busy",
                )
            self._in_flight[key] += 1

    def _release(self, key: str) -> None:
        with self._lock:
            self._in_flight[key] -= 1
            if self._in_flight[key] <= 0:
                del self._in_flight[key]

    def _start(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], *, key: str, what: str
    ) -> concurrent.futures.Future[T]:
        self._acquire(key, what)
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        context = contextvars.copy_context()  # callbacks and stream writers live in contextvars

        def work() -> None:
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(context.run(fn, *args, **kwargs))
                    except BaseException as exc:  # noqa: BLE001 - handed to the waiter, who re-raises it
                        future.set_exception(exc)
            finally:
                self._release(key)

        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is not None:  # a thread is waiting: no new thread to start
            inbox.put(work)
            return future
        try:
            threading.Thread(target=self._serve, args=(work,), name="deerflow-offload", daemon=True).start()
        except BaseException:
            self._release(key)
            raise
        return future

    def _serve(self, job: Job) -> None:
        """Run ``job``, then the calls handed to this thread while it waits idle; end when none comes."""
        inbox: queue.SimpleQueue[Job] = queue.SimpleQueue()
        while True:
            job()
            with self._lock:
                if len(self._idle) >= IDLE_THREADS:
                    return
                self._idle.append(inbox)
            try:
                job = inbox.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:  # nobody picked this thread: end it
                        self._idle.remove(inbox)
                        return
                job = inbox.get()  # picked just as the wait ended: its call is on the way

    def run(
        self, fn: Callable[..., T], *args: Any, key: str, what: str, deadline: float, **kwargs: Any
    ) -> T:
        """``fn(*args, **kwargs)`` on a bounded thread; wait at most ``deadline`` seconds.

        Raises:
            ToolFailure: ``tool_timeout`` past the deadline, ``tool_busy`` when
                ``key`` or the process has too many calls in flight; whatever
                ``fn`` raises otherwise.
        """
        future = self._start(fn, args, kwargs, key=key, what=what)
        try:
            return future.result(timeout=deadline)
        except concurrent.futures.TimeoutError:
            if future.done():  # raised by fn itself (a socket's, a lock's timeout): its own answer
                raise
            future.cancel()
            raise _timed_out(what, deadline) from None

    async def arun(
        self, fn: Callable[..., T], *args: Any, key: str, what: str, deadline: float, **kwargs: Any
    ) -> T:
        """:meth:`run` for the event loop: the loop only awaits, never blocks."""
        future = self._start(fn, args, kwargs, key=key, what=what)
        scope = asyncio.timeout(deadline)
        try:
            async with scope:
                return await asyncio.wrap_future(future)
        except TimeoutError:
            if not scope.expired():  # raised by fn itself: its own answer
                raise
            raise _timed_out(what, deadline) from None


def _timed_out(what: str, deadline: float) -> ToolFailure:
    return ToolFailure(
        f"{what} did not finish within {deadline:g}s and was abandoned. It may be waiting on "
        "something that never answers (a FIFO, a device, a huge tree); narrow it down or "
        "avoid that path.",
        code="tool_timeout",
    )


OFFLOADER = Offloader()
"""The process's offloader: one set of bounds for every tool call in it."""

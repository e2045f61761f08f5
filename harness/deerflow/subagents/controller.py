"""The execution controller: where subagents run, isolated from their parent run.

A subagent must not run *inside* its parent's ``task`` call on the parent's
loop: LangGraph and LangChain carry the caller's run configuration in
context variables, so a nested graph would stream its tokens and state into
the parent run, and a blocking step in the child would stall the parent.
:class:`SubagentController` owns one event loop on a daemon thread; every
child graph runs there as its own task (a fresh context), and the parent
awaits a future for it.

The controller is an object owned by its host (the run manager, a batch
worker, or the caller of ``create_deerflow_agent``) and closed by it; there
is no module-level instance.  Cancelling a submitted future cancels the
child's task on the controller loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
_CLOSE_TIMEOUT_S = 10.0


class ControllerClosedError(RuntimeError):
    """A subagent was submitted to a controller that has been closed."""


class SubagentController:
    """Runs subagent coroutines on a private event loop thread.

    Args:
        name: Thread name, for debugging.
    """

    def __init__(self, *, name: str = "deerflow-subagents") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._futures: set[concurrent.futures.Future[Any]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        """Start the loop thread on first use (a host that never delegates pays nothing)."""
        with self._lock:
            if self._closed:
                raise ControllerClosedError("the subagent controller is closed")
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name=self._name, daemon=True)
                self._thread.start()
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the controller loop; cancelling the future cancels it there.

        Raises:
            ControllerClosedError: after :meth:`close`.
        """
        try:
            loop = self._ensure_loop()
        except ControllerClosedError:
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(self._isolated(coro), loop)
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._futures.discard(future)

    async def _isolated(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` in an empty context, as a task this controller tracks.

        ``call_soon_threadsafe`` copies the *submitting* thread's context, which
        holds the parent run's LangGraph config (checkpointer, callbacks, stream);
        a child started in it would write into the parent run.  The inner task
        starts from nothing; cancelling the outer one cancels it.
        """
        task = asyncio.create_task(coro, context=contextvars.Context())
        with self._lock:
            self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return await task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._tasks.discard(task)

    @property
    def active(self) -> int:
        """Subagents still running on the controller loop (a cancelled one counts until it has stopped)."""
        with self._lock:
            return len(self._tasks)

    def close(self) -> None:
        """Cancel every running subagent and stop the loop (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread, futures = self._loop, self._thread, list(self._futures)
        for future in futures:
            future.cancel()
        if loop is None or thread is None:
            return
        stopper = asyncio.run_coroutine_threadsafe(_cancel_all(), loop)
        try:
            stopper.result(timeout=_CLOSE_TIMEOUT_S)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            logger.warning("subagents did not stop within %.0fs of shutdown", _CLOSE_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=_CLOSE_TIMEOUT_S)
        if not thread.is_alive():
            loop.close()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the caller's loop."""
        await asyncio.to_thread(self.close)


async def _cancel_all() -> None:
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["ControllerClosedError", "SubagentController"]

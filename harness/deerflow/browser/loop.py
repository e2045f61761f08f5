"""A private event loop on its own thread, for objects bound to one loop.

Playwright's async objects (browser, contexts, pages) belong to the loop that
created them.  Runs, however, arrive on whatever loop the host has: the
Jupyter server's, the embedded client's private thread, a test's
``asyncio.run``, or none at all for a synchronous ``invoke``.  So the session
manager owns one :class:`LoopThread` and runs every Playwright call there;
callers await it from any loop (:meth:`LoopThread.arun`) or block on it from
a plain thread (:meth:`LoopThread.run`).  A browser session therefore
outlives the run, and the loop, that created it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running forever on a daemon thread until :meth:`stop`.

    Args:
        name: Thread name (shows up in thread dumps).
    """

    def __init__(self, name: str = "deerflow-browser") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def in_loop(self) -> bool:
        """Whether the caller is running on this loop's thread."""
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; the returned future is thread-safe."""
        if not self.running:
            coro.close()
            raise RuntimeError("the browser loop is stopped")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block the calling (non-loop) thread for its result."""
        if self.in_loop():
            coro.close()
            raise RuntimeError("LoopThread.run called from its own loop; await the coroutine instead")
        return self.submit(coro).result(timeout)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` from any event loop; cancelling the caller cancels it on the loop."""
        if self.in_loop():
            return await coro
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop the loop and join the thread; pending tasks are cancelled first."""
        if not self.running:
            return
        self.run(_cancel_others())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


async def _cancel_others() -> None:
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

"""Blocking file work from async code: threads of its own, and a deadline.

A request that lists the skills, reads an agent's files or the MCP config, or a
run's start that reads a named agent's profile, does blocking file work.
``asyncio.to_thread`` keeps the event loop free but waits forever, on the loop's
*default* executor, whose ``min(32, cpus + 4)`` workers everything else shares:
a skills folder on a stalled NFS mount, a huge directory or a held lock would
hold the request forever and, a few requests later, every default worker.  So
async code awaits :func:`off_loop` instead::

    listing = await off_loop(library.listing, user_id, what="listing the skills")

* The call runs on a thread of :data:`OFF_LOOP`'s own pool (daemon threads, at
  most ``workers + max_stuck``), never the loop's default executor.
* It is awaited for at most ``deadline`` seconds (:data:`DEADLINE_SECONDS`,
  queueing included), then :class:`DiskUnavailable` is raised: a
  :class:`~deerflow.persistence.aio.StoreUnavailable`, so every entry point
  already answers it as HTTP 503 with a one-line "try again shortly".
* Python cannot kill a thread, so a call past its deadline is *abandoned*: it
  keeps its thread until it ends, and whatever it does then happens as it would
  have (the writes behind these calls replace whole files).  At most
  ``max_stuck`` abandoned calls may hold threads; past that every new call is
  refused at once with the same 503 until one ends.  A stuck disk can take
  ``workers + max_stuck`` threads and no more, and while fewer calls are stuck,
  ``workers`` threads stay for the calls that do end.

The metadata stores have their own executor with the same rules
(:mod:`deerflow.persistence.aio`); a tool's blocking work has the offloader
(:mod:`deerflow.tools.offload`), whose refusals are worded for the model.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from deerflow.persistence.aio import StoreUnavailable

__all__ = ["DEADLINE_SECONDS", "OFF_LOOP", "DiskUnavailable", "OffLoop", "off_loop"]

T = TypeVar("T")

DEADLINE_SECONDS = 30.0
"""How long a call may take, queueing included, before the caller gets "try again shortly"."""
WORKERS = 8
"""Threads kept for calls that end, whatever number of abandoned ones hold theirs."""
MAX_STUCK = 8
"""Abandoned calls (past their deadline, still running) allowed before new calls are refused."""
PROBLEM = "a hung disk or mount, a very large folder or a held lock"

_Job = tuple[concurrent.futures.Future[Any], Callable[[], Any]]


class DiskUnavailable(StoreUnavailable):
    """Blocking file work did not finish in time, or too many earlier calls are stuck: try again shortly.

    A :class:`StoreUnavailable` (so a :class:`~deerflow.persistence.sqlite.StorageError`):
    HTTP 503 with this one line, exit status 75 in the CLI.  It names no host path (and has
    no ``path``): ``what`` says what was being done ("listing the skills").
    """

    def __init__(self, what: str, problem: str) -> None:
        self.what = what
        self.problem = problem
        Exception.__init__(self, f"{what} {problem}; try again shortly")


class OffLoop:
    """A small pool of daemon threads for blocking calls from async code; see the module docstring.

    Args:
        deadline: Default seconds a call may take, queueing included.
        workers: Threads kept for calls that end.
        max_stuck: Abandoned calls allowed to hold threads before new calls are refused.
    """

    def __init__(self, *, deadline: float = DEADLINE_SECONDS, workers: int = WORKERS,
                 max_stuck: int = MAX_STUCK) -> None:
        if workers < 1 or max_stuck < 1:
            raise ValueError("an OffLoop needs at least one worker and one abandoned call allowed")
        self.deadline = deadline
        self.workers = workers
        self.max_stuck = max_stuck
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._threads = 0
        self._idle = 0  # threads waiting for a job
        self._stuck = 0

    def stuck(self) -> int:
        """Abandoned calls whose thread has not come back yet."""
        with self._lock:
            return self._stuck

    def threads(self) -> int:
        """Threads the pool has started (they live as long as the process)."""
        with self._lock:
            return self._threads

    async def run(self, fn: Callable[..., T], *args: Any, what: str, deadline: float | None = None,
                  **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on a thread of this pool, awaited at most ``deadline`` seconds.

        Args:
            what: What the call does, for the error ("listing the skills").
            deadline: Seconds to wait (default: :attr:`deadline`).

        Raises:
            DiskUnavailable: the deadline passed (the call is abandoned), or ``max_stuck``
                earlier calls are still stuck (the call was not started).
        """
        limit = self.deadline if deadline is None else deadline
        context = contextvars.copy_context()  # as asyncio.to_thread does: the caller's context vars

        def call() -> T:
            return context.run(fn, *args, **kwargs)

        future = self._submit(call, what)
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                return await asyncio.wrap_future(future)
        except TimeoutError:
            if not scope.expired():  # raised by fn itself (a socket's, a lock's): its own answer
                raise
            self._give_up(future)
            raise DiskUnavailable(what, f"did not finish within {limit:g} s ({PROBLEM})") from None
        except asyncio.CancelledError:  # the caller went away: its call is abandoned just the same
            self._give_up(future)
            raise

    def _submit(self, call: Callable[[], T], what: str) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._stuck >= self.max_stuck:
                raise DiskUnavailable(what, f"was not started: {self._stuck} earlier file operations are "
                                            f"still stuck ({PROBLEM})")
            self._jobs.put((future, call))
            if self._idle > 0:  # counted as ThreadPoolExecutor does: a waiting thread takes this job
                self._idle -= 1
                return future
            if self._threads >= self.workers + self.max_stuck:
                return future  # queued until a thread is free (within the caller's deadline)
            self._threads += 1
        try:
            threading.Thread(target=self._serve, name="deerflow-offloop", daemon=True).start()
        except BaseException:  # no thread to be had (the process's limit): the job must not run later
            future.cancel()
            with self._lock:
                self._threads -= 1
            raise
        return future

    def _give_up(self, future: concurrent.futures.Future[Any]) -> None:
        """Drop a queued call, or count a running one as abandoned until its thread is back."""
        if future.cancel():
            return
        with self._lock:
            if future.done():  # it ended while the deadline fired: nothing holds the thread
                return
            self._stuck += 1
        future.add_done_callback(self._unstick)

    def _unstick(self, _: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._stuck -= 1

    def _serve(self) -> None:
        """Run jobs as they come, for the life of the process."""
        while True:
            future, call = self._jobs.get()
            if future.set_running_or_notify_cancel():  # False: its caller gave up while it waited
                try:
                    future.set_result(call())
                except BaseException as exc:  # noqa: BLE001 - handed to the waiter, who re-raises it
                    future.set_exception(exc)
            with self._lock:  # at most every thread: jobs queued while all were busy count no one idle
                self._idle = min(self._idle + 1, self._threads)


OFF_LOOP = OffLoop()
"""The process's pool: one set of bounds for every caller of :func:`off_loop`."""


async def off_loop(fn: Callable[..., T], *args: Any, what: str, deadline: float | None = None,
                   **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on :data:`OFF_LOOP`, within ``deadline`` (see :meth:`OffLoop.run`)."""
    return await OFF_LOOP.run(fn, *args, what=what, deadline=deadline, **kwargs)

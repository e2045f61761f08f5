"""The metadata stores from async code: every call off the event loop, with a deadline.

A SQLite call blocks its thread: on a busy or locked database (another process
holding a write lock, a slow disk) for up to the store's busy timeout.  On the
server's event loop that freezes every request and every run.  So async code
never calls a store (:class:`~deerflow.persistence.store.MetadataStore`, the
schedules...) directly; it awaits the same method on ``store.aio``::

    record = await store.aio.get_thread(thread_id, user_id)

Each call runs in a small executor owned by the store (bounded: a locked
database cannot take every thread of the process) and is awaited for at most
``deadline`` seconds.  A call that does not finish in time, or that SQLite gives
up on (``database is locked`` after the busy timeout), raises
:class:`StoreUnavailable`: a typed, one-line "try again" answer (HTTP 503).
A call that timed out may still finish in its thread; every write is one
transaction, so it either lands whole or not at all.

Each executor thread keeps one SQLite connection per store and reuses it while
the store's file is the one it opened (see :mod:`deerflow.persistence.sqlite`);
on PostgreSQL a call takes a connection from the URL's pool
(:mod:`deerflow.persistence.pgsql`, whose failures to reach the server are
:class:`StoreUnavailable` too), so any executor thread may run any call.

**The guard.**  With ``DEERFLOW_LOOP_GUARD=1`` (the test suite sets it) a sync
store method called from a thread that runs an asyncio loop raises
:class:`LoopBlocked` instead of blocking it (except in an IPython kernel, where a
notebook cell's sync call blocks only the user's own kernel, as any cell does), so a regression fails a test
rather than freezing a server under load.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from deerflow.persistence.sqlite import (
    StorageError,
    is_locked_error,
    keep_connections_in_this_thread,
)

GUARD_ENV = "DEERFLOW_LOOP_GUARD"
DEADLINE_SECONDS = 15.0
MAX_WORKERS = 4


class StoreUnavailable(StorageError):
    """The store could not answer in time (locked by another process, a hung disk): try again shortly.

    A :class:`StorageError`, so every entry point already answers it as
    "service unavailable" (HTTP 503, one line); the file itself is fine.
    """

    exit_code = 75  # EX_TEMPFAIL

    def __init__(self, path: Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        Exception.__init__(self, f"storage unavailable: {self.path}: {problem}; try again shortly")


class LoopBlocked(RuntimeError):
    """A sync store method was called on a thread running an event loop (a bug: use ``store.aio``)."""


def guard_loop(what: str, *, instead: str = "await the same method on its `.aio`") -> None:
    """Raise :class:`LoopBlocked` when the guard is on and this thread runs an asyncio loop.

    ``instead`` says what async code calls in its place (a store's ``.aio`` by default).
    """
    if os.environ.get(GUARD_ENV) != "1" or _in_notebook_kernel():
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise LoopBlocked(f"{what} called on a thread running an event loop: {instead} instead "
                      "(DEERFLOW_LOOP_GUARD=1)")


def _in_notebook_kernel() -> bool:
    """True in a notebook kernel process: a cell's sync call blocks only that user's own kernel.

    Asked of the kernel application, not of IPython: any process that merely created an IPython
    shell (a test session, say) keeps the guard.
    """
    kernelapp = sys.modules.get("ipykernel.kernelapp")
    return kernelapp is not None and kernelapp.IPKernelApp.initialized()


class AsyncStore:
    """Awaitable twins of a store's public methods (same names, same arguments, same results).

    Args:
        store: The sync store whose methods run in the executor.
        deadline: Seconds a call may take, queueing included, before :class:`StoreUnavailable`.
        max_workers: Threads of the executor (created on first use).
    """

    def __init__(self, store: Any, *, deadline: float = DEADLINE_SECONDS, max_workers: int = MAX_WORKERS) -> None:
        self._store = store
        self.deadline = deadline
        self._max_workers = max_workers
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._store, name) if not name.startswith("_") else None
        if not callable(method):
            raise AttributeError(name)

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self.run(method, *args, **kwargs)

        return call

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in the executor, within the deadline.

        Raises:
            StoreUnavailable: the deadline passed, or SQLite reported the database locked.
        """
        future = asyncio.get_running_loop().run_in_executor(self._pool(), functools.partial(fn, *args, **kwargs))
        scope = asyncio.timeout(self.deadline)
        try:
            async with scope:
                return await future
        except TimeoutError:
            if not scope.expired():  # raised by fn itself (a driver's own timeout): its own answer
                raise
            name = getattr(fn, "__name__", "a store call")
            why = ("the database server did not answer" if getattr(self._store, "backend", "") == "postgres"
                   else "the database is locked or the disk is slow")
            raise StoreUnavailable(self._store.path, f"{name} did not finish within {self.deadline:g} s "
                                   f"({why})") from None
        except sqlite3.OperationalError as exc:
            if not is_locked_error(exc):
                raise
            raise StoreUnavailable(self._store.path, f"the database is locked by another process ({exc})") from None

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self._max_workers, thread_name_prefix="deerflow-store",
                                                    initializer=keep_connections_in_this_thread)
            return self._executor

    def close(self) -> None:
        """Stop the executor's threads once their calls end (a later call starts a new one)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


AsyncMetadataStore = AsyncStore  # the metadata store's facade: the same class

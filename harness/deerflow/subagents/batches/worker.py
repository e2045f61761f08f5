"""The batch worker pool: bounded concurrency over the SQL queue.

A :class:`BatchWorker` runs ``concurrency`` slots on one event loop.  Each
slot claims one item (an atomic ``UPDATE`` with a lease, see
:mod:`.store`), runs it through the item runner (a subagent, via the
runtime's executor), records its end, and claims the next.  Idle slots wait
for :meth:`BatchWorker.wake` (a submission in the same process) or the next
poll.  A heartbeat renews this worker's leases, stops items whose batch was
cancelled, and ends items of cancelled batches whose worker died.

Stopping the worker (host shutdown, a killed process) leaves its running
items leased: once the lease expires, any worker claims them again.  Items
that finished are never claimed again, and an item whose verdict is UNMET
or UNVERIFIED is finished like any other — never retried.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from deerflow.errors import ToolFailure
from deerflow.persistence.aio import StoreUnavailable
from deerflow.subagents.batches.store import BatchStore, ClaimedItem
from deerflow.subagents.outcome import SubagentOutcome

logger = logging.getLogger(__name__)

ItemRunner = Callable[[ClaimedItem], Coroutine[Any, Any, SubagentOutcome]]
Key = tuple[str, int]


@dataclass
class WorkerStats:
    """What this worker did (for logs, tests and the benchmark)."""

    finished: int = 0
    cancelled: int = 0
    lost_leases: int = 0


class BatchWorker:
    """Runs batch items from ``store`` with at most ``concurrency`` at a time.

    Args:
        store: The batch store.
        runner: Executes one claimed item to its outcome.
        concurrency: Slots (items run at the same time).
        lease_seconds: How long a claim holds without renewal.
        poll_interval: Seconds an idle slot waits before looking again; also
            how often cancellations are noticed.
    """

    def __init__(self, store: BatchStore, runner: ItemRunner, *, concurrency: int, lease_seconds: float,
                 poll_interval: float = 0.5) -> None:
        self.store = store
        self.runner = runner
        self.concurrency = max(1, concurrency)
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.stats = WorkerStats()
        self._running: dict[Key, asyncio.Task[SubagentOutcome]] = {}
        self._cancelling: set[Key] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[WorkerStats] | None = None

    def start(self) -> asyncio.Task[WorkerStats]:
        """Run in the background on the current loop (see :meth:`stop`)."""
        self._task = asyncio.create_task(self.run(), name="deerflow-batch-worker")
        return self._task

    async def stop(self) -> None:
        """Stop claiming and abandon running items (their leases expire; they resume elsewhere)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def wake(self) -> None:
        """Tell idle slots there is work (callable from any thread)."""
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def run(self, *, until_idle: bool = False) -> WorkerStats:
        """Work until cancelled, or with ``until_idle`` until no batch item is left unfinished."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        heartbeat = asyncio.create_task(self._heartbeat())
        slots = [asyncio.create_task(self._slot(until_idle)) for _ in range(self.concurrency)]
        try:
            await asyncio.gather(*slots)
        finally:
            for task in (*slots, heartbeat):
                task.cancel()
            await asyncio.gather(*slots, heartbeat, return_exceptions=True)
        return self.stats

    async def _slot(self, until_idle: bool) -> None:
        while True:
            try:
                claimed = await self.store.aio.claim(self.owner, self.lease_seconds)
            except StoreUnavailable as exc:  # locked by another process: look again after a pause
                logger.warning("batch worker: %s", exc)
                await asyncio.sleep(self.poll_interval)
                continue
            if claimed:
                await self._execute(claimed[0])
                continue
            if until_idle and not self._running and await self.store.aio.unfinished() == 0:
                return
            assert self._wake is not None
            try:
                async with asyncio.timeout(self.poll_interval):
                    await self._wake.wait()
            except TimeoutError:
                continue
            self._wake.clear()

    async def _execute(self, item: ClaimedItem) -> None:
        key: Key = (item.batch.batch_id, item.index)
        job = asyncio.create_task(self.runner(item))
        self._running[key] = job
        try:
            outcome = await job
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if key not in self._cancelling or (task is not None and task.cancelling()):
                raise  # the worker is stopping: the lease will expire and the item resumes elsewhere
            await self._finish(item, "cancelled", "cancelled", None, None, None)
            self.stats.cancelled += 1
            return
        except ToolFailure as exc:  # the item cannot start (unknown type, model unavailable)
            await self._finish(item, "failed", "error", None, None, exc.message)
            return
        finally:
            self._running.pop(key, None)
            self._cancelling.discard(key)
        await self._finish(item, outcome.status, outcome.stop_reason, outcome.acceptance.overall,
                           outcome.to_dict(), outcome.error)

    async def _finish(self, item: ClaimedItem, status: str, stop_reason: str | None, verdict: str | None,
                      result: dict | None, error: str | None) -> None:
        try:
            recorded = await self.store.aio.finish(item, self.owner, status=status, stop_reason=stop_reason,
                                                   verdict=verdict, result=result, error=error)
        except StoreUnavailable as exc:  # the item runs again once its lease expires
            logger.warning("batch item %s#%d: result not recorded: %s", item.batch.batch_id, item.index, exc)
            return
        if recorded:
            self.stats.finished += 1
        else:
            self.stats.lost_leases += 1
            logger.warning("batch item %s#%d finished after its lease was lost; result discarded",
                           item.batch.batch_id, item.index)

    async def _heartbeat(self) -> None:
        renew_every = max(self.poll_interval, self.lease_seconds / 3)
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                if time.monotonic() - renewed >= renew_every:
                    await self.store.aio.renew(self.owner, self.lease_seconds)
                    renewed = time.monotonic()
                await self._check_cancelled()
            except StoreUnavailable as exc:  # locked by another process: the next beat tries again
                logger.warning("batch worker heartbeat: %s", exc)

    async def _check_cancelled(self) -> None:
        """Stop running items of cancelled batches, settle their pending ones, report the queue depth."""
        running = dict(self._running)
        cancelled = await self.store.aio.cancel_requested(sorted({k[0] for k in running}))
        for key, job in running.items():
            if key[0] in cancelled and key not in self._cancelling:
                self._cancelling.add(key)
                job.cancel()
        await self.store.aio.reap_cancelled()
        from deerflow.runtime.metrics import batch_queue_depth

        batch_queue_depth(await self.store.aio.unfinished())

__all__ = ["BatchWorker", "ItemRunner", "WorkerStats"]

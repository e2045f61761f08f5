"""Running due schedules as unattended ``scheduled`` runs.

A :class:`Scheduler` sits on one :class:`~deerflow.runs.manager.RunManager`
and one :class:`~deerflow.scheduling.store.ScheduleStore`.  Each
:meth:`~Scheduler.tick` claims the due schedules it can (the claim is atomic
across processes, see :mod:`deerflow.scheduling.store`) and starts each as a
*trusted internal* run with ``interaction_mode="scheduled"``: no
``ask_clarification`` tool, minimal reversible assumptions or a ``BLOCKED``
result (parsed and recorded).  While a run lasts, its lease is renewed; when it
ends, the run's status, text, delivery receipt and any ``BLOCKED`` decision are
recorded and the schedule moves to its first slot after the run started.

Rules a user can rely on:

* **missed slots run once** — after downtime a schedule runs once, its
  ``missed_slots`` recorded, not once per slot missed;
* **never twice at once** — a claimed schedule is skipped by every other
  scheduler until its lease is released or expires;
* **a busy thread defers** — if the schedule's thread has an active run, the
  lease is given back untouched and the schedule is tried at the next tick;
* **a broken schedule does not stop the others** — an unknown agent or a deleted
  thread is recorded as that run's error and the schedule moves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict

from deerflow.errors import Busy, ThreadBusy, UserError
from deerflow.run_options import RunOptions
from deerflow.runs.manager import RunManager, RunRequest
from deerflow.runtime import events as ev
from deerflow.runtime.interaction_policy import parse_blocked_result
from deerflow.scheduling.cron import CronExpression, zone
from deerflow.scheduling.store import Schedule, ScheduleRun, ScheduleStore

logger = logging.getLogger(__name__)

MAX_MISSED_COUNT = 10_000


class Scheduler:
    """Claims and runs due schedules.

    Args:
        manager: Where runs execute.
        store: The schedules (usually on the manager's database).
        owner: This scheduler's lease name (default: host, pid and a random suffix).
        lease_seconds: How long a claim holds without renewal.
        clock: Seconds since the epoch (tests pass a fixed clock).
    """

    def __init__(self, manager: RunManager, store: ScheduleStore, *, owner: str | None = None,
                 lease_seconds: float = 300.0, clock: Callable[[], float] = time.time) -> None:
        self.manager = manager
        self.store = store
        self.owner = owner or f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.lease_seconds = lease_seconds
        self.clock = clock
        self._tasks: set[asyncio.Task[ScheduleRun]] = set()

    async def tick(self, *, user_id: str | None = None) -> list[asyncio.Task[ScheduleRun]]:
        """Claim every due schedule this scheduler can get and start it; returns the started tasks."""
        now = self.clock()
        started = []
        for schedule in await self.store.aio.due(now, user_id=user_id):
            if await self.store.aio.claim(schedule.schedule_id, self.owner, now=now,
                                          lease_seconds=self.lease_seconds):
                started.append(self._spawn(schedule, now))
        return started

    async def run_due(self, *, user_id: str | None = None) -> list[ScheduleRun]:
        """Claim, run and wait for every due schedule (the CLI's ``run-due``)."""
        tasks = await self.tick(user_id=user_id)
        return list(await asyncio.gather(*tasks)) if tasks else []

    async def run_now(self, schedule_id: str, user_id: str) -> ScheduleRun:
        """Run one schedule now, whatever its slot (an owner's trial run); waits for the result.

        Raises:
            NotFoundError: not the user's schedule.
            UserError: it is running already.
        """
        schedule = await self.store.aio.get(schedule_id, user_id)
        now = self.clock()
        if not await self.store.aio.claim(schedule_id, self.owner, now=now, lease_seconds=self.lease_seconds,
                                          force=True):
            raise Busy(f"schedule {schedule_id} already has an active run; wait for it")
        return await self._spawn(schedule, now)

    async def aclose(self) -> None:
        """Cancel the runs in flight (their records say so) and wait for them to settle."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def _spawn(self, schedule: Schedule, now: float) -> asyncio.Task[ScheduleRun]:
        task = asyncio.create_task(self._execute(schedule, now), name=f"schedule-{schedule.schedule_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _execute(self, schedule: Schedule, now: float) -> ScheduleRun:
        cron, tz = CronExpression.parse(schedule.cron), zone(schedule.timezone)
        if schedule.thread_id and await self.manager.athread_status(schedule.thread_id) == "busy":
            await self.store.aio.release(schedule.schedule_id, self.owner)  # deferred: same slot, next tick
            return _deferred(schedule, self.owner, now)
        missed = count_missed(cron, tz, schedule.next_run_at, now) if schedule.next_run_at <= now else 0
        record_id = await self.store.aio.start_record(schedule, self.owner, slot_at=schedule.next_run_at,
                                                      missed_slots=missed, started_at=now)
        renewer = asyncio.create_task(self._renew(schedule.schedule_id))
        started = False
        try:
            started = await self._run_and_record(schedule, record_id)
        finally:
            renewer.cancel()
            # an early trial run keeps the coming slot; so does a run another process beat to the thread
            keep = schedule.next_run_at > now or not started
            next_slot = schedule.next_run_at if keep else cron.next_after(_aware(now), tz).timestamp()
            await self.store.aio.release(schedule.schedule_id, self.owner, next_run_at=next_slot, ran_at=now)
        return await self.store.aio.run_record(record_id)

    async def _run_and_record(self, schedule: Schedule, record_id: int) -> bool:
        """Run the schedule's prompt and record how it ended; ``False`` when it could not start
        because another process took the thread in the meantime (the slot is tried again)."""
        options = RunOptions(interaction_mode="scheduled", agent_name=schedule.agent_name or None)
        request = RunRequest(prompt=schedule.prompt, thread_id=schedule.thread_id, user_id=schedule.user_id,
                             options=options, trusted=True)
        try:
            live = await self.manager.start(request)
        except ThreadBusy:
            await self.store.aio.finish_record(record_id, status="deferred", error="the thread has an active run",
                                               thread_id=schedule.thread_id)
            return False
        except UserError as exc:
            logger.warning("schedule %s could not start: %s", schedule.schedule_id, exc)
            await self.store.aio.finish_record(record_id, status="error", error=str(exc),
                                               thread_id=schedule.thread_id)
            return True
        finished: ev.RunFinished | None = None
        try:
            finished = await live.wait()
        finally:
            if finished is None:  # the scheduler itself was cancelled: stop the run too
                with contextlib.suppress(asyncio.CancelledError):
                    await self.manager.cancel(live.run_id, schedule.user_id)
            blocked = parse_blocked_result(finished.text) if finished else None
            await self.store.aio.finish_record(
                record_id, status=finished.status if finished else "cancelled", run_id=live.run_id,
                thread_id=live.record.thread_id, text=finished.text if finished else None,
                error=finished.error if finished else "the scheduler stopped", receipt=finished.receipt
                if finished else None, blocked=asdict(blocked) if blocked else None)
        return True

    async def _renew(self, schedule_id: str) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            await self.store.aio.renew(schedule_id, self.owner, until=self.clock() + self.lease_seconds)


def count_missed(cron: CronExpression, tz: dt.tzinfo, slot: float, now: float) -> int:
    """How many slots after ``slot`` also passed before ``now`` (they are folded into this run)."""
    missed, cursor = 0, _aware(slot)
    end = _aware(now)
    while missed < MAX_MISSED_COUNT:
        cursor = cron.next_after(cursor, tz)
        if cursor > end:
            break
        missed += 1
    return missed


def first_slot(cron_text: str, timezone: str, *, after: float) -> float:
    """When a new schedule first runs (validates the expression and the zone).

    Raises:
        CronError: bad expression or zone.
    """
    return CronExpression.parse(cron_text).next_after(_aware(after), zone(timezone)).timestamp()


def _aware(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


def _deferred(schedule: Schedule, owner: str, now: float) -> ScheduleRun:
    return ScheduleRun(0, schedule.schedule_id, schedule.user_id, owner, schedule.next_run_at, 0, now, now,
                       "deferred", thread_id=schedule.thread_id, error="the thread has an active run")


__all__ = ["Scheduler", "count_missed", "first_slot"]

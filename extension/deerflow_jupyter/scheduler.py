"""The server's background scheduler: due schedules run while JupyterLab is up.

Every ``scheduler_interval`` seconds the loop claims the due schedules of every
user of this server's ``$DEERFLOW_HOME`` and starts them as unattended
``scheduled`` runs on the server's run manager (see
:mod:`deerflow.scheduling.runner`).  Claims are leases in the database (SQLite, or
PostgreSQL with ``storage.url``), so two servers on one home (or one database) never run a schedule twice at once, and a server that was down runs
each overdue schedule once when it comes back.  A broken configuration or a
database hiccup is logged and retried at the next tick: the loop never takes
the server down.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3

from deerflow.errors import UserError
from deerflow.scheduling import Scheduler, ScheduleStore
from deerflow_jupyter.host import HarnessHost

logger = logging.getLogger(__name__)


class ServerScheduler:
    """Owns the :class:`Scheduler` of one server and its background loop.

    Args:
        host: The server's harness host (its run manager opens lazily).
        interval: Seconds between ticks.
        user_id: Run only this user's schedules (a single-user server: under JupyterHub the
            users' servers share one home, and bob's schedules must not run in alice's server).
            None: every user's.
    """

    def __init__(self, host: HarnessHost, *, interval: float = 30.0, user_id: str | None = None) -> None:
        self.host = host
        self.interval = interval
        self.user_id = user_id
        self._store: ScheduleStore | None = None
        self._scheduler: Scheduler | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def store(self) -> ScheduleStore:
        """The schedules where ``storage.url`` puts them (read once the config is loaded; ConfigError if broken)."""
        if self._store is None:
            self.host.loaded()
            self._store = ScheduleStore(self.host.home.metadata)
        return self._store

    async def scheduler(self) -> Scheduler:
        """The scheduler on the host's run manager (created on first use)."""
        if self._scheduler is None:
            self._scheduler = Scheduler(await self.host.manager(), self.store)
        return self._scheduler

    def start(self) -> None:
        """Start the background loop on the running event loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="deerflow-scheduler")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Stop ticking and cancel scheduled runs in flight (recorded as cancelled)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._scheduler is not None:
            await self._scheduler.aclose()

    async def _loop(self) -> None:
        while True:
            try:
                await (await self.scheduler()).tick(user_id=self.user_id)
            except UserError as exc:  # a broken config.yaml: say so, try again later
                logger.error("DeerFlow scheduler: %s", exc)
            except (sqlite3.Error, OSError) as exc:
                logger.warning("DeerFlow scheduler could not read schedules: %s", exc)
            await asyncio.sleep(self.interval)


__all__ = ["ServerScheduler"]

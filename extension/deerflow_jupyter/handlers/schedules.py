"""Scheduled runs over HTTP (the request's user's schedules only).

    GET    /deerflow/api/schedules                 {"schedules": [...]}
    POST   /deerflow/api/schedules                 {cron, prompt, agent_name?, thread_id?, timezone?} → 201
    GET    /deerflow/api/schedules/{id}            one schedule
    DELETE /deerflow/api/schedules/{id}            204
    GET    /deerflow/api/schedules/{id}/runs       its runs, newest first (status, text, receipt, blocked)
    POST   /deerflow/api/schedules/{id}/run        a trial run now (waits; 409 if it is running)

The server runs due schedules itself (:mod:`deerflow_jupyter.scheduler`); these
routes only manage them.  Runs are unattended ``scheduled`` runs started by the
server as a trusted internal caller: the public run API can never ask for that
mode.  Another user's schedule is a 404.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict, Field
from tornado import web

from deerflow.persistence.store import MetadataStore
from deerflow.scheduling import ScheduleBook
from deerflow_jupyter.handlers.base import DeerFlowHandler
from deerflow_jupyter.scheduler import ServerScheduler

SCHEDULE_ID = r"(?P<schedule_id>[a-f0-9]{6,32})"


class ScheduleCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cron: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    agent_name: str | None = None
    thread_id: str | None = None
    timezone: str = "UTC"


class _SchedulesHandler(DeerFlowHandler):
    @property
    def server_scheduler(self) -> ServerScheduler:
        return self.settings["deerflow_scheduler"]

    async def book(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``ScheduleBook.method(...)`` off the event loop, with the store's deadline (it reads SQLite)."""
        manager = await self.manager()
        home, user, schedules = self.host.home, self.user_id, self.server_scheduler.store

        def call(records: MetadataStore) -> Any:
            return getattr(ScheduleBook(home, user, metadata=records, store=schedules), method)(*args, **kwargs)

        call.__name__ = method  # what a store deadline's message names
        return await manager.with_records(call)


class SchedulesHandler(_SchedulesHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send_json({"schedules": [s.to_dict() for s in await self.book("list_schedules")]})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.body(ScheduleCreate)
        schedule = await self.book("add", cron=body.cron, prompt=body.prompt, agent_name=body.agent_name,
                                   thread_id=body.thread_id, timezone=body.timezone)
        self.send_json(schedule.to_dict(), status=201)


class ScheduleHandler(_SchedulesHandler):
    @web.authenticated
    @authorized
    async def get(self, schedule_id: str) -> None:
        self.send_json((await self.book("get", schedule_id)).to_dict())

    @web.authenticated
    @authorized
    async def delete(self, schedule_id: str) -> None:
        await self.book("remove", schedule_id)
        self.set_status(204)
        self.finish()


class ScheduleRunsHandler(_SchedulesHandler):
    @web.authenticated
    @authorized
    async def get(self, schedule_id: str) -> None:
        self.send_json({"runs": [r.to_dict() for r in await self.book("runs", schedule_id)]})


class ScheduleRunNowHandler(_SchedulesHandler):
    @web.authenticated
    @authorized("execute")
    async def post(self, schedule_id: str) -> None:
        scheduler = await self.server_scheduler.scheduler()
        self.send_json((await scheduler.run_now(schedule_id, self.user_id)).to_dict())


__all__ = ["SCHEDULE_ID", "ScheduleHandler", "ScheduleRunNowHandler", "ScheduleRunsHandler", "SchedulesHandler"]

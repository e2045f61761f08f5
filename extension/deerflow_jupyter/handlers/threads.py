"""Threads and assistants, LangGraph Platform style."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from deerflow.errors import Conflict
from deerflow.persistence.store import ThreadExists, ThreadIdUnavailable
from deerflow_jupyter import wire
from deerflow_jupyter.bodies import AssistantSearch, HistoryQuery, ThreadCreate, ThreadSearch
from deerflow_jupyter.handlers.base import DeerFlowHandler


class AssistantSearchHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        query = self.body(AssistantSearch)
        found = [] if query.graph_id not in (None, wire.ASSISTANT_ID) or query.offset else [wire.assistant()]
        self.send_json(found[: query.limit])


class AssistantHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def get(self, assistant_id: str) -> None:
        if assistant_id != wire.ASSISTANT_ID:
            raise web.HTTPError(404, f"unknown assistant {assistant_id!r}; the assistant is {wire.ASSISTANT_ID!r}")
        self.send_json(wire.assistant())


class ThreadsHandler(DeerFlowHandler):
    """``POST /threads``: a new thread, with a generated id or one the caller chose.

    Thread ids are global (they key the checkpoints, the run guard and
    browser sessions), so an id can be held by another user.  Such an id gets
    the answer an id the caller holds gets under ``if_exists: raise`` — the
    same 409 with the same words — and nothing of the other thread (owner,
    metadata, status) is read or shown.  Whether an id is taken at all cannot
    be hidden from someone who tries to claim it; server-made ids are 128-bit
    random, so this tells only about ids the caller already guessed.  Every
    other route answers another user's thread exactly like a missing one (404).
    """

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.body(ThreadCreate)
        manager = await self.manager()
        existing = await manager.find_thread(body.thread_id, self.user_id) if body.thread_id else None
        if existing is not None and body.if_exists == "do_nothing":
            self.send_json(wire.thread(existing, status=await manager.athread_status(existing.thread_id)))
            return
        try:
            record = await manager.acreate_thread(self.user_id, thread_id=body.thread_id, metadata=body.metadata)
        except (ThreadExists, ThreadIdUnavailable):  # not a locked or broken store (503)
            raise Conflict(f"thread id {body.thread_id!r} is not available: choose another, "
                           "or send no thread_id to get a new one") from None
        self.send_json(wire.thread(record))


class ThreadSearchHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        query = self.body(ThreadSearch)
        manager = await self.manager()
        records = await manager.list_threads(self.user_id, limit=10_000)
        matches = [r for r in records if all(r.metadata.get(k) == v for k, v in query.metadata.items())]
        out = [wire.thread(r, status=await manager.athread_status(r.thread_id)) for r in matches]
        if query.status:
            out = [t for t in out if t["status"] == query.status]
        self.send_json(out[query.offset : query.offset + query.limit])


class ThreadHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        manager = await self.manager()
        record = await manager.athread(thread_id, self.user_id)
        values = await manager.thread_values(thread_id, self.user_id)
        self.send_json(wire.thread(record, status=await manager.athread_status(thread_id), values=values))

    @web.authenticated
    @authorized
    async def delete(self, thread_id: str) -> None:
        manager = await self.manager()
        await manager.delete_thread(thread_id, self.user_id)
        self.set_status(204)
        self.finish()


class ThreadStateHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        manager = await self.manager()
        snapshot = await manager.state_snapshot(thread_id, self.user_id)
        self.send_json(wire.thread_state(snapshot, thread_id))


class ThreadHistoryHandler(DeerFlowHandler):
    @web.authenticated
    @authorized("read")
    async def post(self, thread_id: str) -> None:
        query = self.body(HistoryQuery)
        manager = await self.manager()
        history = await manager.state_history(thread_id, self.user_id, limit=query.limit)
        self.send_json([wire.thread_state(s, thread_id) for s in history])

    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        manager = await self.manager()
        raw = self.get_argument("limit", "10")
        if not raw.isdigit() or len(raw) > 6:
            raise web.HTTPError(400, "%s", "limit must be a whole number")
        limit = int(raw)
        history = await manager.state_history(thread_id, self.user_id, limit=max(1, min(limit, 1000)))
        self.send_json([wire.thread_state(s, thread_id) for s in history])

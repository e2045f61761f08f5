"""The request's user's memory over HTTP (owner-only: the namespace is the authenticated user's).

    GET    /deerflow/api/memory[?agent=NAME]          {"facts": [...]}, newest first
    POST   /deerflow/api/memory                       {"text", "category"?, "agent"?} → 201 {"fact": {...}}
    DELETE /deerflow/api/memory[?agent=NAME]          {"removed": N} (forget everything)
    GET    /deerflow/api/memory/export[?agent=NAME]   every fact with its source and times
    GET    /deerflow/api/memory/{id}[?agent=NAME]     one fact
    DELETE /deerflow/api/memory/{id}[?agent=NAME]     {"forgotten": {...}}
    PATCH  /deerflow/api/memory/{id}[?agent=NAME]     {"text"} → {"fact": {...}}: corrected, now the user's own
    GET    /deerflow/api/memory/prompt[?topic=T&agent=NAME]  {"block"}: what a run about T would show the model
    GET    /deerflow/api/memory/changes[?agent=NAME]  {"changes": [...]}: what each run taught memory
    GET    /deerflow/api/memory/changes?run=ID[&wait=S]  {"change": {...} | null}: what run ID taught,
                                                      waiting up to S (≤ 120) seconds for its extraction
    POST   /deerflow/api/memory/undo                  {"run"?: ID, "agent"?} → {"undone": {...}}

There is no user parameter: facts are read and written in the authenticated
user's namespace, so another user's fact id is a 404 like an unknown one.  An
``agent`` the user does not have is a 404 too (a deleted agent whose facts remain
may still be read and cleared, never written to).
Store calls run off the event loop.
"""

from __future__ import annotations

from typing import Any, Literal

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict, Field
from tornado import web

from deerflow.custom_agents import AgentStore
from deerflow.memory import MemoryBook, MemoryService
from deerflow.memory.commands import check_agent, memory_action
from deerflow.memory.guard import MAX_FACT_CHARS
from deerflow_jupyter.handlers.base import DeerFlowHandler

FACT_ID = r"(?P<fact_id>[^/]+)"


class FactBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS * 2)
    category: Literal["preference", "context", "project", "skill"] = "context"
    agent: str | None = None


class _MemoryHandler(DeerFlowHandler):
    async def service(self) -> MemoryService:
        service = (await self.manager()).memory
        if not isinstance(service, MemoryService):
            raise web.HTTPError(503, "memory is not available on this server")
        return service

    async def book(self, verb: str, agent: str | None = None) -> MemoryBook:
        """The book of ``agent`` (else ``?agent=``, else the lead agent's) for ``verb``.

        An agent the user does not have is a 404 (``check_agent``): nothing is stored under a
        misspelt name, and an empty list is not shown as if it were the agent's.
        """
        service = await self.service()
        name = agent or self.get_query_argument("agent", None) or None
        book = service.book(self.user_id, name)
        if name is not None:
            await service.in_store(check_agent, AgentStore.for_user(self.host.home, self.user_id), name, verb, book)
        return book

    async def in_store(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A blocking store call on the memory service's threads (closing waits for it)."""
        return await (await self.service()).in_store(fn, *args, **kwargs)

    async def act(self, verb: str, argument: str = "", *, agent: str | None = None) -> dict[str, Any]:
        book = await self.book(verb, agent)
        service = await self.service()
        return await service.in_store(memory_action, book, verb, argument,
                                      max_tokens=service.config.memory.max_injection_tokens)


class MemoryHandler(_MemoryHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send_json(await self.act("list"))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.body(FactBody)
        book = await self.book("add", body.agent)
        fact = await self.in_store(book.add, body.text, category=body.category)
        self.send_json({"fact": fact.to_dict()}, status=201)

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        self.send_json(await self.act("clear"))


class MemoryExportHandler(_MemoryHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send_json(await self.act("export"))


class UndoBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: str | None = Field(default=None, max_length=200)
    agent: str | None = None


MAX_WAIT_S = 120.0


class MemoryChangesHandler(_MemoryHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        run = self.get_query_argument("run", "") or ""
        if not run:
            self.send_json(await self.act("changes"))
            return
        try:
            wait = min(max(float(self.get_query_argument("wait", "0")), 0.0), MAX_WAIT_S)
        except ValueError:
            raise web.HTTPError(400, "wait must be a number of seconds") from None
        agent = self.get_query_argument("agent", None) or None
        await self.book("changes", agent)  # 503 without memory; the agent name checked
        service = await self.service()
        change = await service.changes_after(self.user_id, agent, run, timeout=wait)
        self.send_json({"change": change.to_dict() if change is not None else None})


class MemoryUndoHandler(_MemoryHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.body(UndoBody)
        self.send_json(await self.act("undo", body.run or "", agent=body.agent))


class EditBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS * 2)


class MemoryPromptHandler(_MemoryHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send_json(await self.act("prompt", self.get_query_argument("topic", "") or ""))


class MemoryFactHandler(_MemoryHandler):
    @web.authenticated
    @authorized
    async def get(self, fact_id: str) -> None:
        book = await self.book("list")
        self.send_json({"fact": (await self.in_store(book.get, fact_id)).to_dict()})

    @web.authenticated
    @authorized
    async def delete(self, fact_id: str) -> None:
        self.send_json(await self.act("forget", fact_id))

    @web.authenticated
    @authorized
    async def patch(self, fact_id: str) -> None:
        body = self.body(EditBody)
        book = await self.book("edit")
        self.send_json({"fact": (await self.in_store(book.edit, fact_id, body.text)).to_dict()})


ROUTES = [
    (r"/memory", MemoryHandler),
    (r"/memory/export", MemoryExportHandler),  # before /memory/{id}: first match wins
    (r"/memory/changes", MemoryChangesHandler),
    (r"/memory/undo", MemoryUndoHandler),
    (r"/memory/prompt", MemoryPromptHandler),
    (rf"/memory/{FACT_ID}", MemoryFactHandler),
]

__all__ = ["FACT_ID", "ROUTES", "MemoryChangesHandler", "MemoryExportHandler", "MemoryFactHandler", "MemoryHandler",
           "MemoryPromptHandler", "MemoryUndoHandler"]

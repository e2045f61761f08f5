"""Custom agents over HTTP (the request's user's agents only).

    GET    /deerflow/api/agents          {"agents": [...]}
    GET    /deerflow/api/agents/{name}   one agent: config and soul
    PATCH  /deerflow/api/agents/{name}   partial change (soul, description, skills, tool_groups,
                                         model, display_name); unknown names → 422, nothing written
    DELETE /deerflow/api/agents/{name}   204

Agents are *created* by a bootstrap run (``config.configurable.agent_name`` +
``is_bootstrap``, or a prompt ``/bootstrap NAME ...``) and *used* by runs with
``agent_name``.  Another user's agent is a 404 like another user's thread.
Every route reads or writes the agent's files, so the work runs off the event loop with a
deadline (:func:`deerflow.persistence.offloop.off_loop`: a hung disk is a 503 "try again shortly").
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict
from tornado import web

from deerflow.custom_agents import AgentChange, AgentStore
from deerflow.persistence.offloop import off_loop
from deerflow_jupyter.handlers.base import DeerFlowHandler

NAME = r"(?P<name>[a-z0-9][a-z0-9_-]{0,63})"


class AgentPatch(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    soul: str | None = None
    description: str | None = None
    skills: list[str] | None = None
    tool_groups: list[str] | None = None
    model: str | None = None
    display_name: str | None = None


class _AgentsHandler(DeerFlowHandler):
    def agents(self) -> AgentStore:
        return AgentStore.for_user(self.host.home, self.user_id)


class AgentsHandler(_AgentsHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        agents = await off_loop(self.agents().list_agents, what="listing the agents")
        self.send_json({"agents": [a.summary() for a in agents]})


class AgentHandler(_AgentsHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        self.send_json((await off_loop(self.agents().get, name, what=f"reading the agent {name}")).summary())

    @web.authenticated
    @authorized
    async def patch(self, name: str) -> None:
        change = AgentChange(**self.body(AgentPatch).model_dump())
        manager = await self.manager()
        store, user_id, home = self.agents(), self.user_id, self.host.home

        def update():  # the catalog lists the skills on disk, and the update writes the agent's files
            return store.update(name, change, catalog=manager.agent_catalog(user_id, home))

        self.send_json((await off_loop(update, what=f"changing the agent {name}")).summary())

    @web.authenticated
    @authorized
    async def delete(self, name: str) -> None:
        await off_loop(self.agents().delete, name, what=f"deleting the agent {name}")
        self.set_status(204)
        self.finish()


__all__ = ["NAME", "AgentHandler", "AgentsHandler"]

"""MCP management routes.

    GET  /deerflow/api/mcp/config    the mcpServers section, every secret masked
    PUT  /deerflow/api/mcp/config    replace it (a masked value keeps the stored secret)
    POST /deerflow/api/mcp/reset     forget cached tools, tokens and sessions
    GET  /deerflow/api/mcp/servers   each server's state (nothing is started)
    GET  /deerflow/api/mcp/tools     start the servers not started yet and list their tools

A malformed ``extensions_config.json`` (not JSON, the wrong types) is an answer naming the
file and what is wrong (500, a configuration error), never an empty list or config; runs go on
without MCP servers and say so in a notice.

Declarative MCP config is exposed to an authenticated management surface;
with several users (``single_user = False``) only the server's owner may change
it or reset the cache.  Secrets never appear in a response.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict, Field
from tornado import web

from deerflow.errors import ConfigError
from deerflow.mcp.editing import masked_config, update_config
from deerflow.mcp.manager import McpManager
from deerflow.persistence.offloop import off_loop
from deerflow_jupyter.handlers.base import DeerFlowHandler


class McpConfigBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    servers: dict[str, Any] = Field(alias="mcpServers")


class _McpHandler(DeerFlowHandler):
    async def mcp(self) -> McpManager:
        mcp = (await self.manager()).mcp
        assert mcp is not None, "RunManager.open opens the MCP manager"
        return mcp

    def require_owner(self) -> None:
        """Config changes are an operator's decision: the owner only, when users are distinct."""
        if not self.settings.get("deerflow_single_user", True) and self.user_id != self.settings["deerflow_owner"]:
            raise web.HTTPError(403, "only the server's owner may change the MCP configuration")


class McpConfigHandler(_McpHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        where = self.host.loaded().extensions  # which file is decided (a stat) in the worker thread
        self.send_json(await off_loop(lambda: masked_config(where.resolve()), what="reading the MCP config"))

    @web.authenticated
    @authorized
    async def put(self) -> None:
        self.require_owner()
        body = self.body(McpConfigBody)
        try:
            where = self.host.loaded().extensions
            updated = await off_loop(lambda: update_config(where.resolve(), body.servers),
                                   what="changing the MCP config")
        except ConfigError as exc:  # the edit is invalid (names the key); nothing was written
            raise web.HTTPError(422, str(exc)) from None
        self.send_json(updated)


class McpResetHandler(_McpHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        self.require_owner()
        await (await self.mcp()).reset()
        self.send_json({"reset": True})


class McpServersHandler(_McpHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        mcp = await self.mcp()
        await mcp.check_config()  # a malformed file is a 500 naming it, not an empty list of servers
        self.send_json({"servers": await mcp.servers()})


class McpToolsHandler(_McpHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        mcp = await self.mcp()
        await mcp.check_config()
        await mcp.discover(user_id=self.user_id)
        self.send_json({"tools": await mcp.tool_list(), "servers": await mcp.servers()})

"""The discovered MCP tools of one version of the config file.

A :class:`Catalog` belongs to one :class:`~deerflow.mcp.config.ConfigSignature`.
Each configured server has a :class:`ServerState`: not yet started, ``ok``
with its tool specs, ``failed`` (with the reason and when, retried after a
pause), ``invalid`` (config error) or ``disabled``.  When the file changes,
:meth:`Catalog.successor` carries over every server whose entry did not change,
so editing one server never rediscovers the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.tools import BaseTool

from deerflow.mcp.config import McpConfigSnapshot, McpServerConfig
from deerflow.mcp.tools import ToolSpec

Status = Literal["not_started", "ok", "failed", "invalid", "disabled"]


@dataclass
class ServerState:
    """What is known about one configured server."""

    name: str
    config: McpServerConfig | None
    status: Status = "not_started"
    specs: list[ToolSpec] = field(default_factory=list)
    tools: list[BaseTool] = field(default_factory=list)
    error: str | None = None
    failed_at: float | None = None
    dropped: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        """A JSON-able view (no secrets: the config itself is not included)."""
        config = self.config
        return {"name": self.name, "status": self.status, "type": config.type if config else None,
                "enabled": bool(config and config.enabled), "description": config.description if config else None,
                "tools": [s.name for s in self.specs], "error": self.error, "dropped": list(self.dropped)}


@dataclass
class Catalog:
    """Server states and tools for one config signature."""

    snapshot: McpConfigSnapshot
    servers: dict[str, ServerState]
    created: float = field(default_factory=time.monotonic)

    @classmethod
    def fresh(cls, snapshot: McpConfigSnapshot) -> Catalog:
        servers: dict[str, ServerState] = {}
        for name, entry in snapshot.servers.items():
            if entry.config is None:
                servers[name] = ServerState(name, None, "invalid", error=entry.error)
            elif not entry.config.enabled:
                servers[name] = ServerState(name, entry.config, "disabled")
            else:
                servers[name] = ServerState(name, entry.config)
        return cls(snapshot, servers)

    def successor(self, snapshot: McpConfigSnapshot) -> tuple[Catalog, set[str]]:
        """The catalog of a new file version, and the servers whose sessions must close."""
        nxt = Catalog.fresh(snapshot)
        changed = {name for name in self.servers if name not in nxt.servers}
        for name, state in nxt.servers.items():
            old = self.servers.get(name)
            if old is None:
                continue
            if old.config == state.config and state.status == "not_started":
                nxt.servers[name] = old
            else:
                changed.add(name)
        return nxt, changed

    def pending(self, *, now: float, retry_after: float) -> list[str]:
        """Enabled servers to discover now: never started, or failed long enough ago."""
        due = []
        for name, state in self.servers.items():
            retry = state.status == "failed" and state.failed_at is not None \
                and now - state.failed_at >= retry_after
            if state.status == "not_started" or retry:
                due.append(name)
        return due

    def tools(self) -> list[BaseTool]:
        """Every tool of every working server, in config order."""
        return [tool for state in self.servers.values() if state.status == "ok" for tool in state.tools]

    def spec(self, name: str) -> ToolSpec | None:
        for state in self.servers.values():
            for spec in state.specs:
                if spec.name == name:
                    return spec
        return None

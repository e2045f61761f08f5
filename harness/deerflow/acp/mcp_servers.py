"""Handing DeerFlow's enabled MCP servers to an ACP agent.

ACP's ``session/new`` carries the MCP servers the agent should connect to.  We
pass the user's enabled servers in ACP's shapes (stdio, HTTP, SSE).  Where they
come from is a seam: the host puts a callable under
``RunContext.services.mcp_server_configs`` returning ``{name: server}`` in
``extensions_config.json``'s ``mcpServers`` format (the MCP module can provide
its resolved view there); :func:`extensions_mcp_servers` is the plain reading
of that file, ``$VAR`` values taken from the environment.  A malformed entry is skipped and logged:
one bad server never stops the agent.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.config.loader import ExtensionsLocation, interpolate, resolve_extensions
from deerflow.errors import ConfigError

if TYPE_CHECKING:  # the SDK is an optional extra; reading the config must not need it
    from acp.schema import HttpMcpServer, McpServerStdio, SseMcpServer

    AcpMcpServer = McpServerStdio | HttpMcpServer | SseMcpServer

logger = logging.getLogger(__name__)

McpServerConfigs = Callable[[], Mapping[str, Mapping[str, Any]]]


def extensions_mcp_servers(where: Path | ExtensionsLocation) -> McpServerConfigs:
    """A source reading the enabled ``mcpServers`` of ``extensions_config.json`` at each call."""

    def read() -> Mapping[str, Mapping[str, Any]]:
        path = resolve_extensions(where)
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except (OSError, json.JSONDecodeError) as exc:
            logger.warning("cannot read MCP servers from %s for ACP agents: %s", path, exc)
            return {}
        servers = data.get("mcpServers") if isinstance(data, dict) else None
        if not isinstance(servers, dict):
            return {}
        enabled = {}
        for name, cfg in servers.items():
            if not isinstance(cfg, dict) or not cfg.get("enabled", True):
                continue
            try:  # "$VAR" values come from the environment, as everywhere in DeerFlow's config
                enabled[name] = interpolate(cfg, env=os.environ, file=str(path), key=f"mcpServers.{name}")
            except ConfigError as exc:
                logger.warning("MCP server %r is not passed to ACP agents: %s", name, exc)
        return enabled

    return read


def to_acp(servers: Mapping[str, Mapping[str, Any]]) -> list[AcpMcpServer]:
    """The servers in ACP's schema; entries without a command or URL are skipped."""
    from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

    out: list[AcpMcpServer] = []
    for name, cfg in servers.items():
        kind = str(cfg.get("type") or ("stdio" if cfg.get("command") else "http")).lower()
        if kind == "stdio" and isinstance(cfg.get("command"), str):
            env = found if isinstance(found := cfg.get("env"), dict) else {}
            out.append(McpServerStdio(name=name, command=cfg["command"], args=[str(a) for a in cfg.get("args") or []],
                                      env=[EnvVariable(name=k, value=str(v)) for k, v in env.items()]))
        elif kind in {"http", "streamable_http", "streamable-http", "sse"} and isinstance(cfg.get("url"), str):
            raw = found if isinstance(found := cfg.get("headers"), dict) else {}
            headers = [HttpHeader(name=k, value=str(v)) for k, v in raw.items()]
            if kind == "sse":
                out.append(SseMcpServer(type="sse", name=name, url=cfg["url"], headers=headers))
            else:
                out.append(HttpMcpServer(type="http", name=name, url=cfg["url"], headers=headers))
        else:
            logger.warning("MCP server %r is not passed to ACP agents: no usable command or url", name)
    return out


__all__ = ["McpServerConfigs", "extensions_mcp_servers", "to_acp"]

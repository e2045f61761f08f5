"""``deerflow mcp list|tools|reset``: the MCP servers from a terminal.

* ``list`` — each configured server and its state, without starting anything;
* ``tools`` — starts the servers not started yet and lists their tools
  (``--json`` for one JSON object per tool);
* ``reset`` — forgets the cached tools, tokens and sessions of this process
  (a long-lived host — the Jupyter server — has ``POST /deerflow/api/mcp/reset``).

The line formatting is shared with ``%deerflow mcp`` in notebooks.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ACTIONS = ("list", "tools", "reset")
RESET_TEXT = "MCP cache reset: servers are started again when a run needs their tools"


def add_mcp_parser(sub: Any) -> None:
    """Register the ``mcp`` subcommand on the CLI's subparsers."""
    mcp = sub.add_parser("mcp", help="MCP servers: list them, list their tools, reset the cache")
    action = mcp.add_subparsers(dest="mcp_command", required=True)
    action.add_parser("list", help="configured servers and their state")
    tools = action.add_parser("tools", help="start the servers and list their tools")
    tools.add_argument("--json", action="store_true", help="one JSON object per tool")
    action.add_parser("reset", help="forget cached MCP tools, tokens and sessions")


def run_mcp_command(client: Any, args: argparse.Namespace) -> int:
    """Execute ``deerflow mcp ...``; 1 when a server is unusable."""
    if args.mcp_command == "reset":
        client.reset_mcp()
        print(RESET_TEXT)
        return 0
    file_error = _file_error(client.loaded.extensions_path)
    if file_error:  # else "no MCP servers configured", status 0: the broken file would go unseen
        print(f"deerflow: MCP servers skipped: {file_error}", file=sys.stderr)
    if args.mcp_command == "tools":
        tools = client.mcp_tools()
        servers = client.mcp_servers()
        if args.json:  # stdout stays JSON lines for a program to read; the problems are for the person
            for line in [json.dumps(t) for t in tools]:
                print(line)
            for line in problem_lines(servers):
                print(line, file=sys.stderr)
        else:
            lines = tool_lines(tools) if tools or not file_error else []  # not "is any server enabled?"
            _print_lines(lines + problem_lines(servers))
    else:
        servers = client.mcp_servers()
        _print_lines(server_lines(servers) if servers or not file_error else [])
    return 1 if file_error or any(s["status"] in {"failed", "invalid"} for s in servers) else 0


def _print_lines(lines: list[str]) -> None:
    if lines:
        print("\n".join(lines))


def _file_error(path: Path) -> str | None:
    """Why ``extensions_config.json`` gives no servers at all (malformed, unreadable), else None."""
    from deerflow.mcp.config import config_problem

    problem = config_problem(path)
    return str(problem) if problem is not None else None


def server_lines(servers: list[dict[str, Any]]) -> list[str]:
    """One line per server (name, transport, state, tool count, description) plus its error."""
    if not servers:
        return ["no MCP servers configured (add them under mcpServers in extensions_config.json)"]
    lines = []
    for server in servers:
        detail = f" — {server['description']}" if server.get("description") else ""
        count = f", {len(server['tools'])} tools" if server["status"] == "ok" else ""
        lines.append(f"{server['name']:<20} {server['type'] or '?':<6} {server['status']}{count}{detail}")
        if server.get("error"):
            lines.append(f"{'':<20} error: {server['error']}")
    return lines


def tool_lines(tools: list[dict[str, str]]) -> list[str]:
    if not tools:
        return ["no MCP tools (is any server enabled and working? see `deerflow mcp list`)"]
    return [f"{t['name']:<40} {_first_line(t['description'])}" for t in tools]


def problem_lines(servers: list[dict[str, Any]]) -> list[str]:
    """Servers that failed and tools that were dropped, prefixed with ``!``."""
    lines = [f"! {s['name']}: {s['error']}" for s in servers if s.get("error")]
    lines += [f"! {dropped}" for s in servers for dropped in s.get("dropped") or []]
    return lines


def _first_line(text: str) -> str:
    stripped = (text or "").strip()
    return stripped.splitlines()[0][:100] if stripped else ""

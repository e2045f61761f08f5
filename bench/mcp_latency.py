"""MCP latency: time to the first tool call, cold vs warm, and the per-run cache check.

Measures, for a stdio server (the test server, or ``mcp-server-time`` with ``--server time``):

* ``first call cold`` — a fresh manager: read the config, start the server
  process, handshake, list tools, then one tool call (what the first run of a
  thread pays);
* ``first call warm`` — the same manager and thread again: the cached catalog,
  the cached session, one tool call (every later run);
* ``cache check``     — ``McpManager.acatalog()`` when the file did not change
  (read + hash off the event loop, compare on it), paid by every run; goal ≤ 1 ms;
* ``prepare_run``     — the whole per-run MCP step when nothing changed
  (cache check + building the run's tool view).

Run::

    .venv/bin/python bench/mcp_latency.py [--cold 5] [--warm 50] [--checks 2000] [--server test|time]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from langchain.tools import ToolRuntime
from timing import summary

from deerflow.config.paths import HomePaths
from deerflow.config.schema import AppConfig
from deerflow.mcp.manager import McpManager
from deerflow.runtime.context import RunContext

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"cache check": 0.001}
SERVERS = {
    "test": ({"command": sys.executable, "args": [str(ROOT / "tests/fixtures/mcp_test_server.py"), "stdio"]},
             "test_echo", {"text": "hi"}),
    "time": ({"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
             "time_get_current_time", {"timezone": "UTC"}),
}




def _runtime(home: HomePaths, thread: str) -> ToolRuntime:
    context = RunContext(user_id="local", thread_id=thread, run_id="bench",
                         paths=home.thread("local", thread).ensure(), config=AppConfig())
    return ToolRuntime(state={}, context=context, config={}, stream_writer=lambda _: None, tool_call_id="bench",
                       store=None)


async def _first_call(manager: McpManager, home: HomePaths, thread: str, tool: str, args: dict) -> float:
    start = time.perf_counter()
    view = await manager.prepare_run(user_id="local", thread_id=thread)
    target = next(t for t in view.tools if t.name == tool)
    await target.coroutine(_runtime(home, thread), **args)
    return time.perf_counter() - start


async def main(cold: int, warm: int, checks: int, server: str) -> None:
    entry, tool, args = SERVERS[server]
    with tempfile.TemporaryDirectory() as tmp:
        home = HomePaths(Path(tmp) / "home")
        extensions = Path(tmp) / "extensions_config.json"
        extensions.write_text(json.dumps({"mcpServers": {server: {"type": "stdio", **entry}}}))
        cold_samples = []
        for _ in range(cold):
            manager = McpManager(extensions_path=extensions, home=home)
            cold_samples.append(await _first_call(manager, home, "t-cold", tool, args))
            await manager.aclose()
        manager = McpManager(extensions_path=extensions, home=home)
        await _first_call(manager, home, "t-warm", tool, args)
        warm_samples = [await _first_call(manager, home, "t-warm", tool, args) for _ in range(warm)]
        check_samples = []
        for _ in range(checks):
            start = time.perf_counter()
            await manager.acatalog()  # what a run pays: the file part off the loop (sync catalog() is refused there)
            check_samples.append(time.perf_counter() - start)
        prepare_samples = []
        for _ in range(min(checks, 500)):
            start = time.perf_counter()
            await manager.prepare_run(user_id="local", thread_id="t-warm")
            prepare_samples.append(time.perf_counter() - start)
        opened = manager.pool.opened
        await manager.aclose()
    print(f"MCP latency, stdio server {server!r} ({tool})")
    for name, samples in [("first call cold", cold_samples), ("first call warm", warm_samples),
                          ("cache check", check_samples), ("prepare_run", prepare_samples)]:
        goal = GOALS.get(name)
        verdict = "" if goal is None else ("  OK" if statistics.median(samples) <= goal else "  OVER GOAL")
        print(f"  {name:<16} {summary(samples, digits=3, width=9)}  n={len(samples)}{verdict}")
    print(f"  sessions opened by the warm manager: {opened} (1 = the session was reused)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--warm", type=int, default=50)
    parser.add_argument("--checks", type=int, default=2000)
    parser.add_argument("--server", choices=sorted(SERVERS), default="test")
    options = parser.parse_args()
    asyncio.run(main(options.cold, options.warm, options.checks, options.server))

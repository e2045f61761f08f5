"""Browser latency on a local page: startup, cold session, warm actions.

Measures, with the system Chromium and a page served on loopback:

* ``browser start``        — Playwright + Chromium launch (host startup cost);
* ``session cold``         — a new thread's first ``browser_navigate`` (context + proxy + load + snapshot);
* ``navigate+snapshot``    — ``browser_navigate`` on a warm session (tool layer, guarded proxy included);
* ``snapshot``             — ``browser_snapshot`` on a warm session;
* ``screenshot warm``      — ``browser_screenshot`` (PNG, viewport, written to outputs); goal ≤ 300 ms;
* ``live frame``           — one JPEG capture as the live view takes it.

Run::

    .venv/bin/python bench/browser_latency.py [--warm 30] [--cold 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from langchain.tools import ToolRuntime

from deerflow.browser.manager import BrowserSessionManager
from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AppConfig, BrowserConfig
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import HostServices
from deerflow.tools.builtins.browser_tools import browser_tools

GOALS = {"screenshot warm": 0.300}
PAGE = ("<!doctype html><html><head><title>Bench</title></head><body><h1>Benchmark page</h1>"
        + "".join(f"<p>Paragraph {i} with a <a href='/p{i}'>link {i}</a>.</p>" for i in range(40))
        + "<form><input name='q'><button>Go</button></form></body></html>").encode()


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: Any) -> None:
        del args


def _runtime(root: Path, manager: BrowserSessionManager, thread: str) -> ToolRuntime:
    context = RunContext(user_id="bench", thread_id=thread, run_id="r", paths=ThreadPaths(root / thread).ensure(),
                         config=AppConfig(), services=HostServices(browser=manager))
    return ToolRuntime(state={}, context=context, config={}, stream_writer=lambda _: None, tool_call_id="c",
                       store=None)


async def _time(fn: Callable[[], Awaitable[object]], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return samples


def _report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    goal = GOALS.get(name)
    verdict = "" if goal is None else ("  ok (goal ≤ %.0f ms)" % (goal * 1000) if statistics.median(ordered) <= goal
                                       else "  OVER goal %.0f ms" % (goal * 1000))
    print(f"{name:20s} {statistics.median(ordered) * 1000:8.1f} ms (p95 {p95 * 1000:7.1f}, n={len(ordered)}){verdict}")


async def main(warm: int, cold: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    tools = {t.name: t for t in browser_tools()}

    async def call(name: str, runtime: ToolRuntime, **args: Any) -> Any:
        return await tools[name].ainvoke({"type": "tool_call", "id": "c", "name": name,
                                          "args": {**args, "runtime": runtime}})

    manager = BrowserSessionManager(BrowserConfig(enabled=True, allow_private_addresses=True, max_sessions=cold + 2))
    start = time.perf_counter()
    await manager.start()
    _report("browser start", [time.perf_counter() - start])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            colds = iter(range(cold))
            _report("session cold", await _time(
                lambda: call("browser_navigate", _runtime(root, manager, f"cold{next(colds)}"), url=url), cold))
            runtime = _runtime(root, manager, "warm")
            await call("browser_navigate", runtime, url=url)
            _report("navigate+snapshot", await _time(lambda: call("browser_navigate", runtime, url=url), warm))
            _report("snapshot", await _time(lambda: call("browser_snapshot", runtime), warm))
            _report("screenshot warm", await _time(lambda: call("browser_screenshot", runtime), warm))
            session = manager._sessions["warm"]
            _report("live frame", await _time(
                lambda: manager.run(session.screenshot(full_page=False, ref=None, jpeg_quality=60)), warm))
    finally:
        await manager.aclose()
        server.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm", type=int, default=30, help="samples of each warm action")
    parser.add_argument("--cold", type=int, default=5, help="new sessions to open")
    args = parser.parse_args()
    asyncio.run(main(args.warm, args.cold))

"""The browser behind the URL guard, the session cap, and startup refusals."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from deerflow.browser.manager import BrowserSessionManager
from deerflow.config.schema import BrowserConfig
from deerflow.errors import ConfigError
from deerflow.tools.errors import ToolFailure
from deerflow.web.url_guard import StaticResolver, UrlGuard
from fixtures.web_browser import call, need_chromium, running_manager
from fixtures.web_runtime import tool_runtime
from fixtures.web_server import html, redirect, serve

pytestmark = pytest.mark.integration

SITE_HOST = "127.0.0.2"  # the one loopback address the strict guard treats as public
RESOLVER = StaticResolver({"public.test": [SITE_HOST], "intranet.test": ["10.0.0.7"]})


@pytest.fixture(scope="module")
def site():
    routes = {
        "/": html("<h1>Public page</h1><img src='http://intranet.test/pixel.png' alt='tracker'>"
                  "<p>Welcome.</p>"),
        "/secret": html("<p>internal secret</p>"),
    }
    with serve(routes, host=SITE_HOST) as web:
        web.routes["/to-intranet"] = redirect(f"http://intranet.test:{web.port}/secret")
        web.routes["/to-metadata"] = redirect("http://169.254.169.254/latest/meta-data/")
        web.routes["/to-localhost"] = redirect(f"http://localhost:{web.port}/secret")
        yield web


@pytest.fixture(scope="module")
def strict():
    """A guarded browser: only the test server's loopback address counts as public (as public.test)."""
    guard = UrlGuard(allowed_addresses=[SITE_HOST], resolver=RESOLVER)
    with running_manager(BrowserConfig(enabled=True, max_sessions=2), guard=guard) as manager:
        yield manager


@pytest.mark.parametrize(("url", "reason"), [
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata address 169.254.169.254"),
    ("http://localhost", "localhost names this machine"),
    ("http://2130706433/", "loopback address 127.0.0.1"),
    ("http://0x7f.1/", "loopback address 127.0.0.1"),
    ("http://[::ffff:127.0.0.1]/", "embedded in IPv6 address"),
    ("http://intranet.test/", "intranet.test resolves to private address 10.0.0.7"),
    ("file:///etc/passwd", "not file:"),
    ("ftp://example.org/", "not ftp:"),
])
async def test_navigate_refuses_non_public_urls(tmp_path: Path, strict, url: str, reason: str) -> None:
    runtime = tool_runtime(tmp_path, {"browser": strict}, thread_id="refusals")
    with pytest.raises(ToolFailure) as info:
        await call("browser_navigate", runtime, url=url)
    assert info.value.code == "url_blocked"
    assert reason in info.value.message


@pytest.mark.parametrize(("path", "target", "reason"), [
    ("/to-intranet", "http://intranet.test:{port}/secret", "private address 10.0.0.7"),
    ("/to-metadata", "http://169.254.169.254/latest/meta-data/", "cloud metadata address"),
    ("/to-localhost", "http://localhost:{port}/secret", "localhost names this machine"),
])
async def test_redirect_hops_are_checked_in_the_browser(tmp_path: Path, site, strict, path: str, target: str,
                                                        reason: str) -> None:
    runtime = tool_runtime(tmp_path, {"browser": strict}, thread_id="redirects")
    before = len(site.requests)
    with pytest.raises(ToolFailure) as info:
        await call("browser_navigate", runtime, url=site.url(path, host="public.test"))
    assert info.value.code == "url_blocked"
    assert f"redirected to {target.format(port=site.port)} (hop 1), which was blocked" in info.value.message
    assert reason in info.value.message
    assert "/secret" not in [p for _, p, _ in site.requests[before:]]


async def test_blocked_subresources_are_reported_with_the_page(tmp_path: Path, site, strict) -> None:
    runtime = tool_runtime(tmp_path, {"browser": strict}, thread_id="subresources")
    page = await call("browser_navigate", runtime, url=site.url("/", host="public.test"))
    assert "# Public page" in page.content
    assert "The URL guard blocked" in page.content and "http://intranet.test/pixel.png" in page.content
    assert page.artifact["blocked"][0]["url"] == "http://intranet.test/pixel.png"


async def test_max_sessions_evicts_idle_sessions_and_refuses_when_all_are_pinned(tmp_path: Path, site,
                                                                                 strict) -> None:
    for thread in list(strict.session_threads()):
        await strict.close_session(thread, "u")
    runtimes = {t: tool_runtime(tmp_path, {"browser": strict}, thread_id=t) for t in ("a", "b", "c")}
    await call("browser_navigate", runtimes["a"], url=site.url("/", host="public.test"))
    await call("browser_navigate", runtimes["b"], url=site.url("/", host="public.test"))
    watch_a = strict.live_frames("a", "u")
    watch_b = strict.live_frames("b", "u")
    await anext(watch_a)
    await anext(watch_b)
    with pytest.raises(ToolFailure) as info:  # both sessions are watched (pinned): nothing can be closed
        await call("browser_navigate", runtimes["c"], url=site.url("/", host="public.test"))
    assert info.value.code == "browser_busy"
    assert "limit of 2 session(s)" in info.value.message
    assert sorted(strict.session_threads()) == ["a", "b"]

    await watch_a.aclose()  # "a" is idle and unwatched now: it makes room for "c"
    await call("browser_navigate", runtimes["c"], url=site.url("/", host="public.test"))
    assert sorted(strict.session_threads()) == ["b", "c"]
    await watch_b.aclose()
    again = await call("browser_navigate", runtimes["a"], url=site.url("/", host="public.test"))
    assert "previous browser session was closed (closed to make room" in again.content


def test_idle_sessions_are_closed_in_the_background(tmp_path: Path, site) -> None:
    config = BrowserConfig(enabled=True, idle_timeout=0.5)
    guard = UrlGuard(allowed_addresses=[SITE_HOST], resolver=RESOLVER)
    url = site.url("/", host="public.test")

    async def scenario(manager: BrowserSessionManager) -> None:
        runtime = tool_runtime(tmp_path, {"browser": manager}, thread_id="sleepy")
        await call("browser_navigate", runtime, url=url)
        for _ in range(100):
            if not manager.session_threads():
                break
            await asyncio.sleep(0.1)
        assert manager.session_threads() == []
        with pytest.raises(ToolFailure) as info:
            await call("browser_snapshot", runtime)
        assert "previous browser session was closed (idle for more than 0.5s), so this thread has no open " \
               "browser page; call browser_navigate first" in info.value.message
        page = await call("browser_navigate", runtime, url=url)
        assert "previous browser session" not in page.content  # said once is enough

    with running_manager(config, guard=guard) as manager:
        asyncio.run(scenario(manager))


async def test_cdp_without_opt_in_is_refused_at_startup() -> None:
    manager = BrowserSessionManager(BrowserConfig(enabled=True, cdp_url="http://127.0.0.1:9222"),
                                    config_file="config.yaml")
    with pytest.raises(ConfigError, match="allow_unguarded_cdp: true") as info:
        await manager.start()
    assert "config.yaml" in str(info.value) and "browser.cdp_url" in str(info.value)


async def test_a_missing_browser_is_refused_at_startup(tmp_path: Path) -> None:
    need_chromium()
    manager = BrowserSessionManager(BrowserConfig(enabled=True, executable_path=str(tmp_path / "no-chrome")))
    with pytest.raises(ConfigError, match="does not exist"):
        await manager.start()
    broken = tmp_path / "broken-chrome"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    manager = BrowserSessionManager(BrowserConfig(enabled=True, executable_path=str(broken)))
    with pytest.raises(ConfigError, match="the browser could not be started"):
        await manager.start()


def test_cdp_with_opt_in_drives_an_existing_browser_and_leaves_it_running(tmp_path: Path) -> None:
    """The opt-in path: attach to a Chromium someone else started, browse, detach without killing it."""
    import shutil
    import subprocess
    import time
    import urllib.request

    from fixtures.browser import CHROMIUM_ARGS
    from fixtures.jupyter_process import free_port

    need_chromium()
    chromium = next(p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p)
    port = free_port()
    proc = subprocess.Popen([chromium, *CHROMIUM_ARGS, f"--remote-debugging-port={port}",
                             "--remote-debugging-address=127.0.0.1", f"--user-data-dir={tmp_path / 'profile'}",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cdp = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{cdp}/json/version", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        config = BrowserConfig(enabled=True, cdp_url=cdp, allow_unguarded_cdp=True, allow_private_addresses=True)
        with serve({"/": html("<h1>Attached</h1><p>Driven over CDP.</p>")}) as web, \
                running_manager(config) as manager:
            assert not manager.guarded
            runtime = tool_runtime(tmp_path, {"browser": manager}, thread_id="cdp")
            page = asyncio.run(call("browser_navigate", runtime, url=f"http://127.0.0.1:{web.port}/"))
            assert "Driven over CDP." in page.content
        assert proc.poll() is None  # detaching left the operator's browser running
        targets = json.loads(urllib.request.urlopen(f"{cdp}/json/list", timeout=5).read())
        assert not any("127.0.0.1" in t.get("url", "") for t in targets)  # our pages were closed
    finally:
        proc.terminate()
        proc.wait(timeout=15)

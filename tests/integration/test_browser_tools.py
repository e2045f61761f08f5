"""The browser tools on a real Chromium, against pages served on loopback."""

from __future__ import annotations

import asyncio
import base64
import threading
from pathlib import Path

import pytest

from deerflow.config.schema import BrowserConfig
from deerflow.tools.builtins.browser_tools import browser_tools
from deerflow.tools.errors import ToolFailure
from fixtures.web_browser import PAGES, TOOLS, call, ref_of, running_manager
from fixtures.web_runtime import tool_runtime
from fixtures.web_server import serve

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def site():
    with serve(dict(PAGES)) as web:
        yield web


@pytest.fixture(scope="module")
def browser():
    with running_manager(BrowserConfig(enabled=True, allow_private_addresses=True)) as manager:
        yield manager


async def test_navigate_click_type_submit_back_and_read(tmp_path: Path, site, browser) -> None:
    runtime = tool_runtime(tmp_path, {"browser": browser}, thread_id="flow")
    home = await call("browser_navigate", runtime, url=site.url("/"))
    assert f"Navigated to {site.url('/')} (HTTP 200)." in home.content
    assert "# Bee facts" in home.content and "Bees visit up to 5,000 flowers a day." in home.content
    assert f"Source: {site.url('/')}" in home.content
    assert "evil.example" not in home.content  # hidden text is not part of the snapshot
    order = ref_of(home.content, 'link "Place an order"')
    assert f'[{order}] link "Place an order" -> /form' in home.content

    form = await call("browser_click", runtime, ref=order)
    assert f'Clicked [{order}] link "Place an order".' in form.content and "# Order form" in form.content
    name, color, send = (ref_of(form.content, s) for s in ('textbox "Name"', 'combobox "Color"', 'button "Send"'))
    assert len({order, name, color, send}) == 4  # refs are never reused, even on a new page

    typed = await call("browser_type", runtime, ref=name, text="Ada Lovelace")
    assert f'[{name}] textbox "Name" value="Ada Lovelace"' in typed.content
    chosen = await call("browser_type", runtime, ref=color, text="Blue")
    assert 'selected="Blue"' in chosen.content
    done = await call("browser_click", runtime, ref=send)
    assert "Received: name=Ada+Lovelace&color=Blue" in done.content

    back = await call("browser_back", runtime)
    assert f"Went back to {site.url('/form')}" in back.content

    await call("browser_navigate", runtime, url=site.url("/about"))
    text = await call("browser_get_text", runtime)
    assert "We have kept bees since 1952." in text.content and "Our hives are in Provence." in text.content
    assert text.artifact["url"] == site.url("/about")


async def test_stale_and_unknown_refs_are_clear_errors(tmp_path: Path, site, browser) -> None:
    runtime = tool_runtime(tmp_path, {"browser": browser}, thread_id="stale")
    home = await call("browser_navigate", runtime, url=site.url("/"))
    about = ref_of(home.content, 'link "About us"')
    await call("browser_click", runtime, ref=about)
    with pytest.raises(ToolFailure) as info:
        await call("browser_click", runtime, ref=about)
    assert info.value.code == "stale_ref"
    assert f'ref {about} (link "About us") is stale' in info.value.message
    assert "We have kept bees since 1952." in info.value.message  # the fresh snapshot comes with the error
    with pytest.raises(ToolFailure, match="ref 9999 was never shown") as unknown:
        await call("browser_click", runtime, ref=9999)
    assert unknown.value.code == "unknown_ref"


async def test_screenshot_is_a_png_artifact_in_outputs(tmp_path: Path, site, browser) -> None:
    runtime = tool_runtime(tmp_path, {"browser": browser}, thread_id="shots")
    await call("browser_navigate", runtime, url=site.url("/about"))
    command = await call("browser_screenshot", runtime)
    [path] = command.update["artifacts"]
    assert path == "/mnt/user-data/outputs/screenshots/about-001.png"
    host = runtime.context.paths.outputs / "screenshots" / "about-001.png"
    data = host.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and int.from_bytes(data[16:20], "big") == 1280
    [message] = command.update["messages"]
    assert path in message.content and message.artifact["url"] == site.url("/about")
    named = await call("browser_screenshot", runtime, filename="../../etc/passwd", full_page=True)
    assert named.update["artifacts"] == ["/mnt/user-data/outputs/screenshots/etc-passwd.png"]
    assert "viewed_images" not in named.update  # a text-only model is not sent the picture


async def test_a_vision_model_also_sees_the_screenshot(tmp_path: Path, site, browser) -> None:
    runtime = tool_runtime(tmp_path, {"browser": browser}, thread_id="vision")
    await call("browser_navigate", runtime, url=site.url("/"))
    [screenshot] = [t for t in browser_tools(vision=True) if t.name == "browser_screenshot"]
    command = await screenshot.ainvoke({"type": "tool_call", "id": "c1", "name": "browser_screenshot",
                                        "args": {"runtime": runtime}})
    [(path, image)] = command.update["viewed_images"].items()
    assert path == command.update["artifacts"][0] and image["mime_type"] == "image/png"
    assert base64.b64decode(image["base64"]).startswith(b"\x89PNG\r\n\x1a\n")


async def test_a_thread_without_a_page_is_told_to_navigate_first(tmp_path: Path, browser) -> None:
    runtime = tool_runtime(tmp_path, {"browser": browser}, thread_id="empty")
    for name, args in (("browser_snapshot", {}), ("browser_click", {"ref": 1}), ("browser_back", {})):
        with pytest.raises(ToolFailure, match="call browser_navigate first"):
            await call(name, runtime, **args)
    closed = await call("browser_close", runtime)
    assert closed.content == "This thread had no open browser session."


async def test_sessions_are_per_thread_and_survive_other_loops(tmp_path: Path, site, browser) -> None:
    first = tool_runtime(tmp_path, {"browser": browser}, thread_id="keep")
    other = tool_runtime(tmp_path, {"browser": browser}, thread_id="other")
    await call("browser_navigate", first, url=site.url("/about"))
    await call("browser_navigate", other, url=site.url("/"))

    def from_another_loop() -> str:
        return asyncio.run(call("browser_snapshot", first)).content

    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(from_another_loop()))
    worker.start()
    worker.join(60)
    assert "We have kept bees since 1952." in result[0]
    sync = threading_invoke(TOOLS["browser_snapshot"], first)  # a synchronous invoke from a plain thread
    assert "We have kept bees since 1952." in sync
    closed = await call("browser_close", first)
    assert closed.content == "Closed this thread's browser session."
    assert "keep" not in browser.session_threads() and "other" in browser.session_threads()


def threading_invoke(tool, runtime) -> str:
    """Synchronous ``invoke`` from a plain thread, as LangGraph's sync path does."""
    out: list[str] = []
    worker = threading.Thread(target=lambda: out.append(tool.invoke({"runtime": runtime})))
    worker.start()
    worker.join(60)
    return out[0]


async def test_live_frames_are_jpegs_for_the_owner_only(tmp_path: Path, site, browser) -> None:
    runtime = tool_runtime(tmp_path, {"browser": browser}, thread_id="live", user_id="alice")
    await call("browser_navigate", runtime, url=site.url("/"))
    with pytest.raises(ToolFailure, match="belongs to another user"):
        async for _ in browser.live_frames("live", "mallory"):
            pass
    frames = browser.live_frames("live", "alice", interval=0.1)
    first = await anext(frames)
    assert first.startswith(b"\xff\xd8\xff")
    with pytest.raises(ToolFailure, match="another live viewer"):
        await anext(browser.live_frames("live", "alice"))
    await call("browser_navigate", runtime, url=site.url("/about"))
    second = await anext(frames)
    for _ in range(20):  # an unchanged page may be repeated (keepalive) before the new one shows
        if second != first:
            break
        second = await anext(frames)
    assert second != first and second.startswith(b"\xff\xd8\xff")
    await frames.aclose()
    again = browser.live_frames("live", "alice")  # the viewer slot is free again
    assert (await anext(again)).startswith(b"\xff\xd8\xff")
    await again.aclose()

"""The browser tools' blocking work has a deadline: a URL check whose name lookup never answers,
or a screenshot save on a stalled disk, tells the model in one line (``tool_timeout``) once the
deadline passes, the event loop keeps turning meanwhile, and nothing is saved half-way.

Hung calls wait on a ``threading.Event`` the test sets at the end (:mod:`fixtures.hung_disk`); no
timing is asserted.  On the old code (``asyncio.to_thread``, no deadline) the hung call never
returns and the hang guard fails the test.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Iterator
from typing import Any

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.persistence.offloop import OFF_LOOP
from deerflow.tools.builtins import browser_tools
from deerflow.tools.offload import Offloader
from fixtures.hung_disk import GUARD_S, SHORT_S, hung_disk, responsive, stall
from fixtures.tool_runtime import make_runtime


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The "disk": calls replaced with :func:`stall` wait until this is set (always, at the end)."""
    yield from hung_disk(monkeypatch, (browser_tools, "URL_CHECK_DEADLINE_S"), (browser_tools, "SAVE_DEADLINE_S"))



async def failure_of(call: Awaitable[Any]) -> tuple[ToolFailure, int]:
    """The ToolFailure ``call`` raises and how often the event loop turned while it was awaited."""
    failure, turns = await responsive(call)
    assert isinstance(failure, ToolFailure), failure
    return failure, turns


async def test_a_url_check_that_never_answers_is_a_one_line_timeout(tmp_path, disk, monkeypatch):
    stall(monkeypatch, browser_tools, "_check_url", disk)
    offloader = Offloader()
    runtime = make_runtime(ThreadPaths(tmp_path / "t").ensure(), offloader=offloader)
    failure, turns = await failure_of(browser_tools.abrowser_navigate("https://example.com", runtime))
    assert failure.code == "tool_timeout" and "\n" not in failure.message
    assert failure.message.startswith(f"checking the URL did not finish within {SHORT_S:g}s")
    assert turns > 0 and offloader.in_flight("t") == 1 and OFF_LOOP.stuck() == 0


async def test_a_screenshot_save_on_a_hung_disk_is_a_one_line_timeout_and_saves_nothing(tmp_path, disk, monkeypatch):
    async def page(runtime: Any, action: Any, *, create: bool = True) -> Any:
        return (b"\x89PNG fake", "https://example.com/", "Example"), []

    monkeypatch.setattr(browser_tools, "_act", page)
    stall(monkeypatch, browser_tools, "save_screenshot", disk)
    paths = ThreadPaths(tmp_path / "t").ensure()
    runtime = make_runtime(paths, offloader=Offloader())
    shoot = browser_tools.make_screenshot(vision=False)
    failure, turns = await failure_of(shoot(runtime, filename="page"))
    assert failure.code == "tool_timeout" and "\n" not in failure.message
    assert failure.message.startswith(f"saving the screenshot did not finish within {SHORT_S:g}s")
    assert turns > 0 and not list(paths.outputs.rglob("*.png"))  # nothing saved while it hangs


async def test_a_credential_save_on_a_hung_disk_is_a_one_line_503_and_the_file_is_unchanged(
        deerflow_home, disk, monkeypatch):
    """Not a tool: the embedded client's ``set_user_credential`` (a request) goes through off_loop."""
    from deerflow.config.paths import HomePaths
    from deerflow.mcp.credentials import UserCredential, UserCredentialStore
    from deerflow.persistence.offloop import DiskUnavailable

    store = UserCredentialStore(HomePaths(deerflow_home))
    await store.aset("alice", "github", UserCredential(token="old-token"))
    before = store.get("alice", "github")
    stall(monkeypatch, UserCredentialStore, "set", disk)
    with pytest.raises(DiskUnavailable) as raised:
        await asyncio.wait_for(store.aset("alice", "github", UserCredential(token="new-token")), GUARD_S)
    message = str(raised.value)
    assert message.startswith(f"saving the credential for MCP server 'github' did not finish within {SHORT_S:g} s")
    assert "try again shortly" in message and "\n" not in message and "token" not in message
    assert store.get("alice", "github") == before  # the old credential, whole

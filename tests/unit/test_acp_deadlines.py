"""The ACP tool's file work has a deadline: a workspace listing, a workspace open or a file the
agent reads or writes that hangs (a stalled mount, a held lock) is answered once the deadline
passes (the model with a one-line ``tool_timeout``, the agent with a request error), the event
loop keeps turning meanwhile, and nothing is lost: before the agent starts, nothing is started;
after it answered, its answer is kept; a hung write lands whole or not at all.

Hung calls wait on a ``threading.Event`` the test sets at the end (:mod:`fixtures.hung_disk`); no
timing is asserted.  On the old code (``asyncio.to_thread``, no deadline) the hung call never
returns and the hang guard fails the test.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deerflow.acp import session
from deerflow.acp.session import AcpInvocation, invoke
from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AcpAgentConfig
from deerflow.errors import ToolFailure
from deerflow.persistence.offloop import OFF_LOOP
from deerflow.threadfs import SafeDir
from deerflow.tools.builtins import acp_tools
from deerflow.tools.offload import Offloader
from fixtures.hung_disk import GUARD_S, SHORT_S, hung_disk, responsive, stall
from fixtures.tool_runtime import make_runtime

AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "acp_file_agent.py"


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The "disk": calls replaced with :func:`stall` wait until this is set (always, at the end)."""
    yield from hung_disk(monkeypatch, (session, "FILE_DEADLINE_S"), (acp_tools, "SNAPSHOT_DEADLINE_S"))


def config() -> AcpAgentConfig:
    return AcpAgentConfig(command=sys.executable, args=[str(AGENT)], permissions="allow")



@pytest.mark.parametrize(("call", "request_", "what"), [
    ("read_bytes", {"op": "read", "path": "notes.txt"}, "reading 'notes.txt'"),
    ("write_text", {"op": "write", "path": "notes.txt", "content": "new\n"}, "writing 'notes.txt'"),
])
async def test_a_hung_file_the_agent_asks_for_is_a_request_error_and_the_agent_answers(
        tmp_path, disk, monkeypatch, call, request_, what):
    workspace = tmp_path / "acp-workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("old\n")
    offloader = Offloader()
    invocation = AcpInvocation(name="files", config=config(), workspace=workspace, attended=True,
                               offloader=offloader, key="t")
    stall(monkeypatch, SafeDir, call, disk)
    result, turns = await responsive(invoke(invocation, json.dumps(request_)))
    assert result.text.startswith("refused:") and f"{what} did not finish within {SHORT_S:g}s" in result.text
    assert str(workspace) not in result.text.split("'reason'")[1]  # the reason names no host path
    assert turns > 0 and offloader.in_flight("t") == 1 and OFF_LOOP.stuck() == 0
    assert (workspace / "notes.txt").read_text() == "old\n"  # nothing written while it hangs
    disk.set()  # the abandoned write lands whole (a new file renamed over the old one)
    async with asyncio.timeout(GUARD_S):
        while offloader.in_flight():
            await asyncio.sleep(0.01)
    assert (workspace / "notes.txt").read_text() in ("old\n", "new\n")


def runtime(tmp_path: Path, offloader: Offloader) -> Any:
    return make_runtime(ThreadPaths(tmp_path / "thread").ensure(), offloader=offloader)


async def test_a_hung_workspace_listing_before_the_agent_starts_nothing(tmp_path, disk, monkeypatch):
    started: list[str] = []
    monkeypatch.setattr(session, "invoke", lambda *a: started.append("agent"))
    stall(monkeypatch, acp_tools, "_snapshot", disk)
    offloader = Offloader()
    failure, turns = await responsive(acp_tools._call("files", config(), "{}", runtime(tmp_path, offloader).context))
    assert isinstance(failure, ToolFailure) and failure.code == "tool_timeout"
    assert failure.message.startswith(f"listing /mnt/acp-workspace did not finish within {SHORT_S:g}s")
    assert "\n" not in failure.message and turns > 0 and started == []


async def test_a_hung_listing_after_the_agent_answered_keeps_its_answer(tmp_path, disk, monkeypatch):
    real = acp_tools._snapshot
    calls: list[Path] = []

    def second_hangs(root: Path) -> dict[str, tuple[int, int]]:
        calls.append(root)
        if len(calls) == 2:
            disk.wait(GUARD_S)
        return real(root)

    monkeypatch.setattr(acp_tools, "_snapshot", second_hangs)
    context = runtime(tmp_path, Offloader()).context
    context.paths.acp_workspace.mkdir(parents=True, exist_ok=True)
    (context.paths.acp_workspace / "notes.txt").write_text("agent notes\n")
    text, turns = await responsive(acp_tools._call("files", config(), json.dumps({"op": "read", "path": "notes.txt"}),
                                                   context))
    assert text.startswith("agent notes") and turns > 0
    assert f"(The files written by the agent could not be listed: listing /mnt/acp-workspace did not finish " \
           f"within {SHORT_S:g}s" in text


async def test_a_workspace_that_opens_after_its_deadline_starts_nothing_and_is_closed(tmp_path, disk, monkeypatch):
    opened: list[SafeDir] = []
    real = session._open_workspace

    def slow_open(invocation: AcpInvocation) -> SafeDir:
        disk.wait(GUARD_S)
        opened.append(real(invocation))
        return opened[-1]

    monkeypatch.setattr(session, "_open_workspace", slow_open)
    started: list[str] = []
    monkeypatch.setattr(session, "_converse", lambda *a, **k: started.append("agent"))
    offloader = Offloader()
    invocation = AcpInvocation(name="files", config=config(), workspace=tmp_path / "acp-workspace", attended=True,
                               offloader=offloader, key="t")
    failure, turns = await responsive(invoke(invocation, "{}"))
    assert isinstance(failure, ToolFailure) and failure.code == "tool_timeout" and turns > 0
    assert failure.message.startswith(f"opening ACP agent 'files''s workspace did not finish within {SHORT_S:g}s")
    disk.set()  # the open ends after its caller gave up: its descriptor is closed, not leaked
    async with asyncio.timeout(GUARD_S):
        while offloader.in_flight():
            await asyncio.sleep(0.01)
    assert len(opened) == 1 and opened[0].fd < 0 and started == []

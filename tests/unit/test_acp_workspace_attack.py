"""Where an ACP agent works, against a workspace (or the thread folder above it) swapped for a link.

The host opened ``acp-workspace`` (no link followed at its name), then started the agent with
``cwd=<the path>`` and told it ``cwd=<the path, resolved>`` in ``session/new``: a link swapped in
between the open and the start sent the agent, and every file its own tools write, into any
directory the link named.  The tests win that race every time, by swapping the moment before
the agent process is spawned; the agent (tests/fixtures/acp_file_agent.py, ``where``) writes a
marker into its working directory by itself and reports where it is and what it was told.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deerflow.acp import session
from deerflow.acp.session import AcpError, AcpInvocation, invoke
from deerflow.config.schema import AcpAgentConfig

AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "acp_file_agent.py"
WHERE = json.dumps({"op": "where"})


def _invocation(workspace: Path) -> AcpInvocation:
    cfg = AcpAgentConfig(command=sys.executable, args=[str(AGENT)], permissions="allow")
    return AcpInvocation(name="files", config=cfg, workspace=workspace, attended=True)


def _swap_before_spawn(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """The attacker wins the race: ``swap`` runs after the host opened the workspace, just before the spawn."""
    spawn = session.spawn_agent_process

    def swapped_then_spawned(*args: Any, **kwargs: Any) -> Any:
        swap()
        return spawn(*args, **kwargs)

    monkeypatch.setattr(session, "spawn_agent_process", swapped_then_spawned)


def _link_in_place_of(folder: Path, target: Path) -> Callable[[], None]:
    """Move ``folder`` aside (to ``<name>-old``) and leave a link to ``target`` at its name."""
    def swap() -> None:
        folder.rename(folder.with_name(folder.name + "-old"))
        folder.symlink_to(target, target_is_directory=True)
    return swap


@pytest.fixture
def thread(tmp_path: Path) -> Path:
    """A thread folder with its ACP workspace, and a victim directory beside it."""
    root = tmp_path / "threads" / "t1"
    (root / "acp-workspace").mkdir(parents=True)
    (tmp_path / "victim").mkdir()
    return root


def _answer(text: str) -> dict[str, str]:
    return json.loads(text)


async def test_a_workspace_swapped_for_a_link_as_the_agent_starts_is_not_entered(thread, monkeypatch) -> None:
    workspace, victim = thread / "acp-workspace", thread.parents[1] / "victim"
    _swap_before_spawn(monkeypatch, _link_in_place_of(workspace, victim))
    where = _answer((await invoke(_invocation(workspace), WHERE)).text)
    held = os.path.realpath(thread / "acp-workspace-old")
    assert not (victim / "marker.txt").exists()
    assert (thread / "acp-workspace-old" / "marker.txt").read_text() == "the agent was here\n"
    assert where == {"getcwd": held, "cwd": held}  # told the folder it really is in, not the link's target


async def test_a_thread_folder_swapped_for_a_link_as_the_agent_starts_is_not_entered(thread, monkeypatch) -> None:
    other = thread.parent / "other-thread"  # another thread's workspace: the link's target
    (other / "acp-workspace").mkdir(parents=True)
    _swap_before_spawn(monkeypatch, _link_in_place_of(thread, other))
    where = _answer((await invoke(_invocation(thread / "acp-workspace"), WHERE)).text)
    held = thread.with_name("t1-old") / "acp-workspace"
    assert not (other / "acp-workspace" / "marker.txt").exists()
    assert (held / "marker.txt").exists()
    assert where == {"getcwd": os.path.realpath(held), "cwd": os.path.realpath(held)}


async def test_a_workspace_that_is_already_a_link_is_refused(thread) -> None:
    workspace, victim = thread / "acp-workspace", thread.parents[1] / "victim"
    workspace.rmdir()
    workspace.symlink_to(victim, target_is_directory=True)
    with pytest.raises(AcpError) as refused:
        await invoke(_invocation(workspace), WHERE)
    assert refused.value.code == "acp_workspace_unsafe"
    assert not (victim / "marker.txt").exists()


async def test_the_agent_works_and_serves_files_in_a_plain_workspace(thread) -> None:
    workspace = thread / "acp-workspace"
    where = _answer((await invoke(_invocation(workspace), WHERE)).text)
    assert where == {"getcwd": os.path.realpath(workspace), "cwd": os.path.realpath(workspace)}
    (workspace / "notes.txt").write_text("agent notes\n")
    read = await invoke(_invocation(workspace), json.dumps({"op": "read", "path": "notes.txt"}))
    assert read.text == "agent notes\n"

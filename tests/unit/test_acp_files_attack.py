"""The ACP client's file service against a workspace that changes under it.

The agent (and so the prompt the lead agent writes for it) shapes the ACP workspace, and the
sandbox reads it.  The client checked a path (resolving links) and then read or wrote it by
name again: a link swapped in between the two reached any host file.  The tests make the
attacker win that race every time, by swapping right after the check returns.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from deerflow.acp import session
from deerflow.acp.session import AcpInvocation, invoke
from deerflow.config.schema import AcpAgentConfig

AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "acp_file_agent.py"


def _invocation(workspace: Path) -> AcpInvocation:
    cfg = AcpAgentConfig(command=sys.executable, args=[str(AGENT)], permissions="allow")
    return AcpInvocation(name="files", config=cfg, workspace=workspace, attended=True)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("host secret\n")
    workspace = tmp_path / "acp-workspace"
    workspace.mkdir()
    return workspace, host / "secret.txt"


def _swap_after_check(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """The attacker wins the race: ``swap`` runs the moment the client's path check returns."""
    check = session._WorkspaceClient._inside

    def checked_then_swapped(self, path: str):
        result = check(self, path)
        swap()
        return result

    monkeypatch.setattr(session._WorkspaceClient, "_inside", checked_then_swapped)


def _plant_link(at: Path, target: Path) -> Callable[[], None]:
    def swap() -> None:
        staged = at.with_name(".staged-link")
        staged.symlink_to(target)
        os.replace(staged, at)  # atomic: a file one moment, a link to the host the next
    return swap


async def test_a_link_swapped_in_after_the_check_is_not_read(layout, monkeypatch) -> None:
    workspace, secret = layout
    (workspace / "notes.txt").write_text("agent notes\n")
    _swap_after_check(monkeypatch, _plant_link(workspace / "notes.txt", secret))
    result = await invoke(_invocation(workspace), json.dumps({"op": "read", "path": "notes.txt"}))
    assert "host secret" not in result.text
    assert result.text.startswith("refused:") and "symbolic link" in result.text


async def test_a_link_swapped_in_after_the_check_is_not_written_through(layout, monkeypatch) -> None:
    workspace, secret = layout
    (workspace / "out.txt").write_text("old\n")
    _swap_after_check(monkeypatch, _plant_link(workspace / "out.txt", secret))
    result = await invoke(_invocation(workspace), json.dumps({"op": "write", "path": "out.txt", "content": "pwned\n"}))
    assert secret.read_text() == "host secret\n"
    assert result.text == "wrote"  # the new file replaced the link, in the workspace
    assert not (workspace / "out.txt").is_symlink() and (workspace / "out.txt").read_text() == "pwned\n"


async def test_a_folder_swapped_for_a_link_after_the_check_is_not_entered(layout, monkeypatch) -> None:
    workspace, secret = layout
    (workspace / "sub").mkdir()
    (workspace / "sub" / "secret.txt").write_text("agent file\n")

    def swap() -> None:
        os.rename(workspace / "sub", workspace / "sub-old")
        (workspace / "sub").symlink_to(secret.parent)

    _swap_after_check(monkeypatch, swap)
    result = await invoke(_invocation(workspace), json.dumps({"op": "read", "path": "sub/secret.txt"}))
    assert "host secret" not in result.text and result.text.startswith("refused:")


async def test_plain_files_and_the_bounds_still_work(layout) -> None:
    workspace, _ = layout
    (workspace / "a").mkdir()
    (workspace / "a" / "b.txt").write_text("hello\n")
    read = await invoke(_invocation(workspace), json.dumps({"op": "read", "path": "a/b.txt"}))
    assert read.text == "hello\n"
    wrote = await invoke(_invocation(workspace), json.dumps({"op": "write", "path": "new/c.txt", "content": "x"}))
    assert wrote.text == "wrote" and (workspace / "new" / "c.txt").read_text() == "x"
    outside = await invoke(_invocation(workspace), json.dumps({"op": "read", "path": "../host/secret.txt"}))
    assert outside.text.startswith("refused:") and "outside" in outside.text
    missing = await invoke(_invocation(workspace), json.dumps({"op": "read", "path": "nope.txt"}))
    assert missing.text.startswith("refused:")

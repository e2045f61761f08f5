"""Directory listings the agent can make arbitrarily big run off the event loop, bounded.

The uploads listing (before every model call) and the ACP workspace snapshot (before and after
every ACP call) read directories whose size is not the host's to decide; run on the server's
event loop they stalled every other thread's stream while they listed.  The tests record the
thread each listing runs in and count the entries it reads.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deerflow.agents.middlewares.uploads import UploadsMiddleware
from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.config.schema import AcpAgentConfig, AppConfig
from deerflow.runtime.context import RunContext
from deerflow.sandbox.files import uploads
from deerflow.threadfs import SafeDir
from deerflow.tools.builtins import acp_tools

AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "acp_file_agent.py"


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    return HomePaths(tmp_path / "home").thread("alice", "t1").ensure()


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(thread name, entries read) for every directory listing made through SafeDir."""
    seen: list[tuple[str, int]] = []
    scandir = SafeDir.scandir

    def recorded(self: SafeDir, rel: str = "", **kwargs: Any):
        out = scandir(self, rel, **kwargs)
        seen.append((threading.current_thread().name, len(out)))
        return out

    monkeypatch.setattr(SafeDir, "scandir", recorded)
    return seen


def _fill(directory: Path, count: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (directory / f"f{i:05d}.txt").write_bytes(b"")


async def test_the_uploads_note_lists_off_the_loop_and_bounded(thread: ThreadPaths, listings) -> None:
    _fill(thread.uploads, uploads.LISTING_MAX_ENTRIES + 500)  # what a stray process could leave there
    ctx = RunContext(user_id="alice", thread_id="t1", run_id="r1", paths=thread, config=AppConfig())
    runtime: Any = SimpleNamespace(context=ctx)
    update = await UploadsMiddleware().abefore_model({"messages": []}, runtime)
    assert update is not None
    assert listings and all(name != threading.current_thread().name for name, _ in listings)
    assert all(count <= uploads.LISTING_MAX_ENTRIES for _, count in listings)
    assert len(update["uploaded_files"]) <= uploads.LISTING_MAX_ENTRIES


async def test_the_acp_workspace_snapshot_runs_off_the_loop_and_bounded(thread: ThreadPaths, listings) -> None:
    cap = getattr(acp_tools, "SNAPSHOT_MAX_ENTRIES", 2000)  # 2000: what the old snapshot took
    for d in range(3):
        _fill(thread.acp_workspace / f"d{d}", cap)
    context: Any = SimpleNamespace(paths=thread, services=SimpleNamespace(mcp_server_configs=None),
                                   interaction=SimpleNamespace(attended=True))
    config = AcpAgentConfig(command=sys.executable, args=[str(AGENT)], permissions="allow")
    prompt = json.dumps({"op": "write", "path": "d0/f00000.txt", "content": "changed"})
    loop_thread = threading.current_thread().name
    text = await acp_tools._call("files", config, prompt, context)
    assert "wrote" in text and "/mnt/acp-workspace/d0/f00000.txt" in text
    assert listings and all(name != loop_thread for name, _ in listings)
    assert sum(count for _, count in listings) <= 3 * cap  # two walks, both capped


def test_a_bounded_walk_reads_no_more_than_it_may_yield(tmp_path: Path, listings) -> None:
    _fill(tmp_path / "big", 3000)
    with SafeDir.open(tmp_path) as root:
        assert len(list(root.walk(max_entries=50))) == 50
    assert sum(count for _, count in listings) <= 100

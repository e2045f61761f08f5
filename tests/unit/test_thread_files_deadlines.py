"""ThreadFiles waits for its file work at most a deadline (``off_loop``), and a descriptor opened
by a call its caller gave up on is closed when that call ends.

Hung calls wait on a ``threading.Event`` set at the end; no timing is asserted (a short deadline
so the tests are quick, a long hang guard so a slow machine still passes).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deerflow.config.paths import HomePaths
from deerflow.config.schema import UploadsConfig
from deerflow.persistence.offloop import OFF_LOOP, DiskUnavailable
from deerflow.runs import thread_files
from deerflow.runs.thread_files import ThreadFiles, open_off_loop
from deerflow.sandbox.files.virtual_paths import VirtualFS
from fixtures.hung_disk import GUARD_S, SHORT_S, hung_disk, stall


class Threads:
    """One thread, t1, of alice's, with no artifacts."""

    async def athread(self, thread_id: str, user_id: str) -> Any:
        return thread_id

    async def thread_values(self, thread_id: str, user_id: str) -> dict[str, Any]:
        return {"artifacts": []}


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    yield from hung_disk(monkeypatch, (thread_files, "EXPORT_DEADLINE_SECONDS"))


def service(tmp_path: Path) -> ThreadFiles:
    outputs = HomePaths(tmp_path / "home").thread("alice", "t1").ensure().outputs
    outputs.mkdir(parents=True, exist_ok=True)
    (outputs / "report.md").write_bytes(b"# Report\n")
    return ThreadFiles(HomePaths(tmp_path / "home"), Threads(), lambda: UploadsConfig())


async def until_nothing_is_stuck() -> None:
    async with asyncio.timeout(GUARD_S):
        while OFF_LOOP.stuck():
            await asyncio.sleep(0.01)


async def test_a_hung_artifact_read_is_disk_unavailable_naming_what_was_done(tmp_path, disk, monkeypatch):
    files = service(tmp_path)
    stall(monkeypatch, VirtualFS, "read_output", disk)
    with pytest.raises(DiskUnavailable) as failed:
        await files.read_artifact("alice", "t1", "report.md")
    assert str(failed.value).startswith(f"reading the artifact did not finish within {SHORT_S:g} s")
    disk.set()
    await until_nothing_is_stuck()
    monkeypatch.setattr(OFF_LOOP, "deadline", GUARD_S)
    assert (await files.read_artifact("alice", "t1", "report.md")).data == b"# Report\n"


async def test_a_hung_export_has_its_own_deadline(tmp_path, disk, monkeypatch):
    import io

    files = service(tmp_path)
    monkeypatch.setattr(OFF_LOOP, "deadline", GUARD_S)  # only the export's own deadline is short
    stall(monkeypatch, thread_files, "write_export", disk)
    with pytest.raises(DiskUnavailable) as failed:
        await files.export("alice", "t1", io.BytesIO())
    assert str(failed.value).startswith(f"exporting the thread did not finish within {SHORT_S:g} s")


async def test_an_open_past_its_deadline_closes_its_descriptor_when_it_ends(tmp_path, disk, monkeypatch):
    files = service(tmp_path)
    opened: list[int] = []
    real = VirtualFS.open_output

    def stalled(self: VirtualFS, path: str) -> Any:
        disk.wait(GUARD_S)
        located, fd = real(self, path)
        opened.append(fd)
        return located, fd

    monkeypatch.setattr(VirtualFS, "open_output", stalled)
    with pytest.raises(DiskUnavailable, match=r"^opening the artifact did not finish"):
        await files.open_artifact("alice", "t1", "report.md")
    disk.set()  # the open ends after its caller gave up: nobody holds the descriptor, so it is closed
    await until_nothing_is_stuck()
    assert len(opened) == 1
    try:  # closed (its number may since name another file, never this one)
        still = os.readlink(f"/proc/self/fd/{opened[0]}")
    except OSError:
        still = ""
    assert not still.endswith("report.md")


async def test_open_off_loop_hands_over_what_it_opened_or_closes_it(disk):
    closed: list[str] = []
    assert await open_off_loop(lambda: "file", closed.append, what="opening") == "file"
    assert closed == []

    def hung() -> str:
        disk.wait(GUARD_S)
        return "late file"

    with pytest.raises(DiskUnavailable, match=r"^opening did not finish"):
        await open_off_loop(hung, closed.append, what="opening")
    disk.set()
    await until_nothing_is_stuck()
    assert closed == ["late file"]

    def refused() -> str:
        raise FileNotFoundError("no such file")

    with pytest.raises(FileNotFoundError):  # the opener's own error passes through; nothing to close
        await open_off_loop(refused, closed.append, what="opening")
    assert closed == ["late file"]

"""A subagent's file criteria are checked with a deadline: a check that hangs (a stalled mount, a
held lock) makes that criterion ``UNVERIFIED`` with a one-line reason once the deadline passes, the
event loop keeps turning meanwhile, and the other criteria are still checked.

Hung calls wait on a ``threading.Event`` the test sets at the end (:mod:`fixtures.hung_disk`); no
timing is asserted.  On the old code (``asyncio.to_thread``, no deadline) the check never returns
and the hang guard fails the test.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.persistence.offloop import OFF_LOOP
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.subagents import acceptance
from deerflow.subagents.acceptance import AcceptanceContext, check_acceptance, snapshot_targets
from deerflow.tools.offload import Offloader
from fixtures.hung_disk import GUARD_S, SHORT_S, hung_disk, responsive, stall

OUT = "/mnt/user-data/outputs"


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The "disk": calls replaced with :func:`stall` wait until this is set (always, at the end)."""
    yield from hung_disk(monkeypatch, (acceptance, "CHECK_DEADLINE_S"))


@pytest.fixture
def thread(tmp_path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "users" / "u" / "threads" / "t").ensure()


@pytest.mark.parametrize(("call", "criterion"), [("_check_file", f"file:{OUT}/report.md exists"),
                                                 ("file_state", f"file_written:{OUT}/report.md")])
async def test_a_hung_file_check_is_unverified_in_one_line_and_the_rest_are_checked(
        thread, disk, monkeypatch, call, criterion):
    (thread.outputs / "report.md").write_text("# done")
    criteria = [criterion, "it reads well"]
    vfs = VirtualFS(thread)
    offloader = Offloader()
    ctx = AcceptanceContext(thread, vfs, None, snapshot_targets(criteria, vfs), command_timeout=60,
                            offloader=offloader, key="t")
    stall(monkeypatch, acceptance, call, disk)
    report, turns = await responsive(check_acceptance(criteria, ctx))
    hung, free = report.results
    assert hung.verdict == "UNVERIFIED" and free.verdict == "UNVERIFIED" and report.overall == "UNVERIFIED"
    assert hung.reason.startswith(f"could not check it: checking {OUT}/report.md did not finish within {SHORT_S:g}s")
    assert "\n" not in hung.reason and str(thread.root) not in hung.reason
    assert turns > 0  # the event loop kept turning while the check hung
    assert offloader.in_flight("t") == 1 and OFF_LOOP.stuck() == 0  # the conversation's thread, not the server's


async def test_a_hung_snapshot_before_the_delegation_refuses_it_in_one_line(thread, disk, monkeypatch):
    """The ``file_written`` targets' state before the subagent starts is read off the loop: a hung
    read refuses the delegation (its targets could not be compared after), nothing started."""
    from deerflow.errors import ToolFailure

    monkeypatch.setattr(acceptance, "SNAPSHOT_DEADLINE_S", SHORT_S)
    criteria = [f"file_written:{OUT}/report.md"]
    vfs = VirtualFS(thread)
    assert await acceptance.asnapshot_targets(["it reads well"], vfs) == {}  # nothing to read: no thread
    stall(monkeypatch, acceptance, "file_state", disk)
    offloader = Offloader()
    with pytest.raises(ToolFailure) as raised:
        await asyncio.wait_for(acceptance.asnapshot_targets(criteria, vfs, offloader=offloader, key="t"), GUARD_S)
    assert raised.value.code == "tool_timeout" and "\n" not in raised.value.message
    assert raised.value.message.startswith("reading the files the acceptance criteria name did not finish within "
                                           f"{SHORT_S:g}s")
    assert OFF_LOOP.stuck() == 0 and offloader.in_flight("t") == 1

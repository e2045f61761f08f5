"""``RunManager.start`` does a new thread's file work off the event loop: while the thread's skills
view is being copied (stalled here, as on a loaded disk), the loop goes on serving others; and with a
deadline: a read that never answers refuses the run instead of holding it forever."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from deerflow.client import AsyncDeerFlowClient
from deerflow.persistence.offloop import OFF_LOOP, DiskUnavailable
from deerflow.runs import manager as manager_module
from deerflow.skills import run as skills_run

pytestmark = pytest.mark.integration


async def test_the_skills_view_is_copied_while_the_loop_serves_others(deerflow_home: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    copying = threading.Event()
    served = threading.Event()  # set by a task on the loop once the copy has begun: only if the loop is free
    seen: list[bool] = []
    copy = skills_run.project_skills

    def stalled_copy(*args: Any, **kwargs: Any) -> Any:
        copying.set()
        seen.append(served.wait(timeout=10))  # on the loop's thread, this would wait out its timeout
        return copy(*args, **kwargs)

    monkeypatch.setattr(skills_run, "project_skills", stalled_copy)

    async def other_work() -> None:
        while not copying.is_set():
            await asyncio.sleep(0.01)
        served.set()

    client = AsyncDeerFlowClient(home=deerflow_home)
    try:
        other = asyncio.create_task(other_work())
        result = await client.chat("Write me a report")
        await other
    finally:
        await client.aclose()
    assert seen == [True] and result.status == "success"


async def test_a_run_whose_skills_do_not_answer_is_refused_not_hung(deerflow_home: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The skills' read past its deadline refuses the run (503-like, one line) before anything is
    written; once the disk answers again, runs start as before."""
    disk = threading.Event()
    prepare = manager_module.prepare_run_skills

    def stalled_prepare(*args: Any, **kwargs: Any) -> Any:
        disk.wait(60)
        return prepare(*args, **kwargs)

    monkeypatch.setattr(manager_module, "prepare_run_skills", stalled_prepare)
    monkeypatch.setattr(OFF_LOOP, "deadline", 0.5)
    client = AsyncDeerFlowClient(home=deerflow_home)
    try:
        with pytest.raises(DiskUnavailable) as refused:
            await asyncio.wait_for(client.chat("Write me a report"), 60)  # the hang guard: the old code waits
        assert str(refused.value).startswith("reading the skills did not finish within 0.5 s")
        assert await client.threads() == []  # refused before a thread or a run was written
        disk.set()
        async with asyncio.timeout(60):
            while OFF_LOOP.stuck():
                await asyncio.sleep(0.02)
        monkeypatch.setattr(OFF_LOOP, "deadline", 60.0)
        assert (await client.chat("Write me a report")).status == "success"
    finally:
        disk.set()
        await client.aclose()

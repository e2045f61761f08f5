"""``RunManager.start`` does a new thread's file work off the event loop: while the thread's skills
view is being copied (stalled here, as on a loaded disk), the loop goes on serving others."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from deerflow.client import AsyncDeerFlowClient
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

"""A single-user server's scheduler runs its owner's schedules only.

Under JupyterHub every user's server shares one ``DEERFLOW_HOME`` (docs/DEPLOYMENT.md): without
this, alice's server would run bob's due schedules — in alice's process, with her privileges.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths
from deerflow.scheduling import ScheduleBook
from deerflow_jupyter.host import HarnessHost
from deerflow_jupyter.scheduler import ServerScheduler

pytestmark = pytest.mark.integration

CONFIG = """
models:
  - name: note
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: Noted.
"""


def make_due(home: Path, schedule_id: str) -> None:
    with sqlite3.connect(home / "deerflow.db") as db:
        db.execute("UPDATE schedules SET next_run_at=? WHERE schedule_id=?", (time.time() - 1, schedule_id))


async def test_the_owners_due_schedule_runs_and_another_users_does_not(deerflow_home, tmp_path):
    (tmp_path / "config.yaml").write_text(CONFIG)
    home = HomePaths(deerflow_home)
    alice, bob = ScheduleBook(home, "alice"), ScheduleBook(home, "bob")
    mine = await asyncio.to_thread(alice.add, cron="0 * * * *", prompt="Note it", timezone="UTC")
    theirs = await asyncio.to_thread(bob.add, cron="0 * * * *", prompt="Note it", timezone="UTC")
    for schedule in (mine, theirs):
        make_due(deerflow_home, schedule.schedule_id)
    host = HarnessHost(config_path=str(tmp_path / "config.yaml"), home=str(deerflow_home))
    scheduler = ServerScheduler(host, interval=0.2, user_id="alice")
    scheduler.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not [
                r for r in await asyncio.to_thread(alice.runs, mine.schedule_id) if r.finished_at]:
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # several more ticks: bob's schedule is due all along
    finally:
        await scheduler.stop()
        await host.close()
    assert [r.status for r in await asyncio.to_thread(alice.runs, mine.schedule_id)] == ["success"]
    assert await asyncio.to_thread(bob.runs, theirs.schedule_id) == []
    assert (await asyncio.to_thread(bob.get, theirs.schedule_id)).next_run_at < time.time()  # still due, for bob's own server

"""Scheduled runs on a shared PostgreSQL: two servers on two machines, each schedule runs exactly once.

The servers share only ``storage.url`` (each has a ``$DEERFLOW_HOME`` of its own, as on two
machines): the claim is a lease row in the database, not a file lock, so of two schedulers ticking
at the same moment exactly one runs the due schedule, and the other finds nothing to do.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import yaml

from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.persistence import pgsql
from deerflow.runs.manager import RunManager
from deerflow.scheduling import ScheduleBook, Scheduler, ScheduleStore

pytestmark = pytest.mark.integration


async def test_two_servers_on_one_postgresql_run_a_due_schedule_once(postgres_url: str, tmp_path: Path) -> None:
    import psycopg

    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [{"text": "Digest written."}]}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "models": [{"name": "s", "use": "deerflow.models.scripted:ScriptedChatModel", "script": str(script)}],
        "storage": {"url": postgres_url}, "memory": {"enabled": False}}))
    loaded = load_config(config)
    homes = [HomePaths(tmp_path / name).with_storage(loaded.config.storage) for name in ("machine-a", "machine-b")]
    schedule = await asyncio.to_thread(ScheduleBook(homes[0], "local").add, cron="*/5 * * * *",
                                       prompt="Write the daily digest")
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # its slot came a minute ago
        conn.execute("UPDATE schedules SET next_run_at=%s WHERE schedule_id=%s",
                     (time.time() - 60, schedule.schedule_id))
    managers = [await RunManager.open(loaded=loaded, home=home) for home in homes]
    try:
        schedulers = [Scheduler(m, ScheduleStore(h.metadata), owner=f"server-{i}")
                      for i, (m, h) in enumerate(zip(managers, homes, strict=True))]
        done = await asyncio.wait_for(asyncio.gather(*(s.run_due() for s in schedulers)), 120)
        assert sorted(len(records) for records in done) == [0, 1]  # exactly one server ran it
        (record,) = [r for records in done for r in records]
        assert record.status == "success"
        assert await schedulers[1].run_due() == [] and await schedulers[0].run_due() == []  # next slot: later
        runs = await ScheduleStore(homes[1].metadata).aio.runs(schedule.schedule_id, "local")
        assert [r.claimed_by for r in runs] == [record.claimed_by]
        thread = await managers[1].store.aio.get_thread(record.thread_id, "local")
        assert thread is not None  # the run's thread is visible from the other machine too
    finally:
        for manager in managers:
            await manager.close()
        pgsql.database(postgres_url).close()
    assert not (tmp_path / "machine-a" / "deerflow.db").exists()

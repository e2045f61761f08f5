"""Scheduled runs end to end: scheduled mode, receipts, missed slots, and no double runs across processes."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from deerflow import DeerFlowClient
from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.errors import NotFoundError, UserError
from deerflow.runs.manager import RunManager
from deerflow.scheduling import ScheduleBook, Scheduler, ScheduleStore
from fixtures.logging_model import read_log

SCRIPT = """
turns:
  - tool_calls:
      - {name: write_file, args: {path: /mnt/user-data/outputs/digest.md, content: "# Digest"}}
  - tool_calls:
      - {name: present_files, args: {filepaths: [/mnt/user-data/outputs/digest.md]}}
  - "Digest written. Assumption: the last 24 hours."
"""
BLOCKED = """
turns:
  - |
    I prepared the cleanup but did not delete anything.
    BLOCKED
    missing_decision: whether old reports may be deleted
    why: deleting is irreversible
    done: listed the old reports
"""
HOUR = 3600.0


@pytest.fixture
def config(deerflow_home: Path, tmp_path: Path) -> Path:
    for name, script in {"digest": SCRIPT, "cleanup": BLOCKED}.items():
        (tmp_path / f"{name}.yaml").write_text(script)
    models = [{"name": name, "use": "fixtures.logging_model:LoggingScriptedModel",
               "log": str(tmp_path / f"{name}.jsonl"), "script": str(tmp_path / f"{name}.yaml")}
              for name in ("digest", "cleanup")]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"models": models}))
    return path


def make_due(home: Path, schedule_id: str, ago: float, *, at: float | None = None) -> None:
    """Move the schedule's slot ``ago`` seconds into the past (from ``at``, default now)."""
    with sqlite3.connect(home / "deerflow.db") as db:
        db.execute("UPDATE schedules SET next_run_at=? WHERE schedule_id=?", ((at or time.time()) - ago, schedule_id))


async def test_a_due_schedule_runs_once_unattended_and_records_its_receipt(config, deerflow_home, tmp_path):
    home = HomePaths(deerflow_home)
    book = ScheduleBook(home, "local")
    schedule = await asyncio.to_thread(book.add, cron="0 * * * *", prompt="Write the daily digest", timezone="UTC")
    this_hour = time.time() // HOUR * HOUR
    make_due(deerflow_home, schedule.schedule_id, ago=2 * HOUR, at=this_hour)  # the server was down a while
    loaded = load_config(config)
    manager = await RunManager.open(loaded=loaded, home=home)
    try:
        # the model is chosen by config default (first entry: digest)
        scheduler = Scheduler(manager, ScheduleStore(home.database))
        (record,) = await scheduler.run_due()
        assert await scheduler.run_due() == []  # not due again until its next slot
    finally:
        await manager.close()
    assert record.status == "success", record.error
    assert record.missed_slots == 2  # three slots passed: one run, two folded in
    assert record.receipt["status"] == "delivered"
    assert record.text.startswith("Digest written.")
    calls = read_log(tmp_path / "digest.jsonl")
    assert "ask_clarification" not in calls[0]["tools"]  # nobody is there to answer
    assert "unattended (scheduled)" in calls[0]["messages"][0]["text"]
    after = await asyncio.to_thread(book.get, schedule.schedule_id)
    assert after.lease_owner is None and time.time() < after.next_run_at <= time.time() + HOUR
    assert [r.record_id for r in await asyncio.to_thread(book.runs, schedule.schedule_id)] == [record.record_id]
    events = await manager.store.aio.events(record.run_id)
    assert json.loads(events[0])["interaction_mode"] == "scheduled"


def test_trial_runs_record_failures_and_schedules_are_per_user(config, deerflow_home):
    with DeerFlowClient(config_path=config) as client:
        schedule = client.schedule_book().add(cron="@daily", prompt="Clean up old reports")
        record = client.run_schedule_now(schedule.schedule_id)  # the owner's trial run
        assert record.status == "success"
        with sqlite3.connect(deerflow_home / "deerflow.db") as db:
            db.execute("UPDATE schedules SET agent_name='ghost' WHERE schedule_id=?", (schedule.schedule_id,))
        failed = client.run_schedule_now(schedule.schedule_id)
        assert failed.status == "error" and "unknown agent 'ghost'" in failed.error  # recorded, not raised
        with pytest.raises(NotFoundError):
            client.schedule_book().add(cron="@daily", prompt="x", agent_name="ghost")
        with pytest.raises(UserError, match="minute '61'"):
            client.schedule_book().add(cron="61 * * * *", prompt="x")
    with DeerFlowClient(config_path=config, user_id="bob") as bob:
        with pytest.raises(NotFoundError):
            bob.run_schedule_now(schedule.schedule_id)
        assert bob.schedule_book().list_schedules() == []


async def test_blocked_decision_is_parsed(config, deerflow_home):
    home = HomePaths(deerflow_home)
    loaded = load_config(config)
    loaded.config.default_model = "cleanup"
    schedule = await asyncio.to_thread(ScheduleBook(home, "local").add, cron="@daily", prompt="Clean up old reports")
    manager = await RunManager.open(loaded=loaded, home=home)
    try:
        record = await Scheduler(manager, ScheduleStore(home.database)).run_now(schedule.schedule_id, "local")
    finally:
        await manager.close()
    assert record.blocked == {"missing_decision": "whether old reports may be deleted",
                              "why": "deleting is irreversible", "done": "listed the old reports"}


async def test_two_schedulers_on_one_database_never_both_run_it(config, deerflow_home):
    home = HomePaths(deerflow_home)
    schedule = await asyncio.to_thread(ScheduleBook(home, "local").add, cron="*/5 * * * *",
                                       prompt="Write the daily digest")
    make_due(deerflow_home, schedule.schedule_id, ago=60)
    loaded = load_config(config)
    first = await RunManager.open(loaded=loaded, home=home)
    second = await RunManager.open(loaded=loaded, home=home)
    try:
        a = Scheduler(first, ScheduleStore(home.database), owner="server-a")
        b = Scheduler(second, ScheduleStore(home.database), owner="server-b")
        started = await a.tick()  # a holds the lease while its run is in flight...
        assert await b.tick() == []  # ...so b gets nothing
        await asyncio.gather(*started)
        assert await b.run_due() == []  # and after it, the schedule waits for its next slot
    finally:
        await first.close()
        await second.close()
    runs = await asyncio.to_thread(ScheduleStore(home.database).runs, schedule.schedule_id, "local")
    assert [r.claimed_by for r in runs] == ["server-a"]


def test_run_due_processes_started_together_run_a_schedule_once(config, deerflow_home, tmp_path):
    book = ScheduleBook(HomePaths(deerflow_home), "local")
    # Yearly: the slot after the one made due below is months away. With "*/5" a run spanning a
    # five-minute boundary made the next slot due too, and the slower process rightly ran it (CI17).
    schedule = book.add(cron="0 0 1 1 *", prompt="Write the daily digest")
    make_due(deerflow_home, schedule.schedule_id, ago=60)
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG"}}
    env.update({"DEERFLOW_HOME": str(deerflow_home),
                "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])})
    cmd = [sys.executable, "-m", "deerflow.cli", "--config", str(config), "schedule", "run-due", "--json"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]
    reported = [json.loads(line) for out, _ in outputs for line in out.splitlines() if line.strip()]
    assert [r["status"] for r in reported] == ["success"]
    assert len(book.runs(schedule.schedule_id)) == 1


def test_schedule_cli_add_list_remove(config, deerflow_home, capsys):
    from deerflow.cli import main

    base = ["--config", str(config)]
    assert main([*base, "schedule", "add", "Write the daily digest", "--cron", "0 7 * * mon-fri",
                 "--tz", "Europe/Paris"]) == 0
    added = capsys.readouterr().out
    assert added.startswith("schedule ") and "first run at" in added
    schedule_id = added.split()[1]
    assert main([*base, "schedule", "list"]) == 0
    assert f"{schedule_id}  '0 7 * * mon-fri' Europe/Paris" in capsys.readouterr().out
    assert main([*base, "schedule", "add", "x", "--cron", "0 7 * * someday"]) == 1
    assert "day of week value 'someday'" in capsys.readouterr().err
    assert main([*base, "schedule", "run-due"]) == 0
    assert "nothing is due" in capsys.readouterr().out
    assert main([*base, "schedule", "remove", schedule_id]) == 0
    assert main([*base, "schedule", "remove", schedule_id]) == 1


async def test_a_thread_taken_by_another_process_after_the_busy_check_defers_the_slot(config, deerflow_home):
    """The window between the scheduler's "is the thread busy?" and its run start: another process
    (here a lease row with a foreign owner) takes the thread; the slot is kept and tried again."""
    from deerflow.persistence.store import LeaseTerms

    home = HomePaths(deerflow_home)
    manager = await RunManager.open(loaded=load_config(config), home=home)
    try:
        thread = await manager.store.aio.create_thread("shared-thread", "local")
        book = ScheduleBook(home, "local", metadata=manager.store)
        schedule = await manager.store.aio.run(book.add, cron="0 * * * *", prompt="Write the daily digest",
                                              thread_id=thread.thread_id)
        make_due(deerflow_home, schedule.schedule_id, ago=60)
        slot = (await asyncio.to_thread(book.get, schedule.schedule_id)).next_run_at
        await manager.store.aio.acquire_lease(thread.thread_id, "other-process-run",
                                              LeaseTerms(owner="other-owner", holder="elsewhere:1", seconds=300))

        async def idle(thread_id: str) -> str:  # the check ran just before the other process won
            return "idle"

        manager.athread_status = idle
        (record,) = await Scheduler(manager, ScheduleStore(home.database)).run_due()
    finally:
        await manager.close()
    assert record.status == "deferred" and record.error == "the thread has an active run"
    after = await asyncio.to_thread(book.get, schedule.schedule_id)
    assert after.next_run_at == slot and after.lease_owner is None  # same slot, next tick

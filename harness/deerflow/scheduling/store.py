"""Schedules, their leases and their run records, in SQLite or PostgreSQL (``storage.url``).

Two tables beside the thread metadata (``$DEERFLOW_HOME/deerflow.db``, or the team's database):
``schedules`` (what to run, when next, who holds it now) and ``schedule_runs``
(one row per execution: run id, status, text, receipt, a ``BLOCKED`` decision).

**One schedule never runs twice at once**, even with two servers on one
database: a scheduler *claims* a schedule with a single conditional
``UPDATE ... WHERE lease_until IS NULL OR lease_until < now``; SQLite serialises
writers, and PostgreSQL makes the second updater wait on the row lock and re-check
the ``WHERE`` against the committed row, so exactly one claimer sees ``rowcount == 1``.  The holder renews its
lease while the run lasts and clears it when done.  A scheduler that dies
mid-run leaves a lease that expires, after which the schedule is due again.

**Missed slots** (downtime) are folded into one run: the claim counts how many
slots were missed, and after the run ``next_run_at`` becomes the first slot
after the run started, never one per missed slot.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from deerflow.errors import NotFoundError
from deerflow.persistence.sqlite import SqliteStore

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    schedule_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL DEFAULT 'UTC',
    prompt TEXT NOT NULL,
    agent_name TEXT,
    thread_id TEXT,
    enabled INTEGER NOT NULL DEFAULT 1,
    created_at REAL NOT NULL,
    next_run_at REAL NOT NULL,
    last_run_at REAL,
    lease_owner TEXT,
    lease_until REAL
);
CREATE INDEX IF NOT EXISTS schedules_due ON schedules(enabled, next_run_at);
CREATE TABLE IF NOT EXISTS schedule_runs (
    record_id INTEGER PRIMARY KEY AUTOINCREMENT,
    schedule_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    claimed_by TEXT NOT NULL,
    slot_at REAL NOT NULL,
    missed_slots INTEGER NOT NULL DEFAULT 0,
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL,
    run_id TEXT,
    thread_id TEXT,
    text TEXT,
    error TEXT,
    receipt TEXT,
    blocked TEXT
);
CREATE INDEX IF NOT EXISTS schedule_runs_schedule ON schedule_runs(schedule_id, started_at);
"""


@dataclass
class Schedule:
    schedule_id: str
    user_id: str
    cron: str
    timezone: str
    prompt: str
    agent_name: str | None
    thread_id: str | None
    enabled: bool
    created_at: float
    next_run_at: float
    last_run_at: float | None = None
    lease_owner: str | None = None
    lease_until: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ScheduleRun:
    """One execution of a schedule (``status``: running, success, error, interrupted, cancelled, skipped)."""

    record_id: int
    schedule_id: str
    user_id: str
    claimed_by: str
    slot_at: float
    missed_slots: int
    started_at: float
    finished_at: float | None
    status: str
    run_id: str | None = None
    thread_id: str | None = None
    text: str | None = None
    error: str | None = None
    receipt: dict[str, Any] | None = None
    blocked: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ScheduleStore(SqliteStore):
    """Schedules of one ``$DEERFLOW_HOME`` database (safe across threads and processes)."""

    schema = _SCHEMA
    schema_part = "schedules"
    loop_guarded = True  # async code uses ``store.aio`` (see deerflow.persistence.aio)

    # -- schedules ----------------------------------------------------------------
    def add(self, *, user_id: str, cron: str, timezone: str, prompt: str, agent_name: str | None,
            thread_id: str | None, next_run_at: float) -> Schedule:
        schedule = Schedule(uuid.uuid4().hex[:12], user_id, cron, timezone, prompt, agent_name, thread_id, True,
                            time.time(), next_run_at)
        with self._connect() as db:
            db.execute("INSERT INTO schedules (schedule_id, user_id, cron, timezone, prompt, agent_name, thread_id,"
                       " enabled, created_at, next_run_at) VALUES (?,?,?,?,?,?,?,1,?,?)",
                       (schedule.schedule_id, user_id, cron, timezone, prompt, agent_name, thread_id,
                        schedule.created_at, next_run_at))
        return schedule

    def get(self, schedule_id: str, user_id: str) -> Schedule:
        """The schedule if it is ``user_id``'s (NotFoundError otherwise)."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM schedules WHERE schedule_id=? AND user_id=?",
                             (schedule_id, user_id)).fetchone()
        if row is None:
            raise NotFoundError(f"unknown schedule {schedule_id!r}")
        return _schedule(row)

    def list_schedules(self, user_id: str) -> list[Schedule]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM schedules WHERE user_id=? ORDER BY created_at", (user_id,)).fetchall()
        return [_schedule(r) for r in rows]

    def remove(self, schedule_id: str, user_id: str) -> None:
        with self._connect() as db:
            cur = db.execute("DELETE FROM schedules WHERE schedule_id=? AND user_id=?", (schedule_id, user_id))
        if not cur.rowcount:
            raise NotFoundError(f"unknown schedule {schedule_id!r}")

    # -- leases -------------------------------------------------------------------
    def due(self, now: float, *, user_id: str | None = None, limit: int = 20) -> list[Schedule]:
        """Enabled schedules whose slot has come and that nobody holds."""
        sql = ("SELECT * FROM schedules WHERE enabled=1 AND next_run_at<=? AND (lease_until IS NULL OR lease_until<?)"
               + (" AND user_id=?" if user_id else "") + " ORDER BY next_run_at LIMIT ?")
        args: tuple[Any, ...] = (now, now, user_id, limit) if user_id else (now, now, limit)
        with self._connect() as db:
            return [_schedule(r) for r in db.execute(sql, args).fetchall()]

    def claim(self, schedule_id: str, owner: str, *, now: float, lease_seconds: float, force: bool = False) -> bool:
        """Take the schedule's lease if it is free (and due, unless ``force``); True for the one winner."""
        due = "" if force else " AND next_run_at<=?"
        args: tuple[Any, ...] = (owner, now + lease_seconds, schedule_id, now) + (() if force else (now,))
        with self._connect() as db:
            cur = db.execute("UPDATE schedules SET lease_owner=?, lease_until=? WHERE schedule_id=? AND enabled=1"
                             " AND (lease_until IS NULL OR lease_until<?)" + due, args)
        return cur.rowcount == 1

    def renew(self, schedule_id: str, owner: str, *, until: float) -> bool:
        with self._connect() as db:
            cur = db.execute("UPDATE schedules SET lease_until=? WHERE schedule_id=? AND lease_owner=?",
                             (until, schedule_id, owner))
        return cur.rowcount == 1

    def release(self, schedule_id: str, owner: str, *, next_run_at: float | None = None,
                ran_at: float | None = None) -> None:
        """Give the lease back; with ``next_run_at`` the schedule also moves to its next slot."""
        sets = ["lease_owner=NULL", "lease_until=NULL"]
        args: list[Any] = []
        if next_run_at is not None:
            sets.append("next_run_at=?")
            args.append(next_run_at)
        if ran_at is not None:
            sets.append("last_run_at=?")
            args.append(ran_at)
        with self._connect() as db:
            db.execute(f"UPDATE schedules SET {', '.join(sets)} WHERE schedule_id=? AND lease_owner=?",
                       (*args, schedule_id, owner))

    # -- run records --------------------------------------------------------------
    def start_record(self, schedule: Schedule, owner: str, *, slot_at: float, missed_slots: int,
                     started_at: float) -> int:
        with self._connect() as db:
            row = db.execute("INSERT INTO schedule_runs (schedule_id, user_id, claimed_by, slot_at, missed_slots,"
                             " started_at, status) VALUES (?,?,?,?,?,?, 'running') RETURNING record_id",
                             (schedule.schedule_id, schedule.user_id, owner, slot_at, missed_slots,
                              started_at)).fetchone()
        return int(row["record_id"])

    def finish_record(self, record_id: int, *, status: str, run_id: str | None = None, thread_id: str | None = None,
                      text: str | None = None, error: str | None = None, receipt: dict[str, Any] | None = None,
                      blocked: dict[str, Any] | None = None) -> None:
        with self._connect() as db:
            db.execute("UPDATE schedule_runs SET status=?, run_id=?, thread_id=?, text=?, error=?, receipt=?,"
                       " blocked=?, finished_at=? WHERE record_id=?",
                       (status, run_id, thread_id, text, error, _json(receipt), _json(blocked), time.time(),
                        record_id))

    def runs(self, schedule_id: str, user_id: str, *, limit: int = 50) -> list[ScheduleRun]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM schedule_runs WHERE schedule_id=? AND user_id=?"
                              " ORDER BY started_at DESC, record_id DESC LIMIT ?",
                              (schedule_id, user_id, limit)).fetchall()
        return [_run(r) for r in rows]

    def run_record(self, record_id: int) -> ScheduleRun:
        with self._connect() as db:
            row = db.execute("SELECT * FROM schedule_runs WHERE record_id=?", (record_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"unknown schedule run {record_id}")
        return _run(row)


def _json(value: dict[str, Any] | None) -> str | None:
    return json.dumps(value) if value is not None else None


def _schedule(row: sqlite3.Row) -> Schedule:
    return Schedule(row["schedule_id"], row["user_id"], row["cron"], row["timezone"], row["prompt"],
                    row["agent_name"], row["thread_id"], bool(row["enabled"]), row["created_at"],
                    row["next_run_at"], row["last_run_at"], row["lease_owner"], row["lease_until"])


def _run(row: sqlite3.Row) -> ScheduleRun:
    return ScheduleRun(row["record_id"], row["schedule_id"], row["user_id"], row["claimed_by"], row["slot_at"],
                       row["missed_slots"], row["started_at"], row["finished_at"], row["status"], row["run_id"],
                       row["thread_id"], row["text"], row["error"],
                       json.loads(row["receipt"]) if row["receipt"] else None,
                       json.loads(row["blocked"]) if row["blocked"] else None)


__all__ = ["Schedule", "ScheduleRun", "ScheduleStore"]

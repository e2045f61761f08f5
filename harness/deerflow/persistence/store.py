"""Thread metadata, run records and run events in SQLite or PostgreSQL (``storage.url``).

LangGraph's checkpointer keeps the conversation state; this store keeps what
the product needs around it: who owns a thread and its title, each run's
status and timestamps, the events it produced (so a run can be replayed or
joined after the fact), its workspace change summary and delivery receipt.

One short-lived connection per operation, WAL mode: safe from any thread and
from several processes on the same ``$DEERFLOW_HOME``.

**One run per thread, across processes.**  A run holds its thread's row in
``thread_leases`` (an owner token, the holder's ``host:pid`` and an expiry).
The lease is taken by one conditional upsert — insert, or take over a row whose
``expires_at`` has passed — in the *same transaction* that inserts the run, so a
run is never recorded without its lease nor a lease taken without its run.  The
database serialises the upserts: of two processes asking at once exactly one
sees a changed row, the other gets :class:`~deerflow.errors.ThreadBusy`.  The
holder renews the expiry while the run lasts and deletes the row in the
transaction that records the run's end.  A holder that dies stops renewing; once
the lease has expired the next run takes it over and, in that transaction,
marks the dead holder's run as interrupted.  The SQL is plain (``INSERT ... ON
CONFLICT ... DO UPDATE ... WHERE``, no SQLite-only syntax) so the same contract
holds on PostgreSQL, where the conflicting row's lock serialises the upserts and
the loser re-checks the ``WHERE`` against the winner's committed row
(:mod:`deerflow.persistence.pgsql` holds the few dialect differences).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from deerflow.errors import NotFoundError, ThreadBusy, UserError
from deerflow.persistence.sqlite import SqliteStore

INTERRUPTED = "interrupted: the process running it stopped (crash, kill or restart) before the run finished"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    thread_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    title TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS threads_user ON threads(user_id, updated_at);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    error TEXT,
    options TEXT NOT NULL DEFAULT '{}',
    result TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS runs_thread ON runs(thread_id, created_at);
CREATE TABLE IF NOT EXISTS thread_leases (
    thread_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    run_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS run_events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""


class ThreadIdUnavailable(NotFoundError):
    """A thread id that is already taken, by this user or by another one.

    Thread ids are global: they key the LangGraph checkpoints, the run guard
    and browser sessions, so two users cannot each hold a thread ``abc``.  The
    message is the one an unknown thread gets, so a run started with
    ``if_not_exists: create`` on another user's id answers exactly like a run
    on an id nobody holds (404); ``POST /threads`` turns it into its own
    uniform "not available" answer.
    """

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"unknown thread {thread_id!r}")
        self.thread_id = thread_id


class ThreadExists(UserError):
    """The caller's own thread already has this id (creating it again is refused)."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"thread {thread_id} already exists")
        self.thread_id = thread_id


@dataclass
class ThreadRecord:
    thread_id: str
    user_id: str
    title: str | None
    created_at: float
    updated_at: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunRecord:
    run_id: str
    thread_id: str
    user_id: str
    status: str
    created_at: float
    updated_at: float
    error: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LeaseTerms:
    """Who asks for a thread's lease and for how long.

    Attributes:
        owner: A token unique to this holding (one per run); only it renews or releases.
        holder: Where the run executes (``host:pid``), shown to whoever finds the thread busy.
        seconds: How long the lease lasts without renewal.
    """

    owner: str
    holder: str
    seconds: float


@dataclass(frozen=True)
class Lease:
    thread_id: str
    owner: str
    run_id: str
    holder: str
    expires_at: float


class MetadataStore(SqliteStore):
    """Threads, runs and run events of one ``$DEERFLOW_HOME``.

    Sync methods for sync callers (the CLI); async code awaits the same methods
    on :attr:`aio`, which runs them off the event loop with a deadline.
    """

    schema = _SCHEMA
    schema_part = "metadata"
    busy_timeout_seconds = 10.0  # below the async deadline: a locked database answers "unavailable", not a hang
    loop_guarded = True

    # -- threads -----------------------------------------------------------------
    def create_thread(self, thread_id: str, user_id: str, metadata: dict[str, Any] | None = None) -> ThreadRecord:
        """Claim ``thread_id`` for ``user_id``, atomically.

        Raises:
            ThreadIdUnavailable: the id is held already (by anyone).  One
                statement decides, so two concurrent creates cannot both win
                and the caller never sees the store's constraint error.
        """
        now = time.time()
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO threads (thread_id, user_id, title, created_at, updated_at, metadata) VALUES (?,?,?,?,?,?)"
                " ON CONFLICT(thread_id) DO NOTHING",
                (thread_id, user_id, None, now, now, json.dumps(metadata or {})),
            )
        if cur.rowcount != 1:
            raise ThreadIdUnavailable(thread_id)
        return ThreadRecord(thread_id, user_id, None, now, now, metadata or {})

    def get_thread(self, thread_id: str, user_id: str) -> ThreadRecord | None:
        """The thread if it exists *and* belongs to ``user_id`` (else None)."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM threads WHERE thread_id=? AND user_id=?", (thread_id, user_id)).fetchone()
        return _thread(row) if row else None

    def list_threads(self, user_id: str, *, limit: int = 100, offset: int = 0) -> list[ThreadRecord]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT * FROM threads WHERE user_id=? ORDER BY updated_at DESC LIMIT ? OFFSET ?",
                (user_id, limit, offset),
            ).fetchall()
        return [_thread(r) for r in rows]

    def update_thread(self, thread_id: str, *, title: str | None = None, metadata: dict[str, Any] | None = None) -> None:
        sets: list[str] = ["updated_at=?"]
        args: list[float | str] = [time.time()]
        if title is not None:
            sets.append("title=?")
            args.append(title)
        if metadata is not None:
            sets.append("metadata=?")
            args.append(json.dumps(metadata))
        with self._connect() as db:
            db.execute(f"UPDATE threads SET {', '.join(sets)} WHERE thread_id=?", (*args, thread_id))

    def delete_thread(self, thread_id: str, user_id: str) -> bool:
        with self._connect() as db:
            cur = db.execute("DELETE FROM threads WHERE thread_id=? AND user_id=?", (thread_id, user_id))
            if cur.rowcount:
                runs = [r["run_id"] for r in db.execute("SELECT run_id FROM runs WHERE thread_id=?", (thread_id,))]
                db.executemany("DELETE FROM run_events WHERE run_id=?", [(r,) for r in runs])
                db.execute("DELETE FROM runs WHERE thread_id=?", (thread_id,))
                db.execute("DELETE FROM thread_leases WHERE thread_id=?", (thread_id,))
        return bool(cur.rowcount)

    # -- runs --------------------------------------------------------------------
    def create_run(self, run: RunRecord, *, lease: LeaseTerms | None = None) -> None:
        """Record a new run; with ``lease``, take its thread's lease in the same transaction.

        Raises:
            ThreadBusy: another holder's lease on the thread has not expired (nothing is written).
        """
        with self._connect() as db:
            if lease is not None:
                _take_lease(db, run.thread_id, run.run_id, lease)
            db.execute(
                "INSERT INTO runs (run_id, thread_id, user_id, status, created_at, updated_at, error, options, result)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (run.run_id, run.thread_id, run.user_id, run.status, run.created_at, run.updated_at,
                 run.error, json.dumps(run.options), json.dumps(run.result)),
            )

    def finish_run(self, run_id: str, *, status: str, error: str | None = None, result: dict[str, Any] | None = None,
                   lease_owner: str | None = None) -> None:
        """Record the run's end; with ``lease_owner``, release its thread's lease in the same transaction."""
        with self._connect() as db:
            db.execute(
                "UPDATE runs SET status=?, error=?, result=?, updated_at=? WHERE run_id=?",
                (status, error, json.dumps(result or {}), time.time(), run_id),
            )
            if lease_owner is not None:
                db.execute("DELETE FROM thread_leases WHERE run_id=? AND owner=?", (run_id, lease_owner))

    def record_run_end(self, run_id: str, thread_id: str, *, events: Sequence[tuple[int, str]], status: str,
                       error: str | None = None, result: dict[str, Any] | None = None,
                       lease_owner: str | None = None, title: str | None = None) -> None:
        """A run's events, its end (releasing its lease) and its thread's title and time, in one transaction.

        What :meth:`add_events`, :meth:`finish_run` and :meth:`update_thread` do, at
        the cost of one commit instead of three: all of the end is recorded or none.
        """
        now = time.time()
        with self._connect() as db:
            db.executemany("INSERT INTO run_events (run_id, seq, event) VALUES (?,?,?)"
                           " ON CONFLICT (run_id, seq) DO UPDATE SET event=excluded.event",
                           [(run_id, seq, data) for seq, data in events])
            db.execute("UPDATE runs SET status=?, error=?, result=?, updated_at=? WHERE run_id=?",
                       (status, error, json.dumps(result or {}), now, run_id))
            if lease_owner is not None:
                db.execute("DELETE FROM thread_leases WHERE run_id=? AND owner=?", (run_id, lease_owner))
            if title is not None:
                db.execute("UPDATE threads SET updated_at=?, title=? WHERE thread_id=?", (now, title, thread_id))
            else:
                db.execute("UPDATE threads SET updated_at=? WHERE thread_id=?", (now, thread_id))

    # -- thread leases -------------------------------------------------------------
    def acquire_lease(self, thread_id: str, activity: str, lease: LeaseTerms) -> None:
        """Take the thread's lease for work that is not a recorded run (``activity``: compaction...).

        Raises:
            ThreadBusy: another holder's lease has not expired.
        """
        with self._connect() as db:
            _take_lease(db, thread_id, activity, lease)

    def renew_lease(self, thread_id: str, owner: str, seconds: float) -> bool:
        """Push the lease's expiry ``seconds`` from now; False if ``owner`` no longer holds it."""
        with self._connect() as db:
            cur = db.execute("UPDATE thread_leases SET expires_at=? WHERE thread_id=? AND owner=?",
                             (time.time() + seconds, thread_id, owner))
        return cur.rowcount == 1

    def release_lease(self, thread_id: str, owner: str) -> None:
        """Give the lease back (a no-op if ``owner`` lost it meanwhile)."""
        with self._connect() as db:
            db.execute("DELETE FROM thread_leases WHERE thread_id=? AND owner=?", (thread_id, owner))

    def thread_lease(self, thread_id: str) -> Lease | None:
        """The thread's unexpired lease, if any process holds one."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM thread_leases WHERE thread_id=? AND expires_at>=?",
                             (thread_id, time.time())).fetchone()
        return _lease(row) if row else None

    def get_run(self, run_id: str, user_id: str) -> RunRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM runs WHERE run_id=? AND user_id=?", (run_id, user_id)).fetchone()
        return _run(row) if row else None

    def list_runs(self, thread_id: str, user_id: str) -> list[RunRecord]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT * FROM runs WHERE thread_id=? AND user_id=? ORDER BY created_at", (thread_id, user_id)
            ).fetchall()
        return [_run(r) for r in rows]

    def runs_since(self, since: float | None = None, *, user_id: str | None = None) -> list[RunRecord]:
        """Runs created at or after ``since`` (all when None), of ``user_id`` (every user when None), oldest first."""
        mine = " AND user_id=?" if user_id is not None else ""  # no untyped NULL parameter (PostgreSQL)
        with self._connect() as db:
            rows = db.execute(f"SELECT * FROM runs WHERE created_at>=?{mine} ORDER BY created_at",
                              (since or 0.0, *([user_id] if user_id is not None else []))).fetchall()
        return [_run(r) for r in rows]

    def mark_interrupted_runs(self) -> int:
        """Mark runs left 'running' by a process that died (on startup); their count.

        Only runs whose lease expired (or that never had one) are marked: a run
        another live process is executing keeps renewing its lease and is left alone.
        """
        with self._connect() as db:
            cur = db.execute(
                "UPDATE runs SET status='error', error=?, updated_at=? WHERE status IN ('pending', 'running')"
                " AND NOT EXISTS (SELECT 1 FROM thread_leases l WHERE l.run_id=runs.run_id AND l.expires_at>=?)",
                (INTERRUPTED, time.time(), time.time()),
            )
        return cur.rowcount

    # -- events ------------------------------------------------------------------
    def add_events(self, run_id: str, events: Sequence[tuple[int, str]]) -> None:
        with self._connect() as db:
            db.executemany("INSERT INTO run_events (run_id, seq, event) VALUES (?,?,?)"
                           " ON CONFLICT (run_id, seq) DO UPDATE SET event=excluded.event",
                           [(run_id, seq, data) for seq, data in events])

    def events(self, run_id: str, *, after: int = 0) -> list[str]:
        with self._connect() as db:
            rows = db.execute("SELECT event FROM run_events WHERE run_id=? AND seq>? ORDER BY seq", (run_id, after))
            return [r["event"] for r in rows]


def _thread(row: sqlite3.Row) -> ThreadRecord:
    return ThreadRecord(row["thread_id"], row["user_id"], row["title"], row["created_at"], row["updated_at"],
                        json.loads(row["metadata"]))


def _run(row: sqlite3.Row) -> RunRecord:
    return RunRecord(row["run_id"], row["thread_id"], row["user_id"], row["status"], row["created_at"],
                     row["updated_at"], row["error"], json.loads(row["options"]), json.loads(row["result"]))


def _take_lease(db: sqlite3.Connection, thread_id: str, run_id: str, lease: LeaseTerms) -> None:
    """Take the thread's lease inside the caller's transaction, or raise ThreadBusy.

    One statement decides: insert the row, or take over one that has expired.
    The database serialises writers, so of two concurrent callers exactly one
    changes a row.  Runs still 'running' on the thread then belong to a holder
    that died (its lease expired): they are marked interrupted here.
    """
    now = time.time()
    cur = db.execute(
        "INSERT INTO thread_leases (thread_id, owner, run_id, holder, expires_at) VALUES (?,?,?,?,?)"
        " ON CONFLICT (thread_id) DO UPDATE SET owner=excluded.owner, run_id=excluded.run_id,"
        " holder=excluded.holder, expires_at=excluded.expires_at WHERE thread_leases.expires_at<?",
        (thread_id, lease.owner, run_id, lease.holder, now + lease.seconds, now),
    )
    if cur.rowcount != 1:
        row = db.execute("SELECT run_id, holder FROM thread_leases WHERE thread_id=?", (thread_id,)).fetchone()
        raise ThreadBusy(thread_id, run_id=row["run_id"] if row else None, holder=row["holder"] if row else None)
    db.execute("UPDATE runs SET status='error', error=?, updated_at=? WHERE thread_id=? AND status IN"
               " ('pending', 'running')", (INTERRUPTED, now, thread_id))


def _lease(row: sqlite3.Row) -> Lease:
    return Lease(row["thread_id"], row["owner"], row["run_id"], row["holder"], row["expires_at"])

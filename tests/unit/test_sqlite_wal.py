"""Switching a new store file to WAL waits out another process doing the same, instead of failing at once.

SQLite skips its busy handler for the switch when two connections could
deadlock, so the CLI and a server opening a new home together saw "database is
locked" (seen in CI: two peers opening one checkpoint file).  The tests hold
the lock with a second connection and take the busy handler away
(``timeout=0``), which is what the deadlock case looks like from the caller.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from contextlib import AsyncExitStack

import pytest

from deerflow.config.storage import StorageConfig
from deerflow.persistence.checkpointer import open_checkpointer
from deerflow.persistence.sqlite import is_locked_error, switch_to_wal


def hold_exclusive(path, seconds: float) -> threading.Thread:
    """Lock ``path`` exclusively now, and let go after ``seconds`` on a thread."""
    holder = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    timer = threading.Timer(seconds, lambda: (holder.execute("ROLLBACK"), holder.close()))
    timer.start()
    return timer


def test_the_switch_waits_for_a_held_lock_then_succeeds(tmp_path):
    path = tmp_path / "new.db"
    timer = hold_exclusive(path, 0.3)
    db = sqlite3.connect(path, timeout=0)
    try:
        with pytest.raises(sqlite3.OperationalError) as plain:  # what the bare pragma does
            db.execute("PRAGMA journal_mode=WAL")
        assert is_locked_error(plain.value)
        switch_to_wal(db)
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        timer.join()
        db.close()


def test_the_switch_gives_up_at_its_deadline_with_the_lock_error(tmp_path):
    path = tmp_path / "new.db"
    timer = hold_exclusive(path, 1.0)
    db = sqlite3.connect(path, timeout=0)
    try:
        with pytest.raises(sqlite3.OperationalError) as info:
            switch_to_wal(db, seconds=0.1)
        assert is_locked_error(info.value)
    finally:
        timer.join()
        db.close()


def test_other_errors_are_not_retried(tmp_path):
    db = sqlite3.connect(tmp_path / "x.db")
    db.close()
    with pytest.raises(sqlite3.ProgrammingError):  # a closed connection: raised at once, not waited on
        switch_to_wal(db)


def test_the_checkpointer_opens_a_new_file_another_connection_holds(tmp_path, monkeypatch):
    path = tmp_path / "checkpoints.db"
    timer = hold_exclusive(path, 0.3)
    real_connect = __import__("aiosqlite").connect
    monkeypatch.setattr("aiosqlite.connect", lambda database, **kw: real_connect(database, timeout=0))

    async def open_it() -> str:
        async with AsyncExitStack() as stack:
            saver = await open_checkpointer(StorageConfig(), default_path=path, stack=stack)
            return type(saver).__name__

    try:
        assert asyncio.run(open_it()) == "AsyncSqliteSaver"
    finally:
        timer.join()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_file_grown_since_its_first_look_is_not_called_truncated(tmp_path):
    """Another process can grow a new store (and empty its WAL) between the size check's stat and its
    read of the header: the header's page count is compared with the size now (seen with four openers)."""
    from deerflow.persistence.sqlite import _contents_problem

    path = tmp_path / "grown.db"
    with sqlite3.connect(path) as db:
        db.executescript("CREATE TABLE a(x); CREATE TABLE b(x); CREATE TABLE c(x); CREATE TABLE d(x);")
    db.close()
    size = path.stat().st_size
    assert size > 4096 and not (tmp_path / "grown.db-wal").exists()
    assert _contents_problem(path, 4096) is None  # the stale first look said one page


class Counting:
    """A connection that counts its statements."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db, self.switches = db, 0

    def execute(self, sql: str) -> sqlite3.Cursor:
        self.switches += sql == "PRAGMA journal_mode=WAL"
        return self.db.execute(sql)


def test_a_lock_held_past_the_busy_timeout_is_answered_once_not_waited_out_again(tmp_path):
    path = tmp_path / "held.db"
    timer = hold_exclusive(path, 8.0)
    db = Counting(sqlite3.connect(path, timeout=1.0, check_same_thread=False))
    try:
        with pytest.raises(sqlite3.OperationalError) as info:
            switch_to_wal(db, seconds=7.0)  # type: ignore[arg-type]
        assert is_locked_error(info.value)
        assert db.switches == 1  # SQLite's busy handler waited its second: no second wait
    finally:
        timer.cancel()
        timer.function()  # type: ignore[misc]  # let go of the lock now
        db.db.close()

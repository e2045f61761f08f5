"""A store's executor threads keep one SQLite connection per store, and drop it when they must.

Real SQLite files; the "executor thread" is a real ``store.aio`` thread or a thread that called
:func:`keep_connections_in_this_thread`.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deerflow.persistence.sqlite import StorageError, keep_connections_in_this_thread
from deerflow.persistence.store import MetadataStore


def in_kept_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` on a new thread that keeps connections, as a store's executor thread does."""
    out: dict[str, Any] = {}

    def body() -> None:
        keep_connections_in_this_thread()
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def connection_of(store: MetadataStore) -> sqlite3.Connection:
    with store._connect() as db:
        return db


def test_an_executor_thread_reuses_its_connection_and_other_threads_do_not(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "deerflow.db")

    def scenario() -> tuple[sqlite3.Connection, sqlite3.Connection]:
        first, second = connection_of(store), connection_of(store)
        first.execute("SELECT 1")  # still open
        return first, second

    first, second = in_kept_thread(scenario)
    assert first is second
    a, b = connection_of(store), connection_of(store)  # this thread does not keep connections
    assert a is not b
    with pytest.raises(sqlite3.ProgrammingError):
        a.execute("SELECT 1")  # closed after its operation


async def test_the_aio_facade_sees_what_another_connection_wrote(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "deerflow.db")
    await store.aio.create_thread("t1", "alice")
    assert await store.aio.get_thread("t1", "alice") is not None  # a kept connection now exists
    await asyncio.to_thread(MetadataStore(store.path).create_thread, "t2", "alice")  # another store's write
    assert {t.thread_id for t in await store.aio.list_threads("alice")} == {"t1", "t2"}
    store.aio.close()


def test_a_file_moved_aside_is_left_and_the_new_file_gets_its_schema(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "deerflow.db")

    def scenario() -> tuple[Any, Any, Any]:
        store.create_thread("t1", "alice")
        old = connection_of(store)
        os.rename(store.path, tmp_path / "deerflow.db.broken")  # what `doctor --repair` does
        for suffix in ("-wal", "-shm"):
            if (tmp_path / f"deerflow.db{suffix}").exists():
                os.rename(tmp_path / f"deerflow.db{suffix}", tmp_path / f"deerflow.db.broken{suffix}")
        store.create_thread("t2", "alice")  # into a new, empty file with the schema
        return old, connection_of(store), [t.thread_id for t in store.list_threads("alice")]

    old, new, threads = in_kept_thread(scenario)
    assert new is not old
    assert threads == ["t2"]
    moved = sqlite3.connect(tmp_path / "deerflow.db.broken")
    assert [r[0] for r in moved.execute("SELECT thread_id FROM threads")] == ["t1"]  # untouched
    moved.close()


def test_a_failed_operation_closes_its_connection(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "deerflow.db")
    store.create_thread("t1", "alice")

    def scenario() -> tuple[sqlite3.Connection, sqlite3.Connection]:
        def half_then_fail() -> None:
            with store._connect() as db:
                db.execute("UPDATE threads SET title='half' WHERE thread_id='t1'")
                db.execute("SELECT * FROM no_such_table")

        before = connection_of(store)
        with pytest.raises(sqlite3.OperationalError):
            half_then_fail()
        return before, connection_of(store)

    before, after = in_kept_thread(scenario)
    assert after is not before
    with pytest.raises(sqlite3.ProgrammingError):
        before.execute("SELECT 1")
    assert store.get_thread("t1", "alice").title != "half"  # the failed transaction was rolled back


def test_a_nested_call_does_not_commit_the_outer_transaction(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "deerflow.db")
    store.create_thread("t1", "alice")

    def outer_with_a_nested_call() -> None:
        with store._connect() as db:
            db.execute("UPDATE threads SET title='outer' WHERE thread_id='t1'")
            inner = connection_of(store)  # a nested operation on the same thread
            assert inner is not db
            raise RuntimeError("the outer operation fails after the nested one")

    def scenario() -> Any:
        with pytest.raises(RuntimeError):
            outer_with_a_nested_call()
        return store.get_thread("t1", "alice")

    assert in_kept_thread(scenario).title != "outer"  # rolled back whole, not committed by the inner one


def test_a_file_replaced_by_garbage_under_a_kept_connection_is_a_storage_error(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "deerflow.db")
    garbage = b"not a database at all" * 300

    def scenario() -> None:
        store.create_thread("t1", "alice")
        store.list_threads("alice")  # the connection is kept now
        new = tmp_path / "other"
        new.write_bytes(garbage)
        os.replace(new, store.path)  # another inode at the store's path
        store.list_threads("alice")

    with pytest.raises(StorageError, match="not a SQLite database"):
        in_kept_thread(scenario)
    assert store.path.read_bytes() == garbage  # left as it was, for `doctor --repair`


"""``store.aio``: the metadata store from async code, off the loop, with a deadline; and the loop guard.

A real SQLite file throughout; "locked" is another connection holding it in
exclusive locking mode (readers and writers both shut out, as another process would).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.persistence.aio import GUARD_ENV, LoopBlocked, StoreUnavailable
from deerflow.persistence.sqlite import StorageError
from deerflow.persistence.store import LeaseTerms, MetadataStore, RunRecord


@pytest.fixture
def store(tmp_path: Path) -> MetadataStore:
    store = MetadataStore(tmp_path / "deerflow.db")
    store.create_thread("t1", "alice", {"k": "v"})  # sync: no loop runs here
    return store


@pytest.fixture
def locked(store: MetadataStore) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(store.path, isolation_level=None)
    db.execute("PRAGMA locking_mode=EXCLUSIVE")
    db.execute("BEGIN EXCLUSIVE")
    db.execute("UPDATE threads SET title='held' WHERE thread_id='t1'")
    try:
        yield db
    finally:
        db.execute("ROLLBACK")
        db.close()


async def test_the_async_methods_answer_like_the_sync_ones(store):
    await store.aio.create_thread("t2", "alice")
    assert [t.thread_id for t in await store.aio.list_threads("alice")] == ["t2", "t1"]
    assert (await store.aio.get_thread("t1", "alice")).metadata == {"k": "v"}
    assert await store.aio.get_thread("t1", "bob") is None  # another user's thread is not there
    await store.aio.create_run(RunRecord("r1", "t1", "alice", "running", 1.0, 1.0))
    await store.aio.finish_run("r1", status="success")
    assert [r.status for r in await store.aio.list_runs("t1", "alice")] == ["success"]


async def test_a_sync_call_on_the_event_loop_is_refused_under_the_guard(store, monkeypatch):
    monkeypatch.setenv(GUARD_ENV, "1")
    with pytest.raises(LoopBlocked, match=r"\.aio"):
        store.get_thread("t1", "alice")
    assert await asyncio.to_thread(store.get_thread, "t1", "alice") is not None  # off the loop: fine
    monkeypatch.delenv(GUARD_ENV)
    assert store.get_thread("t1", "alice") is not None  # the guard is off outside tests


def test_sync_callers_without_a_loop_are_untouched(store, monkeypatch):
    monkeypatch.setenv(GUARD_ENV, "1")
    assert store.get_thread("t1", "alice").thread_id == "t1"


async def test_a_lock_past_the_busy_timeout_is_store_unavailable(store, locked):
    store.busy_timeout_seconds = 0.2
    with pytest.raises(StoreUnavailable, match="locked by another process") as raised:
        await store.aio.get_thread("t1", "alice")
    assert isinstance(raised.value, StorageError)  # answered like any unusable store: 503, one line
    assert str(store.path) in str(raised.value) and "\n" not in str(raised.value)


async def test_a_call_past_the_deadline_is_store_unavailable_and_the_loop_keeps_running(store, locked):
    store.aio.deadline = 0.5  # the store would wait its busy timeout (10 s): the deadline comes first
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    with pytest.raises(StoreUnavailable, match="did not finish within"):
        await store.aio.update_thread("t1", title="mine")
    ticker.cancel()
    assert ticks > 1  # the loop ran other work while the call waited


async def test_errors_that_are_not_about_locking_pass_through(store):
    def broken() -> None:
        raise sqlite3.OperationalError("no such table: nope")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        await store.aio.run(broken)
    with pytest.raises(AttributeError):
        store.aio._connect  # noqa: B018 - private methods are not offered


async def test_a_runs_end_is_recorded_in_one_call(store):
    """Events, status, result, the lease given back and the thread's title: all of the run's end."""
    terms = LeaseTerms(owner="o1", holder="here", seconds=60)
    await store.aio.create_run(RunRecord("r1", "t1", "alice", "running", 1.0, 1.0), lease=terms)
    assert await store.aio.thread_lease("t1") is not None
    await store.aio.record_run_end("r1", "t1", events=[(1, "a"), (2, "b")], status="success",
                                   result={"text": "done"}, lease_owner="o1", title="Plots")
    assert await store.aio.events("r1") == ["a", "b"]
    run = await store.aio.get_run("r1", "alice")
    assert (run.status, run.result) == ("success", {"text": "done"})
    assert await store.aio.thread_lease("t1") is None
    assert (await store.aio.get_thread("t1", "alice")).title == "Plots"


async def test_a_timeout_raised_by_the_call_itself_is_not_the_deadline(store):
    from deerflow.persistence.aio import AsyncStore

    def driver_timeout() -> None:
        raise TimeoutError("the driver's own timeout")

    with pytest.raises(TimeoutError, match="the driver's own timeout"):  # not StoreUnavailable
        await AsyncStore(store, deadline=30).run(driver_timeout)

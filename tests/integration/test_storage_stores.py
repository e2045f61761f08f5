"""The metadata stores (threads, runs, events, thread leases, schedules, MCP tasks) over both backends.

The same store classes run on a SQLite file and, when ``storage.url`` is PostgreSQL, on a real
throwaway PostgreSQL database (``tests/fixtures/postgres.py``; those cases skip, saying why, when
the server binaries are absent).  What a user would notice: a thread is its owner's alone, two
processes never both hold a thread or a schedule, a killed process's lease expires and the next
run takes the thread over, and the schema comes up once however many processes start together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths
from deerflow.errors import ThreadBusy
from deerflow.mcp.credentials import UserCredential, UserCredentialStore
from deerflow.mcp.tasks import TaskRecord, TaskStore
from deerflow.persistence import pgsql
from deerflow.persistence.aio import StoreUnavailable
from deerflow.persistence.store import (
    INTERRUPTED,
    LeaseTerms,
    MetadataStore,
    RunRecord,
    ThreadIdUnavailable,
)
from deerflow.scheduling.store import ScheduleStore
from fixtures.processes import running_process

pytestmark = pytest.mark.integration

DEADLINE = 120  # hang guard for a peer process, not a timing assertion
HOLDER = """
import sys, time
from deerflow.persistence.store import LeaseTerms, MetadataStore, RunRecord
target = sys.argv[1]
store = MetadataStore(target if target.startswith("postgresql") else __import__("pathlib").Path(target))
now = time.time()
store.create_run(RunRecord("held", "t1", "u", "running", now, now), lease=LeaseTerms("peer", "peer:1", 2.0))
print("holding", flush=True)
time.sleep(600)
"""
SETUP = """
import json, sys, time
from deerflow.mcp.tasks import TaskStore
from deerflow.persistence import pgsql
from deerflow.persistence.store import MetadataStore
from deerflow.scheduling.store import ScheduleStore
url, start_at = sys.argv[1], float(sys.argv[2])
time.sleep(max(0.0, start_at - time.time()))
MetadataStore(url).list_threads("u")
ScheduleStore(url).list_schedules("u")
TaskStore(url).running()
print(json.dumps(pgsql.database(url).versions()))
"""


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """Where the stores live: a SQLite file, or a fresh PostgreSQL database (its pool closed after)."""
    if request.param == "sqlite":
        yield tmp_path / "deerflow.db"
        return
    url = request.getfixturevalue("postgres_url")
    yield url
    pgsql.database(url).close()


def terms(owner: str, seconds: float = 30.0) -> LeaseTerms:
    return LeaseTerms(owner=owner, holder=f"host:{owner}", seconds=seconds)


def record(run_id: str, thread_id: str = "t1", user_id: str = "u") -> RunRecord:
    now = time.time()
    return RunRecord(run_id, thread_id, user_id, "running", now, now)


def peer_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def all_at_once(n: int, fn: Callable[[int], object]) -> list[object]:
    """``fn(0..n-1)`` on ``n`` threads released together; each result, or the exception it raised."""
    barrier = threading.Barrier(n)

    def one(i: int) -> object:
        barrier.wait(timeout=30)
        try:
            return fn(i)
        except Exception as exc:  # the test counts winners and losers
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_a_thread_is_its_owners_alone(target: Path | str) -> None:
    store = MetadataStore(target)
    store.create_thread("t1", "alice", {"notebook": "a.ipynb"})
    assert store.get_thread("t1", "bob") is None
    with pytest.raises(ThreadIdUnavailable):
        store.create_thread("t1", "bob")
    store.update_thread("t1", title="Plots")
    (mine,) = store.list_threads("alice")
    assert (mine.title, mine.metadata) == ("Plots", {"notebook": "a.ipynb"})
    assert store.list_threads("bob") == []
    assert not store.delete_thread("t1", "bob")
    assert store.get_thread("t1", "alice") is not None


def test_of_many_concurrent_creates_of_one_id_exactly_one_wins(target: Path | str) -> None:
    stores = [MetadataStore(target) for _ in range(6)]  # each like another process's store
    stores[0].list_threads("u")  # the schema first: this test is about the rows
    outcomes = all_at_once(6, lambda i: stores[i].create_thread("same", f"user{i}"))
    winners = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(winners) == 1, outcomes
    assert all(isinstance(o, ThreadIdUnavailable) for o in outcomes if isinstance(o, Exception))


def test_runs_and_events_round_trip_and_go_with_their_thread(target: Path | str) -> None:
    store = MetadataStore(target)
    store.create_thread("t1", "u")
    store.create_run(RunRecord("r1", "t1", "u", "running", time.time(), time.time(), options={"model": "m"}))
    store.add_events("r1", [(1, "a"), (2, "b"), (3, "c")])
    store.add_events("r1", [(2, "B")])  # a replayed event replaces its slot
    assert store.events("r1") == ["a", "B", "c"]
    assert store.events("r1", after=2) == ["c"]
    store.finish_run("r1", status="success", result={"files": 2})
    run = store.get_run("r1", "u")
    assert (run.status, run.options, run.result) == ("success", {"model": "m"}, {"files": 2})
    assert store.get_run("r1", "other") is None
    assert [r.run_id for r in store.runs_since(None)] == ["r1"]
    assert store.runs_since(None, user_id="other") == []
    assert store.delete_thread("t1", "u")
    assert store.events("r1") == [] and store.get_run("r1", "u") is None


def test_one_lease_per_thread_and_an_expired_one_is_taken_over(target: Path | str) -> None:
    store = MetadataStore(target)
    store.create_thread("t1", "u")
    store.create_run(record("r1"), lease=terms("a", seconds=0.5))
    with pytest.raises(ThreadBusy, match=r"run r1, in process host:a"):
        store.create_run(record("r2"), lease=terms("b"))
    assert [r.run_id for r in store.list_runs("t1", "u")] == ["r1"]
    assert not store.renew_lease("t1", "b", 60)
    time.sleep(0.6)
    store.create_run(record("r3"), lease=terms("c"))
    assert (store.get_run("r1", "u").status, store.get_run("r1", "u").error) == ("error", INTERRUPTED)
    assert not store.renew_lease("t1", "a", 30)
    store.finish_run("r3", status="success", lease_owner="c")
    assert store.thread_lease("t1") is None


def test_of_concurrent_runs_on_one_thread_exactly_one_gets_the_lease(target: Path | str) -> None:
    stores = [MetadataStore(target) for _ in range(6)]
    stores[0].create_thread("t1", "u")
    outcomes = all_at_once(6, lambda i: stores[i].create_run(record(f"r{i}"), lease=terms(f"o{i}")))
    assert sum(o is None for o in outcomes) == 1, outcomes
    assert all(isinstance(o, ThreadBusy) for o in outcomes if o is not None)
    assert len(stores[0].list_runs("t1", "u")) == 1


def test_a_killed_processs_lease_expires_and_the_next_run_takes_the_thread(target: Path | str) -> None:
    store = MetadataStore(target)
    store.create_thread("t1", "u")
    with running_process([sys.executable, "-c", HOLDER, str(target)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=peer_env()) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "holding", proc.stderr
        with pytest.raises(ThreadBusy, match="peer:1"):
            store.create_run(record("mine"), lease=terms("me"))
        proc.kill()
        proc.wait(timeout=DEADLINE)
    deadline = time.monotonic() + DEADLINE
    while store.thread_lease("t1") is not None:  # nobody renews it now: it expires
        assert time.monotonic() < deadline, "the dead process's lease never expired"
        time.sleep(0.2)
    store.create_run(record("mine"), lease=terms("me"))
    held = store.get_run("held", "u")
    assert (held.status, held.error) == ("error", INTERRUPTED)
    assert store.thread_lease("t1").run_id == "mine"


def test_startup_marks_only_runs_whose_lease_expired(target: Path | str) -> None:
    store = MetadataStore(target)
    for thread in ("t1", "t2", "t3"):
        store.create_thread(thread, "u")
    store.create_run(record("live", "t1"), lease=terms("a"))
    store.create_run(record("expired", "t2"), lease=terms("b", seconds=0.05))
    store.create_run(record("unleased", "t3"))
    time.sleep(0.1)
    assert store.mark_interrupted_runs() == 2
    assert store.get_run("live", "u").status == "running"
    assert store.get_run("expired", "u").error == INTERRUPTED


def test_of_two_schedulers_claiming_a_due_schedule_exactly_one_wins(target: Path | str) -> None:
    now = time.time()
    schedule = ScheduleStore(target).add(user_id="alice", cron="* * * * *", timezone="UTC", prompt="p",
                                         agent_name=None, thread_id=None, next_run_at=now - 1)
    stores = [ScheduleStore(target) for _ in range(4)]
    outcomes = all_at_once(4, lambda i: stores[i].claim(schedule.schedule_id, f"server-{i}", now=now,
                                                        lease_seconds=60))
    assert outcomes.count(True) == 1, outcomes
    owner = f"server-{outcomes.index(True)}"
    assert ScheduleStore(target).due(now) == []  # held: not due for anyone else
    first = stores[0].start_record(schedule, owner, slot_at=now, missed_slots=2, started_at=now)
    second = stores[1].start_record(schedule, owner, slot_at=now, missed_slots=0, started_at=now + 1)
    assert second > first
    stores[0].finish_record(first, status="success", run_id="r", receipt={"files": ["a.md"]})
    done = stores[2].run_record(first)
    assert (done.status, done.missed_slots, done.receipt) == ("success", 2, {"files": ["a.md"]})
    stores[0].release(schedule.schedule_id, owner, next_run_at=now + 60, ran_at=now)
    assert ScheduleStore(target).get(schedule.schedule_id, "alice").lease_owner is None
    with pytest.raises(Exception, match="unknown schedule"):
        ScheduleStore(target).get(schedule.schedule_id, "bob")


def test_mcp_task_records_round_trip(tmp_path: Path, target: Path | str) -> None:
    store = TaskStore(target if isinstance(target, str) else tmp_path / "mcp-tasks.db")
    store.add(TaskRecord("k1", "srv", "long_job", "alice", "t1", "remote-7", submitted_at=time.time()))
    store.update("k1", status="completed", result="42", delivered=False, cancel_requested=True)
    (task,) = store.undelivered("alice", "t1")
    assert (task.status, task.result, task.cancel_requested, task.delivered) == ("completed", "42", 1, 0)
    assert store.get("k1", "bob") is None and store.running() == []


async def test_mcp_credentials_are_the_users_own_and_reach_their_other_server(
        tmp_path: Path, target: Path | str) -> None:
    on_postgres = isinstance(target, str)
    here = HomePaths(tmp_path / "machine-a").with_database(target if on_postgres else None)
    there = HomePaths(tmp_path / "machine-b").with_database(target) if on_postgres else here  # SQLite: one machine
    await UserCredentialStore(here).aset("alice", "search", UserCredential(token="tok-a", headers={"X-Team": "t"}))
    other = UserCredentialStore(there)
    await other.load("alice")
    await other.load("bob")
    assert other.get("alice", "search") == UserCredential(token="tok-a", headers={"X-Team": "t"})
    assert other.get("bob", "search") is None
    if on_postgres:
        assert not (tmp_path / "machine-a" / "users").exists()  # no file holds the secret
    await other.aset("alice", "search", None)
    mine = UserCredentialStore(here)
    await mine.load("alice")
    assert mine.get("alice", "search") is None


async def test_async_code_reaches_every_store_through_aio(target: Path | str) -> None:
    store = MetadataStore(target)
    await store.aio.create_thread("t1", "u")
    assert (await store.aio.get_thread("t1", "u")).user_id == "u"
    schedules = ScheduleStore(target)
    await schedules.aio.add(user_id="u", cron="0 * * * *", timezone="UTC", prompt="p", agent_name=None,
                            thread_id="t1", next_run_at=time.time() + 60)
    assert len(await schedules.aio.list_schedules("u")) == 1
    store.aio.close()
    schedules.aio.close()


def test_the_schema_is_versioned_and_set_up_once_by_processes_starting_together(postgres_url: str) -> None:
    start_at = str(time.time() + 3)
    with ExitStack() as stack:
        procs = [stack.enter_context(running_process(
            [sys.executable, "-c", SETUP, postgres_url, start_at], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=peer_env())) for _ in range(3)]
        results = [proc.communicate(timeout=DEADLINE) for proc in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err[-3000:]
    expected = {"metadata": 1, "schedules": 1, "mcp_tasks": 1}
    assert [json.loads(out.strip().splitlines()[-1]) for out, _ in results] == [expected] * 3


def test_a_database_with_a_newer_schema_is_refused_in_one_line(postgres_url: str) -> None:
    import psycopg

    MetadataStore(postgres_url).list_threads("u")
    pgsql.close_all()  # a new process, as far as the schema cache is concerned
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE deerflow_schema SET version = 9 WHERE part = 'metadata'")
    with pytest.raises(pgsql.SchemaTooNew) as caught:
        MetadataStore(postgres_url).list_threads("u")
    message = str(caught.value)
    assert "schema version 9" in message and "upgrade DeerFlow" in message and "\n" not in message
    pgsql.close_all()


async def test_an_unreachable_database_answers_unavailable_not_a_hang(tmp_path: Path) -> None:
    url = f"postgresql://nobody:secret@/none?host={tmp_path}&port=1"
    store = MetadataStore(url)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.aio.get_thread("t1", "u")
    finally:
        store.aio.close()
        pgsql.database(url).close()
    message = str(caught.value)
    assert "secret" not in message and f"PostgreSQL at {tmp_path}:1/none (storage.url)" in message
    assert "(No such file or directory)" in message and "\n" not in message  # libpq's reason: no socket there
    assert caught.value.exit_code == 75

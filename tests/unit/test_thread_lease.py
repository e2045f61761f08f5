"""The thread lease in the metadata store: one run per thread across processes, taken over after expiry."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest

from deerflow.errors import ThreadBusy
from deerflow.persistence.store import INTERRUPTED, LeaseTerms, MetadataStore, RunRecord


def terms(owner: str, seconds: float = 30.0) -> LeaseTerms:
    return LeaseTerms(owner=owner, holder=f"host:{owner}", seconds=seconds)


def record(run_id: str, thread_id: str = "t1") -> RunRecord:
    now = time.time()
    return RunRecord(run_id, thread_id, "u", "running", now, now)


@pytest.fixture
def store(tmp_path: Path) -> MetadataStore:
    store = MetadataStore(tmp_path / "deerflow.db")
    store.create_thread("t1", "u")
    return store


def test_second_run_on_a_leased_thread_is_busy_and_not_recorded(store):
    store.create_run(record("r1"), lease=terms("a"))
    with pytest.raises(ThreadBusy, match=r"thread t1 already has an active run \(run r1, in process host:a\)"):
        store.create_run(record("r2"), lease=terms("b"))
    assert [r.run_id for r in store.list_runs("t1", "u")] == ["r1"]  # the refused run left nothing
    assert store.thread_lease("t1").run_id == "r1"


def test_finishing_the_run_releases_the_lease_in_the_same_step(store):
    store.create_run(record("r1"), lease=terms("a"))
    store.finish_run("r1", status="success", lease_owner="a")
    assert store.thread_lease("t1") is None
    store.create_run(record("r2"), lease=terms("b"))
    assert store.get_run("r2", "u").status == "running"


def test_only_the_owner_renews_or_releases(store):
    store.create_run(record("r1"), lease=terms("a", seconds=5))
    assert not store.renew_lease("t1", "b", 60)
    store.release_lease("t1", "b")
    assert store.thread_lease("t1").owner == "a"
    assert store.renew_lease("t1", "a", 60)
    assert store.thread_lease("t1").expires_at > time.time() + 30


def test_an_expired_lease_is_taken_over_and_its_run_marked_interrupted(store):
    store.create_run(record("dead"), lease=terms("a", seconds=0.05))
    time.sleep(0.1)
    assert store.thread_lease("t1") is None
    store.create_run(record("next"), lease=terms("b"))
    dead = store.get_run("dead", "u")
    assert (dead.status, dead.error) == ("error", INTERRUPTED)
    assert not store.renew_lease("t1", "a", 30)  # the dead holder cannot come back
    store.finish_run("dead", status="success", lease_owner="a")  # ...nor release the new holder's lease
    assert store.thread_lease("t1").owner == "b"


def test_startup_marks_only_runs_whose_lease_expired(store):
    store.create_thread("t2", "u")
    store.create_thread("t3", "u")
    store.create_run(record("live", "t1"), lease=terms("a"))
    store.create_run(record("expired", "t2"), lease=terms("b", seconds=0.05))
    store.create_run(record("unleased", "t3"))
    time.sleep(0.1)
    assert store.mark_interrupted_runs() == 2
    assert store.get_run("live", "u").status == "running"  # another live process's run is left alone
    assert store.get_run("expired", "u").error == INTERRUPTED
    assert store.get_run("unleased", "u").error == INTERRUPTED


def _contender(path: str, name: str, rounds: int, barrier: mp.Barrier, results: mp.Queue) -> None:
    store = MetadataStore(Path(path))
    for n in range(rounds):
        barrier.wait(timeout=60)
        try:
            store.create_run(record(f"{name}-{n}"), lease=terms(name))
            won = True
        except ThreadBusy:
            won = False
        barrier.wait(timeout=60)  # both have asked: the winner ends its run before the next round
        if won:
            store.finish_run(f"{name}-{n}", status="success", lease_owner=name)
        results.put((n, name, won))
        barrier.wait(timeout=60)


def test_two_processes_racing_for_a_thread_get_exactly_one_lease_each_round(store):
    rounds = 50
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_contender, args=(str(store.path), name, rounds, barrier, results))
             for name in ("cli", "server")]
    for proc in procs:
        proc.start()
    try:
        outcomes = [results.get(timeout=120) for _ in range(2 * rounds)]
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
    winners = {n: [name for m, name, won in outcomes if m == n and won] for n in range(rounds)}
    assert all(len(w) == 1 for w in winners.values()), winners
    assert len(store.list_runs("t1", "u")) == rounds

"""The SQL batch queue: atomic claims, leases, owner-only results, durable cancel, portable SQL.

Each behaviour runs over SQLite and over a real PostgreSQL (``batch_db``: a fresh database in the
session's throwaway cluster, skipped when PostgreSQL is not installed).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from deerflow.subagents.batches.sql import SqliteBackend
from deerflow.subagents.batches.store import BatchStore, ItemSpec
from fixtures.batch_databases import BatchDatabase, batch_db_fixture  # noqa: F401  (registers the fixture)

SQLITE_ONLY = re.compile(r"INSERT OR|ON CONFLICT|RETURNING|AUTOINCREMENT|PRAGMA|datetime\(|\bIIF\b", re.I)


class RecordingBackend(SqliteBackend):
    """SQLite that remembers every statement it ran, with its parameters."""

    def __init__(self, path: Path) -> None:
        self.statements: list[tuple[str, Sequence[Any]]] = []
        super().__init__(path)

    def execute(self, cursor: Any, sql: str, params: Sequence[Any] = ()) -> int:
        self.statements.append((sql, tuple(params)))
        return super().execute(cursor, sql, params)

    def query(self, cursor: Any, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        self.statements.append((sql, tuple(params)))
        return super().query(cursor, sql, params)


def make(db: BatchDatabase, home: Path, items: int = 10) -> tuple[BatchStore, str]:
    store = BatchStore(db.backend(home))
    batch = store.create(user_id="alice", thread_id="t", run_id="r", label="l", model_name=None,
                         items=[ItemSpec(f"item {n}", "general-purpose") for n in range(items)])
    return store, batch.batch_id


def race_to_claim(db: BatchDatabase, home: Path, workers: int = 6) -> list[tuple[str, int]]:
    """Workers with their own connections (like separate processes) claim until nothing is left."""
    claims: list[tuple[str, int]] = []
    lock = threading.Lock()
    start = threading.Barrier(workers)

    def worker(name: str, limit: int) -> None:
        own = BatchStore(db.backend(home))
        try:
            start.wait()
            while claimed := own.claim(name, lease_seconds=60, limit=limit):
                with lock:
                    claims.extend((c.batch.batch_id, c.index) for c in claimed)
        finally:
            own.close()

    threads = [threading.Thread(target=worker, args=(f"w{n}", 1 + n % 3)) for n in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return claims


def test_concurrent_workers_never_claim_the_same_item(batch_db, tmp_path):
    store, batch_id = make(batch_db, tmp_path, items=60)
    claims = race_to_claim(batch_db, tmp_path)
    assert len(claims) == 60 and len(set(claims)) == 60
    with store.backend.transaction() as cur:  # every worker died: all leases expired at once
        store.backend.execute(cur, "UPDATE subagent_batch_items SET lease_expires = 0")
    again = race_to_claim(batch_db, tmp_path)
    assert sorted(again) == sorted(claims)  # each item taken over exactly once
    rows = list(store.items(batch_id, "alice"))
    assert {(r["status"], r["attempts"]) for r in rows} == {("running", 2)}


def test_several_processes_can_create_the_schema_at_once(batch_db, tmp_path):
    start, errors = threading.Barrier(8), []

    def open_store() -> None:
        start.wait()
        try:
            BatchStore(batch_db.backend(tmp_path)).close()
        except Exception as exc:  # the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_only_the_lease_holder_finishes_and_a_finished_item_is_never_claimed_again(batch_db, tmp_path):
    store, batch_id = make(batch_db, tmp_path, items=1)
    (item,) = store.claim("a", lease_seconds=0.05)
    time.sleep(0.1)  # the lease expires: worker "a" counts as dead
    (again,) = store.claim("b", lease_seconds=60)
    assert again.index == item.index and again.attempts == 2
    assert not store.finish(item, "a", status="completed", stop_reason="finished", verdict=None, result={}, error=None)
    assert store.finish(again, "b", status="completed", stop_reason="finished", verdict="UNMET", result={},
                        error=None)
    assert store.claim("c", lease_seconds=60) == []
    counts = store.counts(batch_id)
    assert counts.execution["completed"] == 1 and counts.acceptance["UNMET"] == 1  # UNMET: finished, not retried


def test_cancel_is_owner_scoped_and_stops_pending_items_for_good(batch_db, tmp_path):
    store, batch_id = make(batch_db, tmp_path, items=5)
    (running,) = store.claim("w", lease_seconds=0.05)
    assert store.cancel(batch_id, "mallory") == -1 and store.get(batch_id, "mallory") is None
    assert store.cancel(batch_id, "alice") == 4
    assert store.claim("w2", lease_seconds=60) == []
    time.sleep(0.1)
    assert store.reap_cancelled() == 1  # the running item's worker died: the cancel finishes it
    assert store.counts(batch_id).execution["cancelled"] == 5 and running.index == 0
    assert list(store.items(batch_id, "mallory")) == []


def test_every_statement_is_portable_sql(tmp_path):
    from deerflow.subagents.batches.sql import PostgresBackend

    backend = RecordingBackend(tmp_path / "q.db")
    store = BatchStore(backend)
    batch = store.create(user_id="u", thread_id="t", run_id="r", label="l", model_name=None,
                         items=[ItemSpec("p", "general-purpose", ("file:/x exists",))])
    (item,) = store.claim("w", lease_seconds=60)
    store.renew("w", 60)
    store.finish(item, "w", status="completed", stop_reason="finished", verdict="MET", result={}, error=None)
    store.counts(batch.batch_id)
    list(store.items(batch.batch_id, "u"))
    store.cancel_requested([batch.batch_id])
    store.cancel(batch.batch_id, "u")
    store.reap_cancelled()
    store.unfinished()
    translate = PostgresBackend.translate
    for sql, params in backend.statements:
        assert not SQLITE_ONLY.search(sql), sql
        assert translate(backend, sql).count("%s") == len(params), sql  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [[], [{"prompt": "", "subagent_type": "general-purpose"}],
                                 [{"prompt": "x", "subagent_type": "nope"}]])
def test_a_bad_submission_writes_nothing(batch_db, tmp_path, bad):
    from deerflow.config.paths import ThreadPaths
    from deerflow.config.schema import AppConfig
    from deerflow.runtime.context import RunContext
    from deerflow.subagents.batches.submitter import BatchSubmitter
    from deerflow.tools.errors import ToolFailure

    store = BatchStore(batch_db.backend(tmp_path))
    context = RunContext(user_id="u", thread_id="t", run_id="r", paths=ThreadPaths(tmp_path / "t"),
                         config=AppConfig())
    with pytest.raises(ToolFailure):
        BatchSubmitter(store, max_items=5).submit(context, bad, label="l", known_types=["general-purpose"])
    assert store.list("u") == []


def test_a_postgres_connection_the_server_dropped_is_replaced(postgres_url):
    import psycopg

    from deerflow.subagents.batches.sql import PostgresBackend

    store = BatchStore(PostgresBackend(postgres_url))
    batch = store.create(user_id="u", thread_id="t", run_id="r", label="l", model_name=None,
                         items=[ItemSpec("p", "general-purpose")])
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                      "AND pid <> pg_backend_pid()")
    with pytest.raises(psycopg.OperationalError):
        store.get(batch.batch_id, "u")  # the operation that meets the dropped connection fails...
    assert store.get(batch.batch_id, "u") == batch  # ...the next one reconnects
    store.close()

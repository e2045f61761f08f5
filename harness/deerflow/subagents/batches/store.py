"""Durable batches in SQL: batches, their items, claims with leases, owner-scoped reads.

Item lifecycle: ``pending`` → ``running`` (claimed: ``lease_owner`` and
``lease_expires`` set, ``attempts`` + 1) → one terminal status
(``completed``, ``failed``, ``cancelled``, ``timed_out``).  The guarantees
come from single statements whose ``WHERE`` re-checks the state:

* **claim** — ``UPDATE ... SET status='running' ... WHERE status='pending'``
  (or ``running`` with an *expired* lease: its worker died) and the batch is
  not cancelled; a row count of 1 means this worker won the item;
* **finish** — ``... WHERE status='running' AND lease_owner=?``: only the
  current lease holder records a result, so an item ends exactly once and a
  finished item is never claimed again (terminal rows match no claim);
* **cancel** — marks the batch and every pending item cancelled in one
  transaction; claims exclude cancelled batches, so no new item starts;
  workers see ``cancel_requested`` at their next heartbeat and stop theirs.

Execution status and acceptance are separate columns: ``status`` says how
the run ended, ``acceptance_verdict`` what the harness's criteria check
found.  Nothing here retries an item because of its verdict.

Every read and write a user can reach takes ``user_id``: another user's
batch is simply not found.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.subagents.batches.sql import Row, SqlBackend

if TYPE_CHECKING:
    from deerflow.persistence.aio import AsyncStore

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS subagent_batches (
        batch_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, thread_id TEXT NOT NULL, run_id TEXT,
        label TEXT NOT NULL, model_name TEXT, status TEXT NOT NULL,
        cancel_requested INTEGER NOT NULL DEFAULT 0, item_count INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS subagent_batches_user ON subagent_batches (user_id, created_at)",
    """CREATE TABLE IF NOT EXISTS subagent_batch_items (
        batch_id TEXT NOT NULL, item_index INTEGER NOT NULL, prompt TEXT NOT NULL,
        subagent_type TEXT NOT NULL, criteria TEXT NOT NULL, status TEXT NOT NULL,
        lease_owner TEXT, lease_expires DOUBLE PRECISION, attempts INTEGER NOT NULL DEFAULT 0,
        stop_reason TEXT, acceptance_verdict TEXT, result TEXT, error TEXT,
        created_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION, finished_at DOUBLE PRECISION,
        PRIMARY KEY (batch_id, item_index))""",
    "CREATE INDEX IF NOT EXISTS subagent_batch_items_claim ON subagent_batch_items (status, lease_expires)",
)

EXECUTION_STATUSES = ("pending", "running", "completed", "failed", "cancelled", "timed_out")
TERMINAL = frozenset({"completed", "failed", "cancelled", "timed_out"})
VERDICTS = ("MET", "UNMET", "UNVERIFIED")
_CLAIMABLE = ("(status = 'pending' OR (status = 'running' AND lease_expires < ?)) AND batch_id IN "
              "(SELECT batch_id FROM subagent_batches WHERE cancel_requested = 0)")


@dataclass(frozen=True)
class ItemSpec:
    """One item to submit."""

    prompt: str
    subagent_type: str
    criteria: tuple[str, ...] = ()


@dataclass(frozen=True)
class BatchRecord:
    batch_id: str
    user_id: str
    thread_id: str
    run_id: str | None
    label: str
    model_name: str | None
    status: str
    cancel_requested: bool
    item_count: int
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class ClaimedItem:
    """An item this worker holds the lease of, with its batch."""

    batch: BatchRecord
    index: int
    prompt: str
    subagent_type: str
    criteria: tuple[str, ...]
    attempts: int


@dataclass
class BatchCounts:
    """Progress of a batch: execution and acceptance, counted separately."""

    execution: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EXECUTION_STATUSES, 0))
    acceptance: dict[str, int] = field(default_factory=lambda: {**dict.fromkeys(VERDICTS, 0), "none": 0})

    @property
    def total(self) -> int:
        return sum(self.execution.values())

    @property
    def finished(self) -> int:
        return sum(n for s, n in self.execution.items() if s in TERMINAL)


class BatchStore:
    """Batches and items on one :class:`SqlBackend` (see the module docstring)."""

    loop_guarded = True  # DEERFLOW_LOOP_GUARD=1: sync calls on an event loop's thread raise LoopBlocked

    def __init__(self, backend: SqlBackend) -> None:
        self.backend = backend
        with self._transaction() as cur:
            backend.lock_schema(cur)
            for statement in _SCHEMA:
                backend.execute(cur, statement)

    @property
    def path(self) -> Path:
        """The database, as named in :class:`~deerflow.persistence.aio.StoreUnavailable` messages."""
        return Path(getattr(self.backend, "path", None) or self.backend.describe())

    @functools.cached_property
    def aio(self) -> AsyncStore:
        """This store's methods as awaitables for async code: a bounded executor and a deadline."""
        from deerflow.persistence.aio import AsyncStore

        return AsyncStore(self)

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        if self.loop_guarded:
            from deerflow.persistence.aio import guard_loop

            guard_loop(type(self).__name__)
        with self.backend.transaction() as cur:
            yield cur

    def close(self) -> None:
        """Stop the ``.aio`` executor and release the backend's connections."""
        self.aio.close()
        self.backend.close()

    # -- submission -------------------------------------------------------------------------
    def create(self, *, user_id: str, thread_id: str, run_id: str | None, label: str, model_name: str | None,
               items: Sequence[ItemSpec]) -> BatchRecord:
        """Persist a batch and all its items as ``pending``, in one transaction."""
        now, batch_id = time.time(), f"b-{uuid.uuid4().hex[:12]}"
        with self._transaction() as cur:
            self.backend.execute(
                cur, "INSERT INTO subagent_batches (batch_id, user_id, thread_id, run_id, label, model_name, status,"
                " cancel_requested, item_count, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (batch_id, user_id, thread_id, run_id, label, model_name, "active", 0, len(items), now, now))
            for index, item in enumerate(items):
                self.backend.execute(
                    cur, "INSERT INTO subagent_batch_items (batch_id, item_index, prompt, subagent_type, criteria,"
                    " status, attempts, created_at) VALUES (?,?,?,?,?,?,?,?)",
                    (batch_id, index, item.prompt, item.subagent_type, json.dumps(list(item.criteria)), "pending",
                     0, now))
        found = self.get(batch_id, user_id)
        assert found is not None
        return found

    # -- owner-scoped reads -----------------------------------------------------------------
    def get(self, batch_id: str, user_id: str) -> BatchRecord | None:
        """The batch if it exists and belongs to ``user_id``."""
        with self._transaction() as cur:
            rows = self.backend.query(cur, "SELECT * FROM subagent_batches WHERE batch_id = ? AND user_id = ?",
                                      (batch_id, user_id))
        return _batch(rows[0]) if rows else None

    def list(self, user_id: str, *, limit: int = 50) -> list[BatchRecord]:
        with self._transaction() as cur:
            rows = self.backend.query(cur, "SELECT * FROM subagent_batches WHERE user_id = ? "
                                      "ORDER BY created_at DESC LIMIT ?", (user_id, limit))
        return [_batch(r) for r in rows]

    def counts(self, batch_id: str) -> BatchCounts:
        counts = BatchCounts()
        with self._transaction() as cur:
            for row in self.backend.query(cur, "SELECT status, acceptance_verdict, COUNT(*) AS n FROM "
                                          "subagent_batch_items WHERE batch_id = ? GROUP BY status, "
                                          "acceptance_verdict", (batch_id,)):
                counts.execution[row["status"]] = counts.execution.get(row["status"], 0) + row["n"]
                if row["status"] in TERMINAL:
                    key = row["acceptance_verdict"] or "none"
                    counts.acceptance[key] = counts.acceptance.get(key, 0) + row["n"]
        return counts

    def items(self, batch_id: str, user_id: str) -> Iterator[Row]:
        """Every item row of the user's batch, in order (nothing for another user's)."""
        if self.get(batch_id, user_id) is None:
            return iter(())
        with self._transaction() as cur:
            rows = self.backend.query(cur, "SELECT * FROM subagent_batch_items WHERE batch_id = ? "
                                      "ORDER BY item_index", (batch_id,))
        return iter(rows)

    # -- cancellation -----------------------------------------------------------------------
    def cancel(self, batch_id: str, user_id: str) -> int:
        """Cancel the batch durably; returns how many pending items were cancelled (-1: not found)."""
        now = time.time()
        with self._transaction() as cur:
            found = self.backend.execute(cur, "UPDATE subagent_batches SET cancel_requested = 1, status = 'cancelled',"
                                         " updated_at = ? WHERE batch_id = ? AND user_id = ?", (now, batch_id, user_id))
            if not found:
                return -1
            return self.backend.execute(
                cur, "UPDATE subagent_batch_items SET status = 'cancelled', stop_reason = 'cancelled', "
                "finished_at = ? WHERE batch_id = ? AND status = 'pending'", (now, batch_id))

    def cancel_requested(self, batch_ids: Sequence[str]) -> set[str]:
        """Which of these batches were cancelled (workers stop their running items)."""
        if not batch_ids:
            return set()
        marks = ",".join("?" for _ in batch_ids)
        with self._transaction() as cur:
            rows = self.backend.query(cur, f"SELECT batch_id FROM subagent_batches WHERE cancel_requested = 1 "
                                      f"AND batch_id IN ({marks})", tuple(batch_ids))
        return {r["batch_id"] for r in rows}

    # -- workers ----------------------------------------------------------------------------
    def claim(self, owner: str, lease_seconds: float, *, limit: int = 1) -> list[ClaimedItem]:
        """Claim up to ``limit`` items (pending, or running with an expired lease) for ``owner``."""
        claimed: list[ClaimedItem] = []
        now = time.time()
        with self._transaction() as cur:
            candidates = self.backend.query(
                cur, f"SELECT batch_id, item_index FROM subagent_batch_items WHERE {_CLAIMABLE} "
                "ORDER BY created_at, item_index LIMIT ?", (now, limit * 4))
        for row in candidates:
            if len(claimed) >= limit:
                break
            item = self._claim_one(row["batch_id"], row["item_index"], owner, lease_seconds)
            if item is not None:
                claimed.append(item)
        return claimed

    def _claim_one(self, batch_id: str, index: int, owner: str, lease_seconds: float) -> ClaimedItem | None:
        now = time.time()
        with self._transaction() as cur:
            won = self.backend.execute(
                cur, "UPDATE subagent_batch_items SET status = 'running', lease_owner = ?, lease_expires = ?, "
                f"attempts = attempts + 1, started_at = ? WHERE batch_id = ? AND item_index = ? AND {_CLAIMABLE}",
                (owner, now + lease_seconds, now, batch_id, index, now))
            if won != 1:
                return None
            item = self.backend.query(cur, "SELECT * FROM subagent_batch_items WHERE batch_id = ? AND "
                                      "item_index = ?", (batch_id, index))[0]
            batch = self.backend.query(cur, "SELECT * FROM subagent_batches WHERE batch_id = ?", (batch_id,))[0]
        return ClaimedItem(_batch(batch), index, item["prompt"], item["subagent_type"],
                           tuple(json.loads(item["criteria"])), item["attempts"])

    def renew(self, owner: str, lease_seconds: float) -> int:
        """Extend the leases of every item ``owner`` is running."""
        with self._transaction() as cur:
            return self.backend.execute(cur, "UPDATE subagent_batch_items SET lease_expires = ? WHERE "
                                        "lease_owner = ? AND status = 'running'", (time.time() + lease_seconds, owner))

    def finish(self, item: ClaimedItem, owner: str, *, status: str, stop_reason: str | None,
               verdict: str | None, result: dict[str, Any] | None, error: str | None) -> bool:
        """Record an item's end; False when ``owner`` no longer holds its lease (nothing written)."""
        with self._transaction() as cur:
            done = self.backend.execute(
                cur, "UPDATE subagent_batch_items SET status = ?, stop_reason = ?, acceptance_verdict = ?, result = ?,"
                " error = ?, finished_at = ?, lease_owner = NULL, lease_expires = NULL WHERE batch_id = ? AND "
                "item_index = ? AND status = 'running' AND lease_owner = ?",
                (status, stop_reason, verdict, json.dumps(result) if result is not None else None, error,
                 time.time(), item.batch.batch_id, item.index, owner))
        return done == 1

    def reap_cancelled(self) -> int:
        """End items of cancelled batches whose worker died while running them."""
        now = time.time()
        with self._transaction() as cur:
            return self.backend.execute(
                cur, "UPDATE subagent_batch_items SET status = 'cancelled', stop_reason = 'cancelled', finished_at = ?,"
                " lease_owner = NULL, lease_expires = NULL WHERE status = 'running' AND lease_expires < ? AND batch_id "
                "IN (SELECT batch_id FROM subagent_batches WHERE cancel_requested = 1)", (now, now))

    def unfinished(self) -> int:
        """Items not in a terminal status, across all batches (a worker waits for these)."""
        with self._transaction() as cur:
            rows = self.backend.query(cur, "SELECT COUNT(*) AS n FROM subagent_batch_items WHERE status IN "
                                      "('pending', 'running') AND batch_id IN (SELECT batch_id FROM "
                                      "subagent_batches WHERE cancel_requested = 0)")
        return int(rows[0]["n"])


def _batch(row: Row) -> BatchRecord:
    return BatchRecord(row["batch_id"], row["user_id"], row["thread_id"], row["run_id"], row["label"],
                       row["model_name"], row["status"], bool(row["cancel_requested"]), row["item_count"],
                       row["created_at"], row["updated_at"])


__all__ = ["EXECUTION_STATUSES", "TERMINAL", "VERDICTS", "BatchCounts", "BatchRecord", "BatchStore", "ClaimedItem",
           "ItemSpec"]

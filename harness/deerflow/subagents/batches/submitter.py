"""The batch submitter: what the batch tools, the CLI and the server API talk to.

A :class:`BatchSubmitter` validates and persists submissions, reports
progress (execution counts and acceptance counts, kept apart), cancels
durably, and exports a batch as owner-scoped JSONL — large results stay
there, never in the lead's context.  A host that installs one (the run
manager with ``subagents.batches.enabled``) also starts a
:class:`BatchWorker` on its loop; ``deerflow batches worker`` runs the same
worker in a process of its own over the same database.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.config.paths import HomePaths
from deerflow.config.schema import AppConfig, BatchesConfig
from deerflow.errors import NotFoundError, ToolFailure
from deerflow.persistence.aio import DEADLINE_SECONDS, StoreUnavailable
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import HostServices
from deerflow.subagents.acceptance import normalize_criteria
from deerflow.subagents.batches.sql import open_backend
from deerflow.subagents.batches.store import (
    BatchCounts,
    BatchRecord,
    BatchStore,
    ClaimedItem,
    ItemSpec,
)
from deerflow.subagents.batches.worker import BatchWorker, ItemRunner
from deerflow.subagents.executor import SubagentJob
from deerflow.subagents.outcome import SubagentOutcome

if TYPE_CHECKING:
    from deerflow.subagents.runtime import SubagentRuntime


@dataclass(frozen=True)
class BatchStatus:
    """A batch and its progress."""

    record: BatchRecord
    counts: BatchCounts

    @property
    def done(self) -> bool:
        return self.counts.finished >= self.counts.total

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        return {"batch_id": r.batch_id, "label": r.label, "thread_id": r.thread_id, "items": r.item_count,
                "cancelled": r.cancel_requested, "done": self.done, "finished": self.counts.finished,
                "execution": dict(self.counts.execution), "acceptance": dict(self.counts.acceptance),
                "created_at": r.created_at}


class BatchSubmitter:
    """Submission, progress, cancellation and export over one :class:`BatchStore`.

    Args:
        store: The batch store.
        max_items: Most items one submission may hold.
        worker: The in-process worker to wake on submission, if any.
    """

    def __init__(self, store: BatchStore, *, max_items: int, worker: BatchWorker | None = None) -> None:
        self.store = store
        self.max_items = max_items
        self.worker = worker

    def submit(self, context: RunContext, items: Sequence[Mapping[str, Any]], *, label: str,
               known_types: Sequence[str]) -> BatchStatus:
        """Validate and persist a batch for the run's thread (nothing is written on a bad item).

        Raises:
            ToolFailure: ``invalid_argument`` naming the first bad item.
        """
        if not items:
            raise ToolFailure("items is empty: give at least one {prompt, subagent_type}", code="invalid_argument")
        if len(items) > self.max_items:
            raise ToolFailure(f"a batch holds at most {self.max_items} items (got {len(items)})",
                              code="invalid_argument")
        specs = [_spec(i, item, known_types) for i, item in enumerate(items)]
        record = self.store.create(user_id=context.user_id, thread_id=context.thread_id,
                                   run_id=context.run_id or None, label=label, model_name=context.model_name,
                                   items=specs)
        if self.worker is not None:
            self.worker.wake()
        return self.status(record.batch_id, context.user_id)

    def status(self, batch_id: str, user_id: str) -> BatchStatus:
        """Progress of the user's batch.

        Raises:
            NotFoundError: unknown batch, or another user's.
        """
        record = self.store.get(batch_id, user_id)
        if record is None:
            raise NotFoundError(f"unknown batch {batch_id!r}")
        return BatchStatus(record, self.store.counts(batch_id))

    def cancel(self, batch_id: str, user_id: str) -> BatchStatus:
        """Cancel durably: pending items never start; running ones are stopped by their worker."""
        if self.store.cancel(batch_id, user_id) < 0:
            raise NotFoundError(f"unknown batch {batch_id!r}")
        return self.status(batch_id, user_id)

    def list(self, user_id: str) -> list[BatchStatus]:
        return [BatchStatus(r, self.store.counts(r.batch_id)) for r in self.store.list(user_id)]

    def export_lines(self, batch_id: str, user_id: str) -> Iterator[str]:
        """The user's batch as JSONL, one item per line (NotFoundError for another user's)."""
        self.status(batch_id, user_id)
        for row in self.store.items(batch_id, user_id):
            yield json.dumps(export_record(row), ensure_ascii=False)


def export_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """One exported item: its request, execution status, acceptance verdict and full result."""
    return {
        "batch_id": row["batch_id"], "item_index": row["item_index"], "prompt": row["prompt"],
        "subagent_type": row["subagent_type"], "acceptance_criteria": json.loads(row["criteria"]),
        "status": row["status"], "stop_reason": row["stop_reason"], "acceptance_verdict": row["acceptance_verdict"],
        "attempts": row["attempts"], "error": row["error"], "started_at": row["started_at"],
        "finished_at": row["finished_at"], "result": json.loads(row["result"]) if row["result"] else None,
    }


def _spec(index: int, item: Mapping[str, Any], known_types: Sequence[str]) -> ItemSpec:
    prompt = str(item.get("prompt") or "").strip()
    kind = str(item.get("subagent_type") or "").strip()
    if not prompt:
        raise ToolFailure(f"item {index}: prompt is empty", code="invalid_argument")
    if kind not in known_types:
        raise ToolFailure(f"item {index}: unknown subagent_type {kind!r}; use one of: {', '.join(known_types)}",
                          code="invalid_argument")
    return ItemSpec(prompt, kind, tuple(normalize_criteria(item.get("acceptance_criteria"))))


def item_runner(runtime: SubagentRuntime, config: AppConfig, home: HomePaths,
                services: HostServices) -> ItemRunner:
    """Runs a claimed item as a subagent in its batch's thread (no parent journal, no recorder)."""
    async def run(item: ClaimedItem) -> SubagentOutcome:
        batch = item.batch
        context = RunContext(
            user_id=batch.user_id, thread_id=batch.thread_id, run_id=f"{batch.batch_id}.{item.index}",
            paths=home.thread(batch.user_id, batch.thread_id), config=config, model_name=batch.model_name,
            services=replace(services, subagents=None),  # no delegation from a batch item
        )
        job = SubagentJob(f"{batch.batch_id}.{item.index}", item.prompt, item.subagent_type, list(item.criteria),
                          f"{batch.label} #{item.index}", context)
        return await runtime.executor.run(job)
    return run


async def open_batch_submitter(config: AppConfig, home: HomePaths, runtime: SubagentRuntime,
                               stack: AsyncExitStack, services: HostServices) -> BatchSubmitter:
    """The SQL store plus an in-process worker on the current loop (stopped with ``stack``)."""
    settings = config.subagents.batches
    store = await open_store(settings, home)
    stack.callback(store.close)  # after the worker has stopped (the stack unwinds in reverse)
    worker = BatchWorker(store, item_runner(runtime, config, home, services), concurrency=settings.concurrency,
                         lease_seconds=settings.lease_seconds)
    worker.start()
    stack.push_async_callback(worker.stop)
    return BatchSubmitter(store, max_items=settings.max_items, worker=worker)


async def open_store(settings: BatchesConfig, home: HomePaths) -> BatchStore:
    """Open the store (creating its schema) off the event loop, within the stores' deadline."""
    try:
        async with asyncio.timeout(DEADLINE_SECONDS):
            return await asyncio.to_thread(lambda: BatchStore(open_backend(settings, home)))
    except TimeoutError:
        where = Path("postgres") if settings.backend == "postgres" else Path(settings.sqlite_path or home.home / "batches.db")
        raise StoreUnavailable(where, "the batch queue did not open within "
                               f"{DEADLINE_SECONDS:g} s (the database is locked or the disk is slow)") from None


__all__ = ["BatchStatus", "BatchSubmitter", "export_record", "item_runner", "open_batch_submitter", "open_store"]

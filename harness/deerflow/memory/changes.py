"""What each extraction changed, kept in the store so a person can see it and undo it.

After an extraction writes facts, its :class:`ChangeRecord` goes into the same
``BaseStore`` under ``("memory_changes", user, agent)``, keyed by the run the
facts came from: the facts it added, each updated fact before and after, the
facts it removed.  The run view, ``deerflow run`` and the chat show its
:meth:`~ChangeRecord.summary` ("memory: +2 facts, 1 updated"), and
``memory undo RUN`` (every surface) puts the book back as it was before that
extraction: added facts deleted, updated ones restored, removed ones back.
Only the latest :data:`KEEP` records are kept.

Synchronous, like the store: async callers use :func:`asyncio.to_thread`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from deerflow.errors import NotFoundError, UserError
from deerflow.memory.book import Fact, MemoryBook
from deerflow.memory.extraction import change_summary

KEEP = 50
_LIMIT = 1_000


@dataclass
class ChangeRecord:
    """One extraction's changes to a user's facts, attributed to the run(s) it learned from."""

    run_id: str
    thread_id: str
    runs: list[str] = field(default_factory=list)  # every run of the debounced burst, the last one first
    at: float = 0.0
    added: list[dict[str, Any]] = field(default_factory=list)
    updated: list[dict[str, Any]] = field(default_factory=list)  # {"before": fact, "after": fact}
    removed: list[dict[str, Any]] = field(default_factory=list)
    undone_at: float | None = None

    def summary(self) -> str:
        """``memory: +2 facts, 1 updated`` (and ``, undone`` once undone)."""
        text = change_summary(len(self.added), len(self.updated), len(self.removed))
        return text + (" (undone)" if self.undone_at else "")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "summary": self.summary()}

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> ChangeRecord:
        known = {k: value[k] for k in cls.__dataclass_fields__ if k in value}
        return cls(**known)


def changes_namespace(book: MemoryBook) -> tuple[str, ...]:
    return ("memory_changes", *book.namespace[1:])


def record_changes(book: MemoryBook, *, runs: list[str], thread_id: str, added: list[Fact],
                   updated: list[tuple[Fact, Fact]], removed: list[Fact]) -> ChangeRecord | None:
    """Keep what one extraction changed (None when it changed nothing)."""
    if not (added or updated or removed):
        return None
    record = ChangeRecord(run_id=runs[0], thread_id=thread_id, runs=runs, at=time.time(),
                          added=[f.to_dict() for f in added],
                          updated=[{"before": b.to_dict(), "after": a.to_dict()} for b, a in updated],
                          removed=[f.to_dict() for f in removed])
    namespace = changes_namespace(book)
    book.store.put(namespace, record.run_id, asdict(record), index=False)
    for old in recent_changes(book)[KEEP:]:
        book.store.delete(namespace, old.run_id)
    return record


def recent_changes(book: MemoryBook) -> list[ChangeRecord]:
    """The kept change records, newest first."""
    items = book.store.search(changes_namespace(book), limit=_LIMIT)
    records = [ChangeRecord.from_value(i.value) for i in items if tuple(i.namespace) == changes_namespace(book)]
    return sorted(records, key=lambda r: r.at, reverse=True)


def find_change(book: MemoryBook, run: str | None = None) -> ChangeRecord | None:
    """The change record of ``run`` (an id or a prefix of one, any run of the burst); the latest without it.

    Raises:
        UserError: the prefix names several runs.
    """
    records = recent_changes(book)
    if not run:
        return records[0] if records else None
    found = [r for r in records if any(rid.startswith(run) for rid in r.runs or [r.run_id])]
    if len(found) > 1:
        raise UserError(f"{run!r} names several runs' memory changes; give more of the run id")
    return found[0] if found else None


def undo_change(book: MemoryBook, run: str | None = None) -> ChangeRecord:
    """Put the facts back as they were before ``run``'s extraction (the latest one without ``run``).

    Raises:
        NotFoundError: no memory change for that run (or none at all).
        UserError: it was undone already.
    """
    record = find_change(book, run)
    if record is None:
        what = f"run {run!r}" if run else "any run yet"
        raise NotFoundError(f"no memory change for {what} (see `memory changes`)")
    if record.undone_at:
        raise UserError(f"the memory change of run {record.run_id} was undone already")
    for fact in record.added:
        book.store.delete(book.namespace, fact["id"])
    for pair in record.updated:
        _restore(book, pair["before"])
    for fact in record.removed:
        _restore(book, fact)
    record.undone_at = time.time()
    book.store.put(changes_namespace(book), record.run_id, asdict(record), index=False)
    return record


def _restore(book: MemoryBook, fact: dict[str, Any]) -> None:
    book.write(fact["id"], {k: v for k, v in fact.items() if k != "id"})

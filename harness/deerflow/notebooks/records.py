"""Proposals and undo records of notebook edits, kept in the thread's folder.

They live beside the thread's data (``<thread>/notebook-edits/``), never under
``user-data`` (the sandbox's mounts), so agent code cannot forge or erase them.

* a **proposal** (``proposals/<id>.json``): a planned edit the user has not
  applied yet: the run, the notebook, the per-cell changes and their diff;
  status ``pending``, ``applied`` or ``discarded``;
* an **applied** record (``applied/<ns>-<id>.json``): what one write changed, per
  cell, before and after; ``%deerflow undo`` replays the inverse of a run's
  records, newest first.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deerflow.notebooks.access import NotebookError
from deerflow.notebooks.edits import CellChange
from deerflow.persistence.files import atomic_write_text

FOLDER = "notebook-edits"


@dataclass
class EditRecord:
    """A proposal or an applied edit (same shape; ``status`` says which state it is in)."""

    id: str
    run_id: str
    path: str
    changes: list[CellChange]
    status: str = "pending"
    created_at: float = field(default_factory=time.time)
    diff: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "run_id": self.run_id, "path": self.path, "status": self.status,
                "created_at": self.created_at, "diff": self.diff, "changes": [c.to_dict() for c in self.changes]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EditRecord:
        return cls(id=data["id"], run_id=data["run_id"], path=data["path"], status=data.get("status", "pending"),
                   created_at=float(data.get("created_at", 0)), diff=data.get("diff", ""),
                   changes=[CellChange.from_dict(c) for c in data.get("changes", [])])

    def summary(self) -> dict[str, Any]:
        """What a listing shows (no full cells)."""
        return {"id": self.id, "run_id": self.run_id, "path": self.path, "status": self.status,
                "cells": [c.cell_id for c in self.changes], "diff": self.diff}


class EditRecords:
    """The thread's proposals and applied edits.

    Args:
        thread_root: The thread's host folder (``ThreadPaths.root``).
    """

    def __init__(self, thread_root: Path) -> None:
        self.root = Path(thread_root) / FOLDER

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex[:12]

    def _write(self, folder: str, name: str, record: EditRecord) -> None:
        atomic_write_text(self.root / folder / f"{name}.json", json.dumps(record.to_dict(), ensure_ascii=False))

    def _read_all(self, folder: str) -> list[tuple[str, EditRecord]]:
        base = self.root / folder
        if not base.is_dir():
            return []
        found = []
        for file in sorted(base.glob("*.json")):
            try:
                found.append((file.stem, EditRecord.from_dict(json.loads(file.read_text(encoding="utf-8")))))
            except (OSError, ValueError, KeyError):
                continue  # a damaged record is skipped, not fatal: the others still apply
        return found

    # -- proposals ----------------------------------------------------------------------------
    def save_proposal(self, record: EditRecord) -> None:
        self._write("proposals", record.id, record)

    def proposals(self, *, status: str | None = "pending") -> list[EditRecord]:
        """Proposals, oldest first (``status=None``: all)."""
        found = [r for _, r in self._read_all("proposals") if status is None or r.status == status]
        return sorted(found, key=lambda r: r.created_at)

    def proposal(self, proposal_id: str | None) -> EditRecord:
        """A pending proposal by id, or the only/latest pending one when no id is given."""
        pending = self.proposals()
        if proposal_id:
            match = [r for r in self.proposals(status=None) if r.id == proposal_id]
            if not match:
                ids = ", ".join(r.id for r in pending) or "none"
                raise NotebookError(f"no proposal {proposal_id!r}; pending: {ids}", code="not_found")
            if match[0].status != "pending":
                raise NotebookError(f"proposal {proposal_id} is already {match[0].status}", code="conflict")
            return match[0]
        if not pending:
            raise NotebookError("no pending notebook edit proposal on this thread", code="not_found")
        return pending[-1]

    # -- applied edits ------------------------------------------------------------------------
    def save_applied(self, record: EditRecord) -> None:
        record.status = "applied"
        self._write("applied", f"{time.time_ns():020d}-{record.id}", record)

    def applied(self) -> list[tuple[str, EditRecord]]:
        """Applied records (name, record), oldest first."""
        return self._read_all("applied")

    def mark_undone(self, name: str, record: EditRecord) -> None:
        record.status = "undone"
        self._write("applied", name, record)

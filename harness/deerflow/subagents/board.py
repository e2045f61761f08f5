"""A live table of a run's subagents and batches, built from ``subagent`` events.

Views (the notebook widget, the chat persona, the terminal) all receive the
same ``subagent`` events: ``started``, ``running`` (usage, tool progress),
then one of ``completed``, ``failed``, ``cancelled``, ``timed_out``; batch
tools emit one per batch with its counts.  :class:`SubagentBoard` folds them
into one row per task (a terminal status is never overwritten by a late
``running``) and renders an HTML table or text lines, so every view shows
the same progress without knowing the event details.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TERMINAL = frozenset({"completed", "failed", "cancelled", "timed_out"})
MARKS = {"started": "○", "running": "◐", "completed": "✓", "failed": "✗", "cancelled": "■", "timed_out": "⏱"}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@dataclass
class BoardRow:
    """What the table shows for one subagent (or one batch)."""

    task_id: str
    label: str
    status: str = "started"
    subagent_type: str = ""
    turns: int = 0
    tokens: int = 0
    receipts: int = 0
    acceptance: str | None = None
    note: str = ""
    batch: dict[str, Any] | None = field(default=None)

    def progress(self) -> str:
        if self.batch is not None:
            return f"{self.batch.get('finished', 0)}/{self.batch.get('items', 0)} items"
        return f"{_count(self.turns, 'turn')}, {_count(self.tokens, 'token')}, {_count(self.receipts, 'receipt')}"

    def mark(self) -> str:
        """The status mark; a delegation that completed without meeting its criteria is ⚠, not ✓."""
        if self.status == "completed" and str(self.acceptance).upper() == "UNMET":
            return "⚠"
        return MARKS.get(self.status, "•")

    def line(self) -> str:
        """One line: mark, label, status, progress, acceptance, note."""
        note = f" ({self.note})" if self.note else ""
        return f"{self.mark()} {self.label} — {self.status}, {self.progress()}, " \
               f"acceptance {self.verdict()}{note}"

    def verdict(self) -> str:
        if self.batch is not None:
            counts = self.batch.get("acceptance") or {}
            return " ".join(f"{k} {v}" for k, v in counts.items() if v) or "—"
        return self.acceptance or "—"


class SubagentBoard:
    """One row per delegation, updated by each ``subagent`` event."""

    def __init__(self) -> None:
        self.rows: dict[str, BoardRow] = {}

    def update(self, event: Any) -> BoardRow:
        """Fold one ``subagent`` event (model or dict) into its row."""
        data = event if isinstance(event, Mapping) else event.model_dump()
        task_id = str(data.get("task_id"))
        row = self.rows.setdefault(task_id, BoardRow(task_id, str(data.get("label") or task_id)))
        status = str(data.get("status") or row.status)
        if row.status in TERMINAL and status not in TERMINAL:
            return row  # a late progress event never revives a finished task
        row.status = status
        _apply_detail(row, data.get("detail") or {})
        return row

    def html(self) -> str:
        """An HTML table (empty string when there is nothing to show)."""
        if not self.rows:
            return ""
        head = "".join(f"<th style='text-align:left;padding:2px 8px'>{h}</th>"
                       for h in ("", "Task", "Type", "Status", "Progress", "Acceptance", "Note"))
        body = "".join(
            "<tr>" + "".join(f"<td style='padding:2px 8px'>{html.escape(str(c))}</td>" for c in (
                r.mark(), r.label, r.subagent_type or ("batch" if r.batch else ""), r.status,
                r.progress(), r.verdict(), r.note)) + "</tr>"
            for r in self.rows.values())
        return f"<table class='deerflow-subagents'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def text_lines(self) -> list[str]:
        """One line per row, for terminals and chat."""
        return [r.line() for r in self.rows.values()]


def _apply_detail(row: BoardRow, detail: Mapping[str, Any]) -> None:
    if isinstance(detail.get("batch"), Mapping):
        row.batch = dict(detail["batch"])
        return
    row.subagent_type = str(detail.get("subagent_type") or row.subagent_type)
    if isinstance(detail.get("turns"), int):
        row.turns = detail["turns"]
    usage = detail.get("usage")
    if isinstance(usage, Mapping) and isinstance(usage.get("total_tokens"), int):
        row.tokens = usage["total_tokens"]
    if isinstance(detail.get("receipts"), int):
        row.receipts = detail["receipts"]
    receipt = detail.get("receipt")
    if isinstance(receipt, Mapping):
        row.note = f"{receipt.get('id')} {receipt.get('tool')} {receipt.get('status')}"
    if detail.get("acceptance") is not None and not isinstance(detail.get("acceptance"), Mapping):
        row.acceptance = str(detail["acceptance"])
    if detail.get("stop_reason") and row.status in TERMINAL:
        row.note = str(detail["stop_reason"]) + (f": {detail['error']}" if detail.get("error") else "")


__all__ = ["MARKS", "BoardRow", "SubagentBoard"]

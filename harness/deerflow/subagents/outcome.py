"""What a finished subagent amounts to: the structured outcome, the lead's text, the ledger entry.

Three readers, three shapes of the same facts:

* the **lead model** reads :meth:`SubagentOutcome.result_text`: status and
  stop reason, the report fenced and labelled as a self-report, the
  receipts, the citation check (execution evidence only) and the harness's
  acceptance verdicts — kept bounded so delegation never floods the
  lead's context;
* the **delegation ledger** (``delegations`` in thread state) gets
  :meth:`SubagentOutcome.ledger_entry` — compact, with the run id the
  per-run limits count by;
* **UIs and exports** get :meth:`SubagentOutcome.to_dict` (everything).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from deerflow.subagents.acceptance import AcceptanceReport
from deerflow.subagents.receipts import CitationCheck, Receipt

TerminalStatus = Literal["completed", "failed", "cancelled", "timed_out"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled", "timed_out"})

STOP_REASONS = {
    "finished": "the subagent finished on its own",
    "turn_limit": "stopped at its turn limit before finishing",
    "token_limit": "stopped at its token limit before finishing",
    "time_limit": "stopped at its time limit; it was cancelled",
    "loop_detected": "stopped by loop detection (it kept repeating a tool call)",
    "cancelled": "cancelled before it finished",
    "error": "failed with an error",
}

MAX_REPORT_CHARS = 6_000
MAX_RECEIPT_LINES = 30
LEDGER_RECEIPTS = 20


def label_for(description: str | None, prompt: str, *, limit: int = 80) -> str:
    """The progress label: the description, else the start of the prompt."""
    text = " ".join((description or "").split()) or " ".join(prompt.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"



ACCEPTANCE_LINE = "Acceptance (checked by the harness): "


def unmet_in(result_text: str) -> bool:
    """Whether a ``task`` result says its delegation missed its criteria (the tool still succeeds:
    the lead reads the verdict; views mark the call ⚠ rather than ✓)."""
    return f"\n{ACCEPTANCE_LINE}UNMET" in result_text

@dataclass
class SubagentOutcome:
    """The settled result of one delegation."""

    task_id: str
    subagent_type: str
    label: str
    status: TerminalStatus
    stop_reason: str
    report: str
    receipts: list[Receipt]
    acceptance: AcceptanceReport
    citations: CitationCheck | None
    receipts_enabled: bool
    turns: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    started_at: float = 0.0
    finished_at: float = 0.0
    tool_call_id: str | None = None

    @property
    def duration(self) -> float:
        return max(0.0, self.finished_at - self.started_at)

    def summary_detail(self) -> dict[str, Any]:
        """The compact facts shown as progress (event ``detail``)."""
        return {
            "subagent_type": self.subagent_type, "stop_reason": self.stop_reason, "turns": self.turns,
            "usage": dict(self.usage), "receipts": len(self.receipts), "error": self.error,
            "acceptance": self.acceptance.overall,
            "citations": self.citations.verdict if self.citations is not None else None,
            "duration_s": round(self.duration, 3),
        }

    def ledger_entry(self, run_id: str | None) -> dict[str, Any]:
        """The entry for ``delegations`` (same id: latest wins; terminal never downgraded)."""
        return {
            "id": self.task_id, "run_id": run_id, "label": self.label, "status": self.status,
            "tool_call_id": self.tool_call_id, **self.summary_detail(),
            "acceptance": self.acceptance.to_dict(),
            "citations": self.citations.to_dict() if self.citations is not None else None,
            "receipt_log": [r.to_dict() for r in self.receipts[-LEDGER_RECEIPTS:]],
            "started_at": self.started_at, "finished_at": self.finished_at,
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything, for the tool result's artifact, batch exports and UIs."""
        return {
            "task_id": self.task_id, "label": self.label, "status": self.status, **self.summary_detail(),
            "report": self.report, "receipt_log": [r.to_dict() for r in self.receipts],
            "acceptance": self.acceptance.to_dict(),
            "citations": self.citations.to_dict() if self.citations is not None else None,
            "receipts_enabled": self.receipts_enabled,
            "started_at": self.started_at, "finished_at": self.finished_at,
        }

    def result_text(self) -> str:
        """What the lead reads."""
        tokens = self.usage.get("total_tokens", 0)
        lines = [
            f"Subagent {self.subagent_type!r} ({self.label}): {self.status.upper()} — "
            f"{STOP_REASONS.get(self.stop_reason, self.stop_reason)}. {_count(self.turns, 'turn')}, {tokens} tokens, "
            f"{self.duration:.1f}s.",
        ]
        if self.error:
            lines.append(f"Error: {self.error}")
        lines += ["", "Report (a SELF-REPORT by the subagent, not verified by the harness):", "<report>",
                  _bounded(self.report) or "(no report)", "</report>", ""]
        lines += self._evidence_lines()
        if self.acceptance.results:
            lines += ["", f"{ACCEPTANCE_LINE}{self.acceptance.overall}", *self.acceptance.lines()]
        return "\n".join(lines)

    def _evidence_lines(self) -> list[str]:
        if not self.receipts_enabled:
            return ["Receipts are disabled: the report has no [rN] citations and there is no citation verdict."]
        shown = self.receipts[-MAX_RECEIPT_LINES:]
        lines = [f"Receipts recorded by the harness ({_count(len(self.receipts), 'tool call')}):"]
        if len(self.receipts) > len(shown):
            lines.append(f"  … {len(self.receipts) - len(shown)} earlier receipts omitted")
        lines += [f"  {r.line()}" for r in shown] or ["  (none: the subagent made no tool calls)"]
        if self.citations is not None:
            lines.append("Citation check (execution evidence only: which calls ran, not whether claims are "
                         f"true): {self.citations.summary()}")
        return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _bounded(text: str) -> str:
    text = text.strip()
    if len(text) <= MAX_REPORT_CHARS:
        return text
    return text[:MAX_REPORT_CHARS] + f"\n[… report cut: {len(text) - MAX_REPORT_CHARS} more characters]"


__all__ = ["STOP_REASONS", "TERMINAL_STATUSES", "SubagentOutcome", "TerminalStatus", "label_for"]

"""How a run looks in a terminal: the CLI's progress lines and its clarification prompt.

:class:`TerminalRenderer` writes one line per step of a run (tool calls folded to one line each,
streamed text as it comes, the finish line with delivery and usage); the CLI and the kernel's
plain-text view (``deerflow_kernel/text_view.py``) both use it.  :func:`clarification_lines` is a
question with its fields and the ``deerflow reply`` command that answers it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from deerflow.runtime.clarification_form import field_hint

if TYPE_CHECKING:  # loaded by the caller already: the events come from there
    from deerflow.runtime import events as ev


def clarification_lines(request: dict[str, Any], thread_id: str) -> list[str]:
    """A clarification request for a terminal: the question, its fields or options, how to reply."""
    lines = [f"  {line}" for line in str(request.get("context") or "").splitlines()]
    lines.append("? " + str(request.get("question", "")))
    command = f"deerflow reply {thread_id}"
    fields = request.get("fields") or []
    if fields:
        width = max(len(f["name"]) for f in fields)
        for f in fields:
            hint = field_hint(f)
            lines.append(f"    {f['name']:<{width}}  {f['label']}{' (required)' if f.get('required') else ''}"
                         + (f" — {hint}" if hint else ""))
        shown = [f for f in fields if f.get("required")] or fields[:1]
        lines.append(f"  reply with: {command} " + " ".join(f"--field {f['name']}=..." for f in shown)
                     + (" [--field NAME=... for the optional fields]" if len(shown) < len(fields) else ""))
        if any(f.get("type") == "multi_select" for f in fields):
            lines.append("  (for several choices, repeat --field or separate them with commas)")
        return lines
    options = request.get("options") or []
    lines += [f"    {i}. {o['label']}" for i, o in enumerate(options, 1)]
    lines.append(f"  reply with: {command} " + ('NUMBER or "your answer"' if options else '"your answer"'))
    return lines


class TextSink(Protocol):
    """Where a :class:`TerminalRenderer` writes: a text stream, or anything with its two methods."""

    def write(self, text: str, /) -> object: ...
    def flush(self) -> object: ...


class TerminalRenderer:
    """Human-readable progress for a terminal."""

    def __init__(self, out: TextSink) -> None:
        self.out = out
        self._streaming = False
        self._error_shown: str | None = None

    def render(self, event: ev.Event) -> None:
        from deerflow.runtime import events as ev  # loaded already: the event came from there

        match event:
            case ev.RunStarted():
                self._on_run_started(event)
            case ev.MessageDelta():
                self._on_message_delta(event)
            case ev.Message():
                self._on_message(event)
            case ev.ToolCall():
                self._on_tool_call(event)
            case ev.ToolResult():
                self._on_tool_result(event)
            case ev.Clarification():
                self._on_clarification(event)
            case ev.Subagent():
                self._on_subagent(event)
            case ev.Artifact():
                self._on_artifact(event)
            case ev.Notice():
                self._on_notice(event)
            case ev.Error():
                self._on_error(event)
            case ev.WorkspaceChanges():
                self._on_workspace_changes(event)
            case ev.RunFinished():
                self._on_run_finished(event)
            case _:  # todos: not shown in a terminal
                return
        self.out.flush()

    def _line(self, text: str) -> None:
        if self._streaming:
            self.out.write("\n")
            self._streaming = False
        self.out.write(text + "\n")

    def _on_run_started(self, e: ev.RunStarted) -> None:
        from deerflow.runtime.events import short_id  # loaded already: the event came from there

        self._line(f"● run {short_id(e.run_id)} on thread {e.thread_id} with model {e.model}")
        if e.notice:
            self._line(f"  note: {e.notice}")

    def _on_message_delta(self, e: ev.MessageDelta) -> None:
        self.out.write(e.text)
        self._streaming = True

    def _on_message(self, e: ev.Message) -> None:
        if not self._streaming:
            self.out.write(e.text)
        self.out.write("\n")
        self._streaming = False

    def _on_tool_call(self, e: ev.ToolCall) -> None:
        args = json.dumps(e.args, ensure_ascii=False)
        self._line(f"  → {e.name}({args[:160] + '…' if len(args) > 160 else args})")

    def _on_tool_result(self, e: ev.ToolResult) -> None:
        mark = "✓" if e.status == "success" else "✗"
        first = (e.text.strip().splitlines() or [""])[0]
        self._line(f"  {mark} {e.name}: {first[:160]}")

    def _on_clarification(self, e: ev.Clarification) -> None:
        self._line("\n".join(clarification_lines(e.request, e.thread_id)))

    def _on_subagent(self, e: ev.Subagent) -> None:
        if e.status == "running":  # progress ticks; the terminal shows starts and ends
            return
        detail = e.detail or {}
        extra = f", {detail['stop_reason']}" if e.status != "started" and detail.get("stop_reason") else ""
        if isinstance(detail.get("acceptance"), str):
            extra += f" — acceptance {detail['acceptance']}"
        self._line(f"  ⇢ subagent {e.label}: {e.status}{extra}")

    def _on_artifact(self, e: ev.Artifact) -> None:
        self._line(f"  ★ artifact: {e.path}")

    def _on_notice(self, e: ev.Notice) -> None:
        from deerflow.runtime.events import notice_line  # loaded already: the event is one

        self._line(f"  ! {notice_line(e)}")

    def _on_error(self, e: ev.Error) -> None:
        self._line(f"✗ error: {e.message}")
        self._error_shown = e.message

    def _on_workspace_changes(self, e: ev.WorkspaceChanges) -> None:
        marks = {"created": "+", "modified": "~", "deleted": "-"}
        entries = [(marks[kind], c) for kind in marks for c in e.changes.get(kind, [])]
        if not entries:
            return
        counts = e.changes.get("counts", {})
        self._line("  Δ files: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in marks))
        for mark, change in entries[:10]:
            self._line(f"    {mark} {change['path']}" + (f" ({change['note']})" if change.get("note") else ""))
        if len(entries) > 10:
            self._line(f"    … and {len(entries) - 10} more")

    def _on_run_finished(self, e: ev.RunFinished) -> None:
        status = f"stopped by {e.stopped_by or 'a guard'}" if e.status == "stopped" else e.status
        repeated = e.status == "error" and e.error == self._error_shown  # said once is enough
        line = f"● run finished: {status}" + (f" ({e.error})" if e.error and not repeated else "")
        receipt = e.receipt or {}
        if receipt.get("status") and receipt["status"] != "nothing_produced":
            produced = len(receipt.get("produced", []))
            shown = produced - len(receipt.get("unpresented", []))
            line += f" — delivery: {receipt['status']} ({shown} of {produced} new outputs presented)"
        self._line(line)
        from deerflow.runtime.usage import summary_line

        self._line(f"  {summary_line(e.usage)}")


__all__ = ["TerminalRenderer", "TextSink", "clarification_lines"]

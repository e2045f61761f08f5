"""The run as text, for IPython without a widget frontend (the terminal ``ipython``).

It reuses the CLI's :class:`~deerflow.terminal.TerminalRenderer`, and says how to
answer a clarification with ``%deerflow reply`` instead of a form.
"""

from __future__ import annotations

import sys
from typing import Any

from deerflow.runtime import events as ev
from deerflow.runtime.clarification_form import field_hint
from deerflow.terminal import TerminalRenderer, TextSink


class TextView(TerminalRenderer):
    """Prints the run's progress as it happens."""

    def __init__(self, out: TextSink | None = None) -> None:
        super().__init__(out or sys.stdout)
        self.events: list[ev.Event] = []

    def show(self) -> None:
        """Nothing to display up front: lines appear as events arrive."""

    def render(self, event: ev.Event) -> None:
        self.events.append(event)
        super().render(event)

    def note(self, text: str) -> None:
        self._line(f"  … {text}")

    def finish(self) -> None:
        self.out.flush()

    def _on_clarification(self, e: ev.Clarification) -> None:
        self._line("\n".join(reply_hint_lines(e.request)))


def reply_hint_lines(request: dict[str, Any]) -> list[str]:
    """The question, its fields or options, and the ``%deerflow reply`` line that answers it."""
    lines = [f"? {request.get('question', '')}"]
    fields = request.get("fields") or []
    for f in fields:
        hint = field_hint(f)
        required = " (required)" if f.get("required") else ""
        lines.append(f"    {f['name']}: {f.get('label', '')}{required}" + (f" — {hint}" if hint else ""))
    for i, option in enumerate(request.get("options") or [], 1):
        lines.append(f"    {i}. {option.get('label')}")
    if fields:
        shown = [f for f in fields if f.get("required")] or fields[:1]
        lines.append("  answer with: %deerflow reply " + " ".join(f"--field {f['name']}=..." for f in shown))
    else:
        lines.append('  answer with: %deerflow reply "your answer"')
    return lines

"""The run view's memory line: "🧠 memory: +2 facts" once a run's extraction is over, with Undo.

Memory learns after a run has finished (debounced, off the run's path), so the
line arrives a few seconds after the view's last event: the session asks the
backend for the run's change record on a background thread and appends this
line to the view.  Undo does what ``%deerflow memory undo RUN`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from deerflow.errors import UserError
from deerflow_kernel.markup import esc, hidden

_SHOWN = 3  # facts named on the line; the rest are counted


def describe(change: dict[str, Any]) -> str:
    """The line's text: the summary, then the new facts' words (so a wrong one is easy to spot)."""
    texts = [f["text"] for f in change.get("added", [])] + [p["after"]["text"] for p in change.get("updated", [])]
    shown = "; ".join(f"“{t}”" for t in texts[:_SHOWN]) + (f" and {len(texts) - _SHOWN} more" if len(texts) > _SHOWN else "")
    return change["summary"] + (f" — {shown}" if shown else "")


def memory_widget(change: dict[str, Any], undo: Callable[[str], str]) -> widgets.Widget:
    """The line and its Undo button; ``undo(run_id)`` returns what to say once done."""
    run_id = change["run_id"]
    label = widgets.HTML(f"<span style='color:#555'>🧠 {esc(describe(change))}</span>")
    button = widgets.Button(description="Undo", icon="undo", layout=widgets.Layout(width="auto"),
                            tooltip=f"Forget what this run taught memory (%deerflow memory undo {run_id[:12]})")

    def clicked(_button: Any = None) -> None:
        button.disabled = True
        try:
            said = undo(run_id)
        except UserError as exc:
            label.value = f"<span style='color:#c00'>🧠 {esc(str(exc))}</span>"
            button.disabled = False
            return
        label.value = f"<span style='color:#555'>🧠 {esc(said)}</span>"
        hidden(button, True)

    button.on_click(clicked)
    return widgets.HBox([label, button])


class FactList(list[dict[str, Any]]):
    """``%deerflow memory list``: the facts (dicts with ``id``, ``text``...), shown one line each."""

    def __repr__(self) -> str:
        from deerflow.memory.commands import render_text

        return render_text("list", {"facts": list(self)})

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def find(self, words: str) -> dict[str, Any]:
        """The one fact whose text contains ``words`` (case-insensitive); UserError if none or several."""
        found = [f for f in self if words.casefold() in f["text"].casefold()]
        if len(found) != 1:
            raise UserError(f"{len(found) or 'no'} facts mention {words!r}")
        return found[0]

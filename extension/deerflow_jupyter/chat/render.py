"""One run's events as chat messages.

A run becomes a few messages, not one per event:

* **segments** — the assistant's text and, between its paragraphs, one
  compact line per tool call (``⏳`` while running, then ``✓``/``✗``), plus
  todos, subagent progress and notices.  Streamed text is *coalesced*: deltas
  only mark the segment dirty and :meth:`RunRenderer.flush` (called by a
  timer in the session, and before every other kind of event) pushes the whole
  segment body in one edit.  So a reply streams into one chat message however
  many deltas the model sends, and the ``.chat`` file is not rewritten per token;
* **artifacts** — close the current segment; the caption follows as its own
  message under a horizontal rule, then the inline content as a rich MIME
  message (:mod:`~deerflow_jupyter.chat.artifacts`) closed by another rule, so
  a report or table never runs into the agent's text; later text starts a new
  segment below it, so the chat reads in run order;
* **a clarification** — the question as its own message (:mod:`~deerflow_jupyter.chat.clarify`);
* **the end** — one summary message: the workspace change summary, an
  undelivered-output warning when the delivery receipt says so, and how the
  run ended (with the thread id, which ``%deerflow --thread`` accepts too).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from deerflow.runtime import events as ev
from deerflow.sandbox.files.virtual_paths import OUTPUTS
from deerflow.subagents.board import SubagentBoard
from deerflow.subagents.outcome import unmet_in
from deerflow_jupyter.chat.artifacts import ArtifactView
from deerflow_jupyter.chat.clarify import describe, md_escape
from deerflow_jupyter.chat.surface import ChatSurface

_ARG_KEYS = ("path", "filepaths", "file_path", "command", "code", "query", "url", "question", "description")
# Tools whose activity the chat shows in another form (the question message).
_SILENT_TOOLS = frozenset({"ask_clarification"})
_TODO_MARKS = {"completed": "☑", "in_progress": "◐"}
_RECEIPT_KINDS = {"undelivered": "Not delivered", "partial": "Partly delivered"}
_MAX_LISTED_CHANGES = 10
RULE = "---"  # frames an artifact: a markdown horizontal rule


@dataclass
class _Block:
    kind: str  # "text" (a paragraph of assistant text) or "line" (a compact status line)
    text: str


@dataclass
class _Segment:
    """An open chat message being built from blocks (keyed, so lines can be updated)."""

    blocks: dict[str, _Block] = field(default_factory=dict)
    message_id: str | None = None

    def body(self) -> str:
        paragraphs: list[str] = []
        lines: list[str] = []
        for block in self.blocks.values():
            if block.kind == "line":
                lines.append(block.text)
                continue
            if lines:
                paragraphs.append("  \n".join(lines))
                lines = []
            if block.text.strip():
                paragraphs.append(block.text.strip())
        if lines:
            paragraphs.append("  \n".join(lines))
        return "\n\n".join(paragraphs)


def tool_summary(args: dict[str, Any]) -> str:
    """The one argument that says what a tool call is about, as inline code (or "")."""
    key = next((k for k in _ARG_KEYS if k in args), None)
    if key is None:
        return ""
    value = args[key]
    text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    if not isinstance(value, (str, list)):
        text = json.dumps(value, ensure_ascii=False)
    first = (text.strip().splitlines() or [""])[0]
    first = first if len(first) <= 80 else first[:79] + "…"
    return f" `{first.replace('`', chr(39))}`" if first else ""


class RunRenderer:
    """Writes one run to a chat.

    Args:
        surface: The chat.
        thread_id: The run's thread (named in the summary, used for links).
        artifact: Builds the view of an artifact from its virtual path.
        link: The download URL of an output file, from its path under outputs.
        seen_notices: Notice texts shown before (updated in place); shown again, they are skipped.
    """

    def __init__(self, surface: ChatSurface, *, thread_id: str, artifact: Callable[[str], ArtifactView],
                 link: Callable[[str], str], seen_notices: set[str] | None = None) -> None:
        self.surface = surface
        self.thread_id = thread_id
        self._artifact = artifact
        self._link = link
        self._segment = _Segment()
        self._dirty = False
        self._changes: dict[str, Any] | None = None
        self._receipt_notices: list[tuple[str, str]] = []
        # Notice texts already shown; the session passes one set for all its runs, so the offline
        # notice and a repeated delivery warning appear once per chat, not once per run.
        self._seen_notices: set[str] = seen_notices if seen_notices is not None else set()
        self._running: dict[str, _Segment] = {}  # tool calls without a result yet, by call id
        self.finished: ev.RunFinished | None = None
        self.clarification: dict[str, Any] | None = None
        self._subagents = SubagentBoard()

    # -- driving -----------------------------------------------------------------------------
    def handle(self, event: ev.Event) -> None:
        """Show one event (deltas are buffered until the next :meth:`flush`)."""
        match event:
            case ev.MessageDelta():
                self._text(event.message_id, event.text, append=True)
                return
            case ev.RunStarted():
                self._on_run_started(event)
            case ev.Message():
                self._on_message(event)
            case ev.ToolCall():
                self._on_tool_call(event)
            case ev.ToolResult():
                self._on_tool_result(event)
            case ev.Todos():
                self._on_todos(event)
            case ev.Subagent():
                self._on_subagent(event)
            case ev.Notice():
                self._on_notice(event)
            case ev.Error():
                self._on_error(event)
            case ev.Artifact():
                self._on_artifact(event)
            case ev.Clarification():
                self._on_clarification(event)
            case ev.WorkspaceChanges():
                self._on_workspace_changes(event)
            case ev.RunFinished():
                self._on_run_finished(event)
        self.flush()

    def flush(self) -> None:
        """Push the open segment to the chat if it changed since the last push."""
        if not self._dirty:
            return
        body = self._segment.body()
        if body:
            if self._segment.message_id is None:
                self._segment.message_id = self.surface.post(body)
            else:
                self.surface.edit(self._segment.message_id, body)
        self._dirty = False

    def note(self, key: str, markdown: str) -> None:
        """Add (or replace) a status line of the session's own, e.g. an upload."""
        self._put(f"note:{key}", "line", markdown)

    def _close_segment(self) -> None:
        self.flush()
        self._segment = _Segment()

    def _put(self, key: str, kind: str, text: str) -> None:
        self._segment.blocks[key] = _Block(kind, text)
        self._dirty = True

    def _text(self, message_id: str, text: str, *, append: bool) -> None:
        key = f"text:{message_id}"
        block = self._segment.blocks.get(key)
        if block is None or not append:
            self._put(key, "text", (block.text if block and append else "") + text)
        else:
            block.text += text
            self._dirty = True

    # -- events ------------------------------------------------------------------------------
    def _on_run_started(self, e: ev.RunStarted) -> None:
        if e.notice and e.notice not in self._seen_notices:
            self._seen_notices.add(e.notice)
            self._put("started", "line", f"_ℹ️ {md_escape(e.notice)}_")
        self.surface.set_status("is thinking…")

    def _on_message(self, e: ev.Message) -> None:
        self._text(e.message_id, e.text, append=False)

    def _on_tool_call(self, e: ev.ToolCall) -> None:
        if e.name in _SILENT_TOOLS:
            return
        self._put(f"tool:{e.call_id}", "line", f"⏳ **{md_escape(e.name)}**{tool_summary(e.args)}")
        self._running[e.call_id] = self._segment
        self.surface.set_status(f"is running {e.name}…")

    def _on_tool_result(self, e: ev.ToolResult) -> None:
        if e.name in _SILENT_TOOLS:
            return
        self._running.pop(e.call_id, None)
        block = self._segment.blocks.get(f"tool:{e.call_id}")
        line = block.text.removeprefix("⏳ ") if block else f"**{md_escape(e.name)}**"
        if e.status == "error":
            first = (e.text.strip().splitlines() or [""])[0][:160]
            self._put(f"tool:{e.call_id}", "line", f"✗ {line} — {md_escape(first)}")
        elif e.name == "task" and unmet_in(e.text):  # the delegation ran but missed its criteria
            self._put(f"tool:{e.call_id}", "line", f"⚠ {line} — acceptance not met")
        else:
            self._put(f"tool:{e.call_id}", "line", f"✓ {line}")
        self.surface.set_status("is thinking…")

    def _on_todos(self, e: ev.Todos) -> None:
        items = [f"{_TODO_MARKS.get(str(t.get('status')), '☐')} {md_escape(t.get('content', ''))}"
                 for t in e.todos]
        self._put("todos", "text", "**Plan**  \n" + "  \n".join(items))

    def _on_subagent(self, e: ev.Subagent) -> None:
        row = self._subagents.update(e)  # status, progress and acceptance (deerflow.subagents.board)
        self._put(f"subagent:{e.task_id}", "line", f"↳ subagent {md_escape(row.line())}")

    def _on_notice(self, e: ev.Notice) -> None:
        """A notice, once: the same text (the offline notice, a receipt warning) is not repeated."""
        if e.text in self._seen_notices:
            return
        self._seen_notices.add(e.text)
        if e.kind in _RECEIPT_KINDS:
            self._receipt_notices.append((e.kind, e.text))
        else:
            self._put(f"notice:{e.seq}", "line", f"⚠️ {md_escape(e.text)}")

    def _on_error(self, e: ev.Error) -> None:
        self._put(f"error:{e.seq}", "line", f"✗ **Error:** {md_escape(e.message)}")

    def _on_artifact(self, e: ev.Artifact) -> None:
        """The artifact as its own framed message(s): a rule and the caption, the content, a rule."""
        view = self._artifact(e.path)
        self._close_segment()
        if view.bundle is None:
            self.surface.post(f"{RULE}\n\n{view.caption}\n\n{RULE}")
            return
        self.surface.post(f"{RULE}\n\n{view.caption}")
        bundle = dict(view.bundle)
        if "text/markdown" in bundle:  # a report or a table: close the frame below it
            bundle["text/markdown"] = f"{bundle['text/markdown']}\n\n{RULE}"
        self.surface.post_mime(bundle, fallback=view.fallback)

    def _on_clarification(self, e: ev.Clarification) -> None:
        self._close_segment()
        self.clarification = e.request
        self.surface.post(describe(e.request))

    def _on_workspace_changes(self, e: ev.WorkspaceChanges) -> None:
        self._changes = e.changes

    def _on_run_finished(self, e: ev.RunFinished) -> None:
        self._settle_running("stopped" if e.status == "cancelled" else "no result")
        self._close_segment()
        self.finished = e
        self.surface.set_status(None)
        self.surface.post(self.summary(e))

    def _settle_running(self, why: str) -> None:
        """Mark tool calls the run left without a result (its segment may already be closed)."""
        for call_id, segment in self._running.items():
            block = segment.blocks[f"tool:{call_id}"]
            block.text = f"⏹ {block.text.removeprefix('⏳ ')} — {why}"
            if segment is not self._segment and segment.message_id is not None:
                self.surface.edit(segment.message_id, segment.body())
        self._dirty = self._dirty or any(s is self._segment for s in self._running.values())
        self._running.clear()

    # -- the end -----------------------------------------------------------------------------
    def summary(self, e: ev.RunFinished) -> str:
        """The closing message: file changes, delivery warning, how the run ended."""
        parts = [p for p in (self._changes_text(), *self._receipt_texts()) if p]
        parts.append(self._ending(e))
        return "\n\n".join(parts)

    def _changes_text(self) -> str:
        changes = self._changes or {}
        marks = {"created": "➕", "modified": "✏️", "deleted": "➖"}
        entries = [(kind, c) for kind in marks for c in changes.get(kind, [])]
        if not entries:
            return ""
        counts = changes.get("counts", {})
        head = "**Files changed:** " + ", ".join(f"{counts.get(k, 0)} {k}" for k in marks if counts.get(k))
        lines = [f"- {marks[kind]} {self._path_link(kind, c['path'])}"
                 + (f" — {md_escape(c['note'])}" if c.get("note") else "")
                 for kind, c in entries[:_MAX_LISTED_CHANGES]]
        if len(entries) > _MAX_LISTED_CHANGES:
            lines.append(f"- … and {len(entries) - _MAX_LISTED_CHANGES} more")
        return head + "\n" + "\n".join(lines)

    def _path_link(self, kind: str, path: str) -> str:
        prefix = f"{OUTPUTS}/"
        if kind != "deleted" and path.startswith(prefix):
            return f"[`{path}`]({self._link(path.removeprefix(prefix))})"
        return f"`{path}`"

    def _receipt_texts(self) -> Iterable[str]:
        for kind, text in self._receipt_notices:
            yield f"⚠️ **{_RECEIPT_KINDS[kind]}:** {md_escape(text)}"

    def _ending(self, e: ev.RunFinished) -> str:
        where = f"thread `{self.thread_id}`"
        if e.status == "success":
            return f"_✓ Run finished · {where}_"
        if e.status == "interrupted":
            return f"_⏸ Waiting for your answer · {where}_"
        if e.status == "cancelled":
            return f"**⏹ Stopped.** The run was cancelled · {where}"
        if e.status == "stopped":
            return f"**⏹ Stopped by {md_escape(e.stopped_by or 'a guard')}:** {md_escape(e.error or '')} · {where}"
        return f"**✗ The run failed:** {md_escape(e.error or 'unknown error')} · {where}"


__all__ = ["RunRenderer", "tool_summary"]

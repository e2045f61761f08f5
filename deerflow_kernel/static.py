"""The settled run as static HTML: what a notebook keeps once the live view is done.

A live view is a tree of ipywidgets; its state lives in the kernel, so a
notebook reopened after the kernel stopped (or shown by nbviewer, GitHub,
``nbconvert``) cannot draw it.  When a run settles, the view replaces its
display with the bundle built here: ``text/html`` that needs no widget
manager, no script and no icon font, with ``text/markdown`` and
``text/plain`` fallbacks.  Artifacts are inlined (images as ``data:`` URIs,
CSV as a table, markdown rendered); a clarification is shown answered with
its values, or — still waiting — with its fields and the ``%deerflow reply``
line that answers it.

Everything here is built from agent-controlled text, so every value is
escaped; markdown goes through :func:`render_markdown` (raw HTML escaped,
script links disabled, remote images not loaded).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, TypeAlias

from deerflow.runtime import events as ev
from deerflow.runtime.events import short_id
from deerflow_kernel.artifacts import (
    IMAGE_TYPES,
    MAX_INLINE_BYTES,
    MAX_TEXT_CHARS,
    TABLE_ROWS,
    TEXT_SUFFIXES,
    suffix,
)
from deerflow_kernel.markup import RECEIPT_KINDS, esc, first_line, human_size, sandboxed_iframe
from deerflow_kernel.text_view import reply_hint_lines

MAX_ARG_CHARS = 4000
_BOX = "border-left:3px solid #4a90d9;padding:2px 8px"
_CARD = "border:1px solid #ddd;padding:6px;margin:4px 0"
_PRE = "max-height:320px;overflow:auto;margin:2px 0;white-space:pre-wrap"
STATUS_TEXT = {"success": "✓ done", "interrupted": "⏸ waiting for your answer", "cancelled": "■ cancelled",
               "error": "✗ failed", "stopped": "■ stopped by a guard", "running": "… running"}


@dataclass(frozen=True)
class Note:
    """A line the view added itself (interrupts, stop requests), kept in the transcript order."""

    text: str


@dataclass(frozen=True)
class Answered:
    """The answer given to a clarification (by its form, ``%deerflow reply`` or elsewhere)."""

    request_id: str
    answer: Any
    where: str = ""


Entry: TypeAlias = "ev.Event | Note | Answered"
"""One entry of a view's transcript: a run event, or what the view added itself."""


@dataclass
class Snapshot:
    """Everything the static rendering needs from a view."""

    events: list[Entry]
    status: str
    prompt: str = ""
    thread_id: str | None = None
    model: str = ""
    error: str | None = None
    artifacts: dict[str, bytes | str] = field(default_factory=dict)  # path -> bytes, or why it is missing
    answers: dict[str, Answered] = field(default_factory=dict)
    subagents_html: str = ""
    changes_html: str = ""
    receipt_html: str = ""
    artifact_url: Callable[[str, str], str | None] | None = None
    handover: Callable[[str, str], dict[str, str] | None] | None = None  # (thread, run) -> insert target


class StaticRun:
    """A display object with the static bundle (``display(StaticRun(...), display_id=...)``)."""

    def __init__(self, html: str, markdown: str) -> None:
        self.html, self.markdown = html, markdown

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return {"text/html": self.html, "text/markdown": self.markdown, "text/plain": self.markdown}


# -- markdown ---------------------------------------------------------------------------------------
def render_markdown(text: str) -> str:
    """Agent markdown as safe HTML (raw HTML escaped, ``javascript:`` links and remote images off)."""
    try:
        import mistune
    except ImportError:  # mistune comes with nbconvert; without it, the text stays readable
        return f"<pre style='{_PRE}'>{esc(text)}</pre>"

    class _Renderer(mistune.HTMLRenderer):
        def image(self, text: str, url: str, title: str | None = None) -> str:
            if url.startswith("data:image/") and not url.startswith("data:image/svg"):
                return super().image(text, url, title)
            return f"<span title='remote image not loaded'>[image: {esc(text or url)}]</span>"

    markdown = mistune.create_markdown(renderer=_Renderer(escape=True), plugins=["table", "strikethrough"])
    return str(markdown(text))


# -- the page ---------------------------------------------------------------------------------------
def static_html(snap: Snapshot) -> str:
    """The whole run as one self-contained HTML fragment."""
    parts = [_header(snap), prompt_html(snap.prompt), _notices(snap.events), _todos(snap.events)]
    if snap.subagents_html:
        parts.append(f"<div><b>Subagents</b>{snap.subagents_html}</div>")
    parts.append(_transcript(snap))
    cards = [_artifact(snap, e) for e in _latest_artifacts(snap.events)]
    if cards:
        parts.append("<div>" + "".join(cards) + "</div>")
    parts += [f"<div>{snap.changes_html}</div>" if snap.changes_html else "",
              f"<div>{snap.receipt_html}</div>" if snap.receipt_html else ""]
    return f"<div class='deerflow-run' style='{_BOX}'>" + "".join(p for p in parts if p) + "</div>"


def _header(snap: Snapshot) -> str:
    status = STATUS_TEXT.get(snap.status, snap.status)
    if snap.status == "interrupted" and snap.answers:
        status = "✓ answered"
    thread = f" · thread <code>{esc(short_id(snap.thread_id))}</code>" if snap.thread_id else ""
    model = f" · model {esc(snap.model)}" if snap.model else ""
    problem = f" <span style='color:#c00'>{esc(snap.error)}</span>" if snap.error else ""
    return f"<div><b>DeerFlow</b>{thread}{model} · <b>{esc(status)}</b>{problem}</div>"


def receipt_html(receipt: dict[str, Any] | None) -> str:
    """The delivery receipt: were the run's new outputs presented to you?"""
    if not receipt or receipt.get("status") in (None, "nothing_produced"):
        return ""
    produced, unpresented = receipt.get("produced") or [], receipt.get("unpresented") or []
    shown = len(produced) - len(unpresented)
    line = f"<b>Delivery:</b> {esc(receipt['status'])} — {shown} of {len(produced)} new outputs presented"
    if unpresented:
        names = ", ".join(f"<code>{esc(p)}</code>" for p in unpresented)
        line += f"<div style='color:#b36b00'>⚠ produced but not presented: {names}</div>"
    return line


MAX_PROMPT_CHARS = 20_000


def prompt_html(prompt: str) -> str:
    """The prompt a run was sent, folded, as plain text (a prompt is prose, not Python: the cell's
    editor highlights it as the kernel's language, which JupyterLab offers no way to change per cell)."""
    if not prompt:
        return ""
    shown = prompt if len(prompt) <= MAX_PROMPT_CHARS else prompt[:MAX_PROMPT_CHARS] + "\n…"
    return (f"<details class='deerflow-prompt' style='color:#555;font-size:90%'><summary>prompt sent</summary>"
            f"<div style='white-space:pre-wrap;font-family:inherit;margin:2px 0 4px 1em'>{esc(shown)}</div>"
            "</details>")


def _notices(events: list[Entry]) -> str:
    lines = [e.notice for e in events if isinstance(e, ev.RunStarted) and e.notice]
    lines += [ev.notice_line(e) for e in events if isinstance(e, ev.Notice) and e.kind not in RECEIPT_KINDS]
    return "".join(f"<div style='color:#777;font-size:90%'>{esc(line)}</div>" for line in dict.fromkeys(lines))


def _todos(events: list[Entry]) -> str:
    todos = next((e.todos for e in reversed(events) if isinstance(e, ev.Todos)), None)
    if not todos:
        return ""
    marks = {"completed": "☑", "in_progress": "◐", "pending": "☐"}
    items = "".join(f"<div>{marks.get(str(t.get('status')), '☐')} {esc(t.get('content', ''))}</div>" for t in todos)
    return f"<div><b>Plan</b>{items}</div>"


def _transcript(snap: Snapshot) -> str:
    out: list[str] = []
    texts: dict[str, str] = {}
    order: list[tuple[str, Any]] = []
    tools: dict[str, tuple[ev.ToolCall, ev.ToolResult | None]] = {}
    for e in snap.events:
        if isinstance(e, ev.MessageDelta):
            if e.message_id not in texts:
                order.append(("text", e.message_id))
            texts[e.message_id] = texts.get(e.message_id, "") + e.text
        elif isinstance(e, ev.Message):
            if e.message_id not in texts:
                order.append(("text", e.message_id))
            texts[e.message_id] = e.text
        elif isinstance(e, ev.ToolCall):
            tools[e.call_id] = (e, None)
            order.append(("tool", e.call_id))
        elif isinstance(e, ev.ToolResult) and e.call_id in tools:
            tools[e.call_id] = (tools[e.call_id][0], e)
        elif isinstance(e, ev.Clarification | ev.Error | Note | Answered):
            order.append(("event", e))
    settled = snap.status not in ("running", "starting")
    python_calls: dict[str, int] = {}  # run id -> the agent cell numbers (insert keeps the agent's order)
    for kind, item in order:
        if kind == "text":
            out.append(f"<div>{render_markdown(texts[item])}</div>" if texts[item].strip() else "")
        elif kind == "tool":
            call = tools[item][0]
            if call.name == "python" and isinstance(call.args.get("code"), str):
                python_calls[call.run_id] = python_calls.get(call.run_id, 0) + 1
            out.append(_tool(*tools[item], settled=settled, handover=snap.handover,
                             number=python_calls.get(call.run_id, 0)))
        else:
            out.append(_event(snap, item))
    return "<div>" + "".join(out) + "</div>"


def _tool(call: ev.ToolCall, result: ev.ToolResult | None, *, settled: bool = True,
          handover: Callable[[str, str], dict[str, str] | None] | None = None, number: int = 0) -> str:
    if result is None:
        mark = "■" if settled else "⋯"  # a call the run's end cut short (cancelled, failed)
        title = f"{mark} {call.name}  {short_args(call.args)}" + (" (no result)" if settled else "")
    else:
        title = f"{result_mark(result)} {call.name}: {first_line(result.text, 90)}"
    body = args_html(call.args)
    if call.name == "python" and isinstance(call.args.get("code"), str):  # the hand-over, once the view is static
        from deerflow_kernel.cells import code_html, numbered

        rest = {k: v for k, v in call.args.items() if k != "code"}
        target = numbered(handover(call.thread_id, call.run_id), number) if handover is not None else None
        body = code_html(call.args["code"], insert=target) + (args_html(rest) if rest else "") + (
            f"<div style='color:#777;font-size:90%'>into your notebook: <code>%deerflow cells --run "
            f"{esc(short_id(call.run_id))}</code> puts this run's cells in a new cell below</div>")
    if result is not None:
        body += f"<div style='color:#555'><b>result</b></div><pre style='{_PRE}'>{esc(result.text[:MAX_ARG_CHARS])}</pre>"
    return f"<details style='margin:2px 0'><summary>{esc(title)}</summary>{body}</details>"


def result_mark(result: ev.ToolResult) -> str:
    """✓ or ✗ by the tool's status; ⚠ for a delegation that ended without meeting its criteria
    (the ``task`` tool succeeds then: the lead reads the verdict, the user should see it too)."""
    if result.status != "success":
        return "✗"
    from deerflow.subagents.outcome import unmet_in

    return "⚠" if result.name == "task" and unmet_in(result.text) else "✓"


def args_html(args: Mapping[str, Any]) -> str:
    """A tool call's arguments; code is shown as code, not as an escaped JSON string."""
    code = args.get("code") if isinstance(args.get("code"), str) else None
    rest = {k: v for k, v in args.items() if k != "code"} if code is not None else dict(args)
    shown = ""
    if code is not None:
        from deerflow_kernel.cells import highlight

        shown += highlight(code[:MAX_ARG_CHARS])
    if rest:
        text = json.dumps(rest, ensure_ascii=False, indent=1, default=str)
        shown += f"<pre style='{_PRE}'>{esc(text[:MAX_ARG_CHARS])}</pre>"
    return shown


def short_args(args: Mapping[str, Any]) -> str:
    """The one argument that says what a tool call is about."""
    for key in ("path", "filepaths", "command", "code", "query", "question", "url", "prompt"):
        if key in args:
            return first_line(str(args[key]), 70)
    return ""


def _event(snap: Snapshot, e: ev.Clarification | ev.Error | Note | Answered) -> str:
    if isinstance(e, ev.Clarification):
        request_id = str(e.request.get("request_id", e.call_id))
        return form_html(e.request, snap.answers.get(request_id))
    if isinstance(e, ev.Error):
        return f"<div style='color:#c00'>✗ {esc(e.kind)} error: {esc(e.message)}</div>"
    if isinstance(e, Answered):
        return f"<div style='margin:6px 0;color:#2a6'>↳ <b>You answered:</b> {esc(answer_text(e.answer))}</div>"
    return f"<div style='color:#777'><i>{esc(e.text)}</i></div>"


def form_html(request: Mapping[str, Any], answered: Answered | None) -> str:
    """The clarification card, read-only: answered with its values, or how to answer it."""
    head = "<b>? The agent asked</b>" if answered else "<b>? The agent needs your input</b>"
    context = request.get("context")
    head += f"<div style='color:#555'>{esc(context)}</div>" if context else ""
    head += f"<div style='margin:4px 0'>{esc(request.get('question', ''))}</div>"
    if answered is not None:
        where = f" <span style='color:#777'>({esc(answered.where)})</span>" if answered.where else ""
        body = f"<div style='color:#2a6'>✓ Answered{where}</div>" + answer_rows(request, answered.answer)
        border = "#8c8"
    else:
        body = f"<pre style='{_PRE}'>{esc(chr(10).join(reply_hint_lines(dict(request))[1:]))}</pre>"
        border = "#f0ad4e"
    return f"<div class='deerflow-form' style='border:1px solid {border};padding:8px;margin:6px 0'>{head}{body}</div>"


def answer_rows(request: Mapping[str, Any], answer: Any) -> str:
    """An answer as ``label: value`` rows (form fields) or one line (text)."""
    if not isinstance(answer, Mapping):
        return f"<div>{esc(answer_text(answer))}</div>"
    labels = {str(f.get("name")): str(f.get("label") or f.get("name")) for f in request.get("fields") or []}
    return "".join(f"<div><b>{esc(labels.get(str(k), k))}:</b> {esc(value_text(v))}</div>" for k, v in answer.items())


def value_text(value: Any) -> str:
    """One answered value as a person reads it (``yes`` rather than Python's ``True``)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(value_text(v) for v in value)
    return str(value)


def answer_text(answer: Any) -> str:
    if isinstance(answer, Mapping):
        return ", ".join(f"{k}: {value_text(v)}" for k, v in answer.items())
    return value_text(answer)


# -- artifacts --------------------------------------------------------------------------------------
def _latest_artifacts(events: list[Entry]) -> list[ev.Artifact]:
    found: dict[str, ev.Artifact] = {}
    for e in events:
        if isinstance(e, ev.Artifact):
            found.pop(e.path, None)
            found[e.path] = e
    return list(found.values())


def _artifact(snap: Snapshot, e: ev.Artifact) -> str:
    data = snap.artifacts.get(e.path)
    url = snap.artifact_url(e.thread_id, e.path) if snap.artifact_url else None
    name = PurePosixPath(e.path).name
    link = f" · <a href='{esc(url)}' target='_blank' download='{esc(name)}'>download</a>" if url else ""
    size = human_size(len(data)) if isinstance(data, bytes) else human_size(e.size)
    title = f"<div><b>{esc(name)}</b> <span style='color:#777'>{esc(e.path)} · {size}</span>{link}</div>"
    if isinstance(data, bytes):
        body = artifact_body_html(name, data)
    else:
        body = f"<i>could not load it: {esc(data or 'not read')}</i>"
    return f"<div class='deerflow-artifact' style='{_CARD}'>{title}{body}</div>"


def artifacts_html(thread_id: str, paths: list[str], read: Callable[[str], bytes],
                   url: Callable[[str, str], str | None] | None = None) -> str:
    """Cards for ``%deerflow artifacts``: static, so the listing survives reopening too."""
    from deerflow.errors import UserError

    loaded: dict[str, bytes | str] = {}
    for path in paths:
        try:
            loaded[path] = read(path)
        except (UserError, OSError) as exc:
            loaded[path] = str(exc)
    snap = Snapshot(events=[], status="", artifacts=loaded, artifact_url=url)
    cards = [_artifact(snap, ev.Artifact(run_id="", thread_id=thread_id, path=p, name=PurePosixPath(p).name))
             for p in paths]
    return "<div class='deerflow-artifacts'>" + "".join(cards) + "</div>"


def artifact_body_html(name: str, data: bytes) -> str:
    """One artifact's content as static HTML, by kind."""
    ext = suffix(name)
    if len(data) > MAX_INLINE_BYTES:
        return f"<i>too big to show inline ({human_size(len(data))}).</i>"
    if ext in IMAGE_TYPES:
        uri = f"data:image/{IMAGE_TYPES[ext]};base64,{base64.b64encode(data).decode()}"
        return f"<img src='{uri}' alt='{esc(name)}' style='max-width:100%;width:auto;height:auto'/>"
    text = data.decode("utf-8", errors="replace") if ext in TEXT_SUFFIXES else None
    if text is None:
        return "<i>binary file, not shown inline.</i>"
    if ext in {".md", ".markdown"}:
        return render_markdown(text[:MAX_TEXT_CHARS])
    if ext in {".html", ".htm"}:
        return sandboxed_iframe(text)
    if ext in {".csv", ".tsv"}:
        table = _table_html(ext, data)
        if table is not None:
            return table
    shown = text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + "\n…"
    return f"<pre style='{_PRE}'>{esc(shown)}</pre>"


def _table_html(ext: str, data: bytes) -> str | None:
    from deerflow_kernel.artifacts import _dataframe

    try:
        frame = _dataframe(ext, data)
    except ValueError:
        return None
    if frame is None:
        return None
    shown = frame.head(TABLE_ROWS).to_html(max_cols=30, border=0)  # to_html escapes cell values
    more = f"<div style='color:#777'>first {TABLE_ROWS} of {len(frame):,} rows</div>" if len(frame) > TABLE_ROWS else ""
    return f"<div style='max-height:320px;overflow:auto'>{shown}</div>{more}"


# -- markdown fallback ------------------------------------------------------------------------------
def transcript_markdown(events: list[Entry], answers: Mapping[str, Answered] | None = None) -> str:
    """What the run said and did, as markdown (for viewers that show neither widgets nor HTML)."""
    answers = answers or {}
    lines: list[str] = []
    for e in events:
        if isinstance(e, ev.Message):
            lines.append(e.text.strip())
        elif isinstance(e, ev.ToolCall):
            lines.append(f"- → `{e.name}` {short_args(e.args)}")
        elif isinstance(e, ev.ToolResult):
            lines.append(f"  - {result_mark(e)} {first_line(e.text, 100)}")
        elif isinstance(e, ev.Clarification):
            lines.append(f"**Question:** {e.request.get('question', '')}")
            answered = answers.get(str(e.request.get("request_id", e.call_id)))
            if answered is None:
                lines.append("```\n" + "\n".join(reply_hint_lines(dict(e.request))[1:]) + "\n```")
        elif isinstance(e, Answered):
            lines.append(f"**You answered:** {answer_text(e.answer)}")
        elif isinstance(e, ev.Artifact):
            lines.append(f"- artifact: `{e.path}`")
        elif isinstance(e, ev.Error):
            lines.append(f"**✗ {e.kind} error:** {e.message}")
        elif isinstance(e, Note):
            lines.append(f"*{e.text}*")
        elif isinstance(e, ev.RunFinished):
            lines.append(f"*DeerFlow run: {STATUS_TEXT.get(e.status, e.status)}* (thread `{short_id(e.thread_id)}`)")
            receipt = e.receipt or {}
            if receipt.get("status") not in (None, "nothing_produced"):
                lines.append(f"*Delivery: {receipt['status']}*")
    return "\n\n".join(line for line in lines if line) or "*DeerFlow: starting…*"

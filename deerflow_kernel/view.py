"""The live view of a run: one ipywidgets tree per ``%%deerflow`` cell.

Every part is a widget whose synced traits change as events arrive —
streamed text (markdown in an ``Output``), tool calls collapsed in an
``Accordion`` whose titles carry the status (✓/✗ and a short result),
todos, subagent progress, the clarification form card, artifacts, the
workspace change summary and the delivery receipt.  No custom frontend
code: JupyterLab, Notebook 7 and VS Code render it as they render any
ipywidget.

The view follows a *thread*: when its clarification form is submitted, the
next run streams into the same view.  While a run streams, the header has a
**Stop** button; when a run ends without finishing (the server stopped, a
cancel, a guard), a **Continue** button resumes it into the same view, like
``%deerflow continue`` (both, and the running clock, in :mod:`deerflow_kernel.controls`).

Widgets only live as long as the kernel, so live widgets are shown only while
a run is live or waiting for an answer.  When it settles, :meth:`RunView.finish`
replaces the display with the static rendering of :mod:`deerflow_kernel.static`
(HTML, markdown and plain text), which is what a saved notebook keeps: reopened
without a kernel, or shown by nbviewer, GitHub or ``nbconvert``, it shows what
the user saw.  A waiting view carries that rendering as a fallback beside the
widget, with the form's fields and the ``%deerflow reply`` line that answers it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import ipywidgets as widgets
from IPython.display import display

from deerflow.errors import UserError
from deerflow.runtime import events as ev
from deerflow.runtime.events import short_id
from deerflow.subagents.board import SubagentBoard
from deerflow_kernel.artifacts import artifact_card
from deerflow_kernel.cells import PYTHON_TOOL, code_html, numbered, python_call_widget
from deerflow_kernel.controls import RunControls, stop_button_html
from deerflow_kernel.form import Answer, ClarificationForm
from deerflow_kernel.markup import (
    RECEIPT_KINDS,
    esc,
    first_line,
    hidden,
    human_size,
    icon,
    markdown_bundle,
)
from deerflow_kernel.static import (
    Answered,
    Entry,
    Note,
    Snapshot,
    StaticRun,
    args_html,
    prompt_html,
    receipt_html,
    result_mark,
    short_args,
    static_html,
)
from deerflow_kernel.static import transcript_markdown as _markdown

TEXT_PUSH_SECONDS = 0.1
_STATUS = {"success": "done", "interrupted": "waiting for your answer", "cancelled": "cancelled", "error": "failed",
           "stopped": "stopped by a guard"}
_STATUS_ICONS = {"success": icon("check", "#2e7d32"), "interrupted": icon("pause-circle", "#f0ad4e"),
                 "cancelled": icon("stop"), "error": icon("times", "#c00"), "stopped": icon("stop", "#f0ad4e")}
UNFINISHED = ("error", "cancelled", "stopped", "running")  # "running": the stream broke (the server stopped)
_TODO_MARKS = {"completed": "☑", "in_progress": "◐", "pending": "☐"}
class View(Protocol):
    """What the session needs from a view (widget or plain text)."""

    def show(self) -> None: ...
    def render(self, event: ev.Event) -> None: ...
    def note(self, text: str) -> None: ...
    def finish(self) -> None: ...


class _TextBlock:
    """One assistant message, streamed as markdown (pushed at most every TEXT_PUSH_SECONDS)."""

    def __init__(self) -> None:
        self.widget = widgets.Output()
        self.text = ""
        self._pushed = 0.0

    def add(self, piece: str) -> None:
        self.text += piece
        if time.monotonic() - self._pushed >= TEXT_PUSH_SECONDS:
            self.push()

    def push(self, final: str | None = None) -> None:
        if final is not None:
            self.text = final
        self.widget.outputs = (markdown_bundle(self.text),)
        self._pushed = time.monotonic()


class RunView(RunControls, widgets.VBox):
    """The live view (see the module docstring).

    Args:
        read_artifact: ``(thread_id, path) -> bytes``, to show artifacts inline.
        artifact_url: ``(thread_id, path) -> url | None``, for download links.
        on_reply: Called as ``on_reply(view, request, answer)`` when the form is
            submitted; it must return quickly (start the next run in the background).
    """

    def __init__(self, *, read_artifact: Callable[[str, str], bytes],
                 artifact_url: Callable[[str, str], str | None] | None = None,
                 on_reply: Callable[[RunView, dict[str, Any], Answer], None] | None = None,
                 on_continue: Callable[[RunView], None] | None = None,
                 on_insert: Callable[..., str] | None = None, api: str | None = None) -> None:
        self._read, self._url, self._on_reply = read_artifact, artifact_url, on_reply
        self._api = api  # the server's API path: Stop posts the cancel from the browser (stop_button_html)
        self._on_continue, self._on_insert = on_continue, on_insert
        self.events: list[Entry] = []
        self.thread_id: str | None = None
        self.status = "starting"
        self._blocks: dict[str, _TextBlock] = {}
        self._tools: dict[str, tuple[widgets.Accordion, int, widgets.HTML]] = {}
        self._noticed: set[str] = set()
        self._prompt = ""
        self._python_calls: dict[str, int] = {}  # run id -> python calls so far (the agent cell numbers)
        self._group: widgets.Accordion | None = None
        self._subagents = SubagentBoard()  # one row per subagent/batch (deerflow.subagents.board)
        self._cards: dict[str, widgets.Widget] = {}
        self._model = ""
        self._error: str | None = None
        self.forms: dict[str, ClarificationForm] = {}
        self.header = widgets.HTML()
        self.notices = widgets.HTML()
        self.transcript = widgets.VBox()
        self.todos = widgets.HTML()
        self.subagents = widgets.HTML()
        self.artifacts = widgets.VBox()
        self.changes = widgets.HTML()
        self.receipt = widgets.HTML()
        self._handle: Any = None
        self._artifact_data: dict[str, bytes | str] = {}
        self.answers: dict[str, Answered] = {}
        self._cancel: Callable[[], Any] | None = None
        self.stop = widgets.Button(description="Stop", icon="stop", button_style="danger", tooltip="Cancel this run",
                                   layout=widgets.Layout(width="auto"))
        self.stop.on_click(self._stop_clicked)
        hidden(self.stop, True)
        self.resume = widgets.Button(description="Continue", icon="play", button_style="success",
                                     tooltip="Continue this run from where it stopped (like %deerflow continue)",
                                     layout=widgets.Layout(width="auto"))
        self.resume.on_click(self._continue_clicked)
        hidden(self.resume, True)
        self.browser_stop = widgets.HTML()
        self.clock = widgets.HTML()
        self._ticking: threading.Event | None = None
        self._clock_lock = threading.Lock()
        self._top = widgets.HBox([self.header, self.clock, self.stop, self.resume])
        parts = [self._top, self.notices, self.todos, self.subagents, self.transcript, self.artifacts,
                 self.changes, self.receipt]
        super().__init__(parts, layout=widgets.Layout(border_left="3px solid #4a90d9", padding="2px 8px"))
        for part in (self.notices, self.todos, self.subagents, self.artifacts, self.changes, self.receipt):
            hidden(part, True)
        self._set_header()

    # -- the View protocol --------------------------------------------------------------------
    def show(self) -> None:
        self._handle = display(self, display_id=True)

    def finish(self) -> None:
        """The run settled: a waiting view keeps its live form, anything else becomes static."""
        self.detach()
        resumable = self.resumable
        hidden(self.resume, not resumable)
        self.resume.disabled = False
        if self._handle is not None:
            self._handle.update(self if self.waiting or resumable else self.static())

    @property
    def waiting(self) -> bool:
        """True while the view's last run waits on a question nobody has answered yet."""
        return self.status == "interrupted" and any(rid not in self.answers for rid in self.forms)

    @property
    def resumable(self) -> bool:
        """True when the view's last run ended unfinished and the Continue button can resume it."""
        return self._on_continue is not None and self.thread_id is not None and self.status in UNFINISHED

    def static(self) -> StaticRun:
        """The view as static HTML / markdown (what a saved notebook keeps)."""
        return StaticRun(static_html(self.snapshot()), self.summary_markdown())

    def show_prompt(self, prompt: str) -> None:
        """The prompt as sent ({name} values filled in, uploads named), as plain text: what left the notebook."""
        self._prompt = prompt
        self.notices.value = prompt_html(prompt) + self.notices.value
        hidden(self.notices, False)

    def snapshot(self) -> Snapshot:
        return Snapshot(events=list(self.events), status=self.status, thread_id=self.thread_id, model=self._model,
                        prompt=self._prompt,
                        error=self._error, artifacts=dict(self._artifact_data), answers=dict(self.answers),
                        subagents_html=self._subagents.html(), changes_html=self.changes.value,
                        receipt_html=self.receipt.value, artifact_url=self._url, handover=self.handover)

    def handover(self, thread_id: str, run_id: str) -> dict[str, str] | None:
        """Where the browser's "insert as a new cell below" posts a call's code (None: not possible here)."""
        target = getattr(self._on_insert, "target", None)
        return target(thread_id, run_id) if target is not None else None

    def mark_answered(self, request_id: str, answer: Any, *, where: str = "", refresh: bool = True) -> None:
        """The question was answered (here or anywhere else): the form turns read-only with the answer.

        A view that is no longer live is re-rendered, so the saved notebook shows the answer too.
        """
        form = self.forms.get(request_id)
        if form is None or request_id in self.answers:
            return
        self.answers[request_id] = Answered(request_id, answer, where)
        form.show_answered(answer, where=where)
        if refresh and not self.live and self._handle is not None:
            self._handle.update(self if self.waiting else self.static())

    def note(self, text: str) -> None:
        self.events.append(Note(text))
        self._append(widgets.HTML(f"<i style='color:#777'>{esc(text)}</i>"))

    def render(self, event: ev.Event) -> None:
        self.events.append(event)
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
            case ev.Artifact():
                self._on_artifact(event)
            case ev.Todos():
                self._on_todos(event)
            case ev.Subagent():
                self._on_subagent(event)
            case ev.WorkspaceChanges():
                self._on_workspace_changes(event)
            case ev.Notice():
                self._on_notice(event)
            case ev.Error():
                self._on_error(event)
            case ev.RunFinished():
                self._on_run_finished(event)

    def begin_continue(self) -> None:
        """Mark, in the transcript, where the continued run starts (Continue button)."""
        hidden(self.resume, True)
        self._append(widgets.HTML("<div style='margin:6px 0;color:#2a6'>↳ <b>Continued</b> from where it stopped</div>"))

    def begin_reply(self, answer: Answer, request_id: str = "") -> None:
        """Mark, in the transcript, the answer that starts the next run."""
        from deerflow_kernel.static import answer_text

        self.events.append(Answered(request_id, answer))
        shown = answer_text(answer)
        self._append(widgets.HTML(f"<div style='margin:6px 0;color:#2a6'>↳ <b>You answered:</b> {esc(shown)}</div>"))

    # -- events ---------------------------------------------------------------------------------
    def _on_run_started(self, e: ev.RunStarted) -> None:
        self.thread_id, self.status, self._model = e.thread_id, "running", e.model
        self._set_header()
        if self.live and self._api and e.thread_id and e.run_id:  # a click must not wait for the cell to end
            self.browser_stop.value = stop_button_html(self._api, e.thread_id, e.run_id)
            self._use_stop(self.browser_stop)
        if e.notice:
            self._notice(e.notice)

    def _on_message_delta(self, e: ev.MessageDelta) -> None:
        self._block(e.message_id).add(e.text)

    def _on_message(self, e: ev.Message) -> None:
        self._block(e.message_id).push(e.text)

    def _on_tool_call(self, e: ev.ToolCall) -> None:
        if self._group is None:
            self._group = widgets.Accordion(selected_index=None)
            self._append(self._group)
        code = e.args.get("code") if e.name == PYTHON_TOOL else None
        if isinstance(code, str):  # the agent's cell: highlighted, copy, insert as a new cell below
            rest = args_html({k: v for k, v in e.args.items() if k != "code"}) if len(e.args) > 1 else ""
            number = self._python_calls[e.run_id] = self._python_calls.get(e.run_id, 0) + 1
            target = numbered(self.handover(e.thread_id, e.run_id), number)
            insert, on_insert = None, self._on_insert
            if target is None and on_insert is not None:  # no server: the kernel writes it (when idle)
                insert = lambda source, e=e, n=number: on_insert(  # noqa: E731
                    source, thread_id=e.thread_id, run_id=e.run_id, number=n)
            if target is not None:  # the browser posts it: works while the kernel is busy, and once static
                detail = shown = widgets.HTML(code_html(code, insert=target) + rest)
            else:
                detail, shown = python_call_widget(code, rest, insert)
        else:
            detail = shown = widgets.HTML(args_html(e.args))
        group = self._group
        group.children = (*group.children, shown)
        group.set_title(len(group.children) - 1, f"⋯ {e.name}  {_short_args(e.args)}")
        self._tools[e.call_id] = (group, len(group.children) - 1, detail)

    def _on_tool_result(self, e: ev.ToolResult) -> None:
        found = self._tools.get(e.call_id)
        if found is None:
            return
        group, index, detail = found
        mark = result_mark(e)
        group.set_title(index, f"{mark} {e.name}: {first_line(e.text, 90)}")
        detail.value += f"<div style='color:#555'><b>result</b></div><pre style='max-height:240px;overflow:auto;" \
                        f"margin:0'>{esc(e.text[:4000])}</pre>"

    def _on_clarification(self, e: ev.Clarification) -> None:
        on_submit, on_reply = None, self._on_reply
        if on_reply is not None:
            on_submit = lambda answer, request=e.request: on_reply(self, request, answer)  # noqa: E731
        form = ClarificationForm(e.request, on_submit)
        self.forms[str(e.request.get("request_id", e.call_id))] = form
        self._append(form)

    def _on_artifact(self, e: ev.Artifact) -> None:
        thread = e.thread_id
        url = self._url(thread, e.path) if self._url else None

        def read() -> bytes:
            try:
                data = self._read(thread, e.path)
            except (UserError, OSError) as exc:
                self._artifact_data[e.path] = str(exc)
                raise
            self._artifact_data[e.path] = data
            return data

        card = artifact_card(e.path, read, url=url,
                             hint=f'result.load("{e.name}")')
        old = self._cards.get(e.path)
        self._cards[e.path] = card
        self.artifacts.children = (*(c for c in self.artifacts.children if c is not old), card)
        hidden(self.artifacts, False)

    def _on_todos(self, e: ev.Todos) -> None:
        items = "".join(f"<div>{_TODO_MARKS.get(str(t.get('status')), '☐')} {esc(t.get('content', ''))}</div>"
                        for t in e.todos)
        self.todos.value = f"<b>Plan</b>{items}"
        hidden(self.todos, not e.todos)

    def _on_subagent(self, e: ev.Subagent) -> None:
        self._subagents.update(e)
        self.subagents.value = "<b>Subagents</b>" + self._subagents.html()
        hidden(self.subagents, False)

    def _on_workspace_changes(self, e: ev.WorkspaceChanges) -> None:
        self.changes.value = changes_html(e.changes)
        hidden(self.changes, not self.changes.value)

    def _on_notice(self, e: ev.Notice) -> None:
        if e.kind in RECEIPT_KINDS:  # the receipt box below says it, with the files
            return
        self._notice(ev.notice_line(e))

    def _on_error(self, e: ev.Error) -> None:
        self._append(widgets.HTML(f"<div style='color:#c00'>✗ {esc(e.kind)} error: {esc(e.message)}</div>"))

    def _on_run_finished(self, e: ev.RunFinished) -> None:
        for block in self._blocks.values():  # text a cancelled run streamed but never completed
            block.push()
        self.status, self._error = e.status, e.error
        self.detach()
        self._set_header(e.error)
        self.receipt.value = receipt_html(e.receipt)
        hidden(self.receipt, not self.receipt.value)
        self._group = None

    # -- helpers --------------------------------------------------------------------------------
    def _block(self, message_id: str) -> _TextBlock:
        if message_id not in self._blocks:
            self._blocks[message_id] = _TextBlock()
            self._append(self._blocks[message_id].widget)
            self._group = None
        return self._blocks[message_id]

    def _append(self, widget: widgets.Widget) -> None:
        self.transcript.children = (*self.transcript.children, widget)

    def _notice(self, text: str) -> None:
        """A notice line, once per view (a continued run starts again with the same offline notice)."""
        if text in self._noticed:
            return
        self._noticed.add(text)
        self.notices.value += f"<div style='color:#777;font-size:90%'>{icon('info-circle')} {esc(text)}</div>"
        hidden(self.notices, False)

    def _set_header(self, error: str | None = None) -> None:
        label = _STATUS.get(self.status, f"{self.status}…")
        status = f"{_STATUS_ICONS.get(self.status, icon('circle-o-notch fa-spin'))} {label}"
        thread = f" · thread <code>{esc(short_id(self.thread_id))}</code>" if self.thread_id else ""
        model = f" · model {esc(self._model)}" if self._model else ""
        problem = f" <span style='color:#c00'>{esc(error)}</span>" if error else ""
        self.header.value = f"<b>DeerFlow</b>{thread}{model} · <b>{status}</b>{problem}"

    def summary_markdown(self) -> str:
        """A markdown transcript of the view so far (the static fallback)."""
        return _markdown(self.events, self.answers)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget, with the static rendering as the fallback for viewers without widgets."""
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        static = self.static()
        return {**bundle, **static._repr_mimebundle_()}


_short_args = short_args


def changes_html(changes: dict[str, Any]) -> str:
    """The workspace change summary: counts, then one line per file with its diff collapsed."""
    marks = {"created": "+", "modified": "~", "deleted": "−"}
    entries = [(marks[k], c) for k in marks for c in changes.get(k) or []]
    if not entries:
        return ""
    counts = changes.get("counts") or {}
    head = ", ".join(f"{counts.get(k, 0)} {k}" for k in marks)
    rows = []
    for mark, change in entries[:30]:
        line = f"{mark} <code>{esc(change.get('path', ''))}</code>"
        line += f" <span style='color:#777'>{human_size(change.get('size'))}</span>" if change.get("size") else ""
        line += f" <i>({esc(change['note'])})</i>" if change.get("note") else ""
        if change.get("diff"):
            line = f"<details><summary>{line}</summary><pre style='max-height:240px;overflow:auto'>" \
                   f"{esc(change['diff'])}</pre></details>"
        rows.append(f"<div>{line}</div>")
    more = f"<div>… and {len(entries) - 30} more</div>" if len(entries) > 30 else ""
    return f"<b>Files changed</b> <span style='color:#777'>({head})</span>{''.join(rows)}{more}"


def transcript_markdown(events: list[Entry]) -> str:
    """What the run said and did, as markdown (see :func:`deerflow_kernel.static.transcript_markdown`)."""
    return _markdown(events)

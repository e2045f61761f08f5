"""The clarification form card and the live view, driven the way a frontend drives them.

Widgets talk to the frontend through a comm; here a recording comm stands in
for JupyterLab (the pattern of ``ipywidgets/widgets/tests/utils.py``): we see
which widget models the frontend is asked to create and which trait updates
it receives, and we send the messages a user's typing and clicking produce.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import comm
import ipywidgets as widgets
import pytest

from deerflow.agents.clarification_reply import prepare_reply
from deerflow.runtime import events as ev
from deerflow_kernel.form import ClarificationForm
from deerflow_kernel.markup import inert_markdown
from deerflow_kernel.view import RunView


class RecordingComm:
    """A comm that records what the kernel sends and lets a test play the frontend."""

    kernel = "recording"

    def __init__(self, **kwargs: Any) -> None:
        self.comm_id = kwargs.get("comm_id") or uuid.uuid4().hex
        self.state = dict(kwargs.get("data", {}).get("state", {}))
        self.sent: list[dict[str, Any]] = []
        self._handler: Any = None

    def on_msg(self, callback: Any) -> None:
        self._handler = callback

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.sent.append(data)
        if isinstance(data, dict) and data.get("method") == "update":
            self.state.update(data["state"])

    def close(self, *args: Any, **kwargs: Any) -> None:
        pass

    def frontend(self, data: dict[str, Any]) -> None:
        self._handler({"content": {"data": data}, "buffers": []})


@pytest.fixture(autouse=True)
def recording_comm(monkeypatch):
    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: RecordingComm(**kwargs))
    return RecordingComm


def type_in(widget: widgets.Widget, **state: Any) -> None:
    """What the frontend sends when the user edits a widget."""
    widget.comm.frontend({"method": "update", "state": state, "buffer_paths": []})


def click(button: widgets.Button) -> None:
    button.comm.frontend({"method": "custom", "content": {"event": "click"}})


FORM = {
    "version": 2, "kind": "human_input_request", "request_id": "clarification:call_0_0", "input_mode": "form",
    "question": "How should I scope this?",
    "fields": [
        {"name": "region", "label": "Region", "type": "text", "required": True, "placeholder": "e.g. Midwest"},
        {"name": "notes", "label": "Notes", "type": "textarea", "required": False},
        {"name": "sources", "label": "Sources", "type": "number", "required": False},
        {"name": "focus", "label": "Focus", "type": "select", "required": True,
         "options": [{"id": "f-1", "label": "Survival", "value": "Survival"},
                     {"id": "f-2", "label": "Movement", "value": "Movement"}]},
        {"name": "tags", "label": "Tags", "type": "multi_select", "required": False,
         "options": [{"id": "t-1", "label": "a", "value": "a"}, {"id": "t-2", "label": "b", "value": "b"},
                     {"id": "t-3", "label": "c", "value": "c"}]},
        {"name": "consent", "label": "I agree", "type": "checkbox", "required": True},
        {"name": "deadline", "label": "Needed by", "type": "date", "required": False},
    ],
}


def test_each_field_type_becomes_its_widget_and_required_fields_are_marked():
    form = ClarificationForm(FORM, on_submit=lambda answer: None)
    models = {f.name: f.input.comm.state["_model_name"] for f in form.fields}
    assert models == {"region": "TextModel", "notes": "TextareaModel", "sources": "FloatTextModel",
                      "focus": "DropdownModel", "tags": "SelectMultipleModel", "consent": "CheckboxModel",
                      "deadline": "DatePickerModel"}
    labels = {f.name: f.label.comm.state["value"] for f in form.fields}
    assert all(("*" in labels[n]) == f["required"] for n, f in zip(labels, FORM["fields"], strict=True))
    assert form.fields[0].input.comm.state["placeholder"] == "e.g. Midwest"
    assert list(form.fields[3].input.comm.state["_options_labels"]) == ["Survival", "Movement"]


def test_submit_with_missing_required_fields_shows_messages_inline_and_sends_nothing():
    replies = []
    form = ClarificationForm(FORM, on_submit=replies.append)
    type_in(form.fields[1].input, value="only notes")
    click(form.submit)
    assert replies == []
    shown = {f.name: f.message.comm.state.get("value", "") for f in form.fields}
    assert "required" in shown["region"] and "required" in shown["focus"]
    assert shown["notes"] == "" and shown["tags"] == ""
    assert "must be checked" in shown["consent"].lower()
    assert form.submit.comm.state.get("disabled") is not True
    type_in(form.fields[0].input, value="Midwest")  # editing a field clears its message
    assert form.fields[0].message.comm.state["value"] == ""


def test_submit_sends_the_values_the_user_entered_and_locks_the_form():
    replies = []
    form = ClarificationForm(FORM, on_submit=replies.append)
    by_name = {f.name: f.input for f in form.fields}
    type_in(by_name["region"], value="  Midwest ")
    type_in(by_name["sources"], value=3.0)
    type_in(by_name["focus"], index=1)
    type_in(by_name["tags"], index=[0, 2])
    type_in(by_name["consent"], value=True)
    type_in(by_name["deadline"], value={"year": 2025, "month": 11, "date": 24})
    click(form.submit)
    assert replies == [{"region": "Midwest", "sources": 3, "focus": "Movement", "tags": ["a", "c"],
                        "consent": True, "deadline": "2025-12-24"}]
    assert prepare_reply(FORM, replies[0]).splitlines()[:2] == ["Region: Midwest", "Sources: 3"]
    assert form.submit.comm.state["disabled"] is True
    assert all(f.input.comm.state["disabled"] is True for f in form.fields)


def test_an_untouched_optional_number_is_not_sent_as_zero():
    replies = []
    form = ClarificationForm({**FORM, "fields": [FORM["fields"][0], FORM["fields"][2]]}, on_submit=replies.append)
    type_in(form.fields[0].input, value="x")
    click(form.submit)
    assert replies == [{"region": "x"}]


def test_v1_choice_and_free_text():
    choice = {"version": 1, "request_id": "r1", "input_mode": "choice_with_other", "question": "Which one?",
              "options": [{"id": "o1", "label": "Alpha", "value": "Alpha"}, {"id": "o2", "label": "Beta", "value": "Beta"}]}
    replies = []
    form = ClarificationForm(choice, on_submit=replies.append)
    assert form.choice.comm.state["_model_name"] == "RadioButtonsModel"
    type_in(form.choice, index=1)
    click(form.submit)
    assert replies == ["Beta"]

    free = {"version": 1, "request_id": "r2", "input_mode": "free_text", "question": "Anything else?"}
    form = ClarificationForm(free, on_submit=replies.append)
    click(form.submit)
    assert "answer the question" in form.status.comm.state["value"] and replies == ["Beta"]
    type_in(form.text, value="Use the 2024 data")
    click(form.submit)
    assert replies[-1] == "Use the 2024 data"


def _run_events(run: str = "r1") -> list[Any]:
    base = {"run_id": run, "thread_id": "t1"}
    return [
        ev.RunStarted(**base, model="scripted", notice="Using an offline model"),
        ev.MessageDelta(**base, message_id="m1", text="Let me "),
        ev.MessageDelta(**base, message_id="m1", text="check."),
        ev.Message(**base, message_id="m1", text="Let me check. <img src=x onerror=alert(1)>"),
        ev.ToolCall(**base, call_id="c1", name="write_file", args={"path": "/mnt/user-data/outputs/a.md"}),
        ev.ToolCall(**base, call_id="c2", name="read_file", args={"path": "/mnt/user-data/nope"}),
        ev.ToolResult(**base, call_id="c1", name="write_file", text="Created a.md (3 bytes written)."),
        ev.ToolResult(**base, call_id="c2", name="read_file", status="error", text="not found\nmore"),
        ev.Todos(**base, todos=[{"content": "Plan", "status": "completed"}, {"content": "Write", "status": "in_progress"}]),
        ev.Subagent(**base, task_id="s1", status="running", label="Literature scan"),
        ev.Clarification(**base, call_id="c3", request=FORM, text="How should I scope this?"),
        ev.WorkspaceChanges(**base, changes={"created": [{"path": "/mnt/user-data/outputs/a.md", "diff": "+# A"}],
                                             "modified": [], "deleted": [], "counts": {"created": 1}}),
        ev.RunFinished(**base, status="interrupted", receipt={"status": "partial", "produced": ["/o/a.md", "/o/b.md"],
                                                              "presented": ["/o/a.md"], "unpresented": ["/o/b.md"]}),
    ]


def test_the_live_view_shows_text_tools_todos_subagents_form_changes_and_receipt():
    submitted = []
    view = RunView(read_artifact=lambda t, p: b"", on_reply=lambda v, req, answer: submitted.append((v, req, answer)))
    for event in _run_events():
        view.render(event)
    text, tools, form = view.transcript.children
    markdown = text.comm.state["outputs"][0]["data"]["text/markdown"]
    assert markdown.startswith("Let me check.") and "<img" not in markdown and "&lt;img" in markdown
    assert list(tools.comm.state["titles"]) == ["✓ write_file: Created a.md (3 bytes written).", "✗ read_file: not found"]
    assert tools.comm.state.get("selected_index") is None  # collapsed
    assert "☑ Plan" in view.todos.value and "◐ Write" in view.todos.value
    assert "Literature scan" in view.subagents.value
    assert "<details>" in view.changes.value and "a.md" in view.changes.value
    assert "1 of 2 new outputs presented" in view.receipt.value and "/o/b.md" in view.receipt.value
    assert "waiting for your answer" in view.header.value and "Using an offline model" in view.notices.value
    assert isinstance(form, ClarificationForm)
    type_in(form.fields[0].input, value="Midwest")
    type_in(form.fields[3].input, index=0)
    type_in(form.fields[5].input, value=True)
    click(form.submit)
    assert [(v is view, req, answer) for v, req, answer in submitted] == [
        (True, FORM, {"region": "Midwest", "focus": "Survival", "consent": True})]
    bundle = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "How should I scope this?" in bundle["text/markdown"]


PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d4944415478da63f8cfc0f01f0005000201a5b9c1ef0000000049454e44ae426082")


@pytest.mark.parametrize(("name", "data", "check"), [
    ("plot.png", PNG, lambda body: body.comm.state["_model_name"] == "ImageModel"),
    ("t.csv", b"a,b\n1,<b>x</b>\n", lambda body: "<table" in body.value and "&lt;b&gt;x" in body.value),
    ("page.html", b'<script>alert("x")</script><p>hi</p>',
     lambda body: 'sandbox=""' in body.value and "srcdoc=\"&lt;script&gt;" in body.value and "<script>" not in body.value),
    ("r.md", b"# Title\n\n<iframe src=x></iframe>\n\n`<kept>`",
     lambda body: body.outputs[0]["data"]["text/markdown"] == "# Title\n\n&lt;iframe src=x>&lt;/iframe>\n\n`<kept>`"),
    ("blob.bin", b"\x00\x01", lambda body: "not shown inline" in body.value),
])
def test_artifacts_render_by_kind(name, data, check):
    view = RunView(read_artifact=lambda thread, path: data, artifact_url=lambda t, p: f"http://srv/{p}")
    view.render(ev.Artifact(run_id="r", thread_id="t", path=f"/mnt/user-data/outputs/{name}", name=name))
    (card,) = view.artifacts.children
    title, body = card.children
    assert name in title.value and "download" in title.value
    assert check(body)


def test_inert_markdown_escapes_html_outside_code_only():
    text = "a <b>b</b> `x<y>` 3 < 4\n```html\n<div>code</div>\n```\n<script>1</script>"
    assert inert_markdown(text) == "a &lt;b>b&lt;/b> `x<y>` 3 < 4\n```html\n<div>code</div>\n```\n&lt;script>1&lt;/script>"
    links = "[ok](https://x.org) [bad](JavaScript:alert(1))\n[ref]: data:text/html,x\n`[code](javascript:kept)`"
    assert inert_markdown(links) == ("[ok](https://x.org) [bad](#blocked:alert(1))\n[ref]: #blocked:text/html,x\n"
                                     "`[code](javascript:kept)`")


def test_date_and_number_widgets_give_plain_values():
    form = ClarificationForm(FORM, on_submit=None)
    by_name = {f.name: f for f in form.fields}
    by_name["deadline"].input.value = dt.date(2025, 1, 2)
    by_name["sources"].input.value = 2.5
    assert by_name["deadline"].value() == "2025-01-02" and by_name["sources"].value() == 2.5
    assert form.submit.disabled  # no way to send: the card says to use %deerflow reply

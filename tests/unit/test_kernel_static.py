"""What a settled run leaves in the notebook: static HTML that needs no kernel and no widget state.

The views are driven through a recording comm (as in ``test_kernel_form``);
the display they publish is captured from a fake display handle, which is
what nbclient and JupyterLab receive as ``display_data``/``update_display_data``.
"""

from __future__ import annotations

import base64
from typing import Any

import comm
import pytest

from deerflow.runtime import events as ev
from deerflow_kernel.static import render_markdown
from deerflow_kernel.view import RunView

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
FORM = {"version": 2, "request_id": "clarification:c3", "input_mode": "form", "question": "How should I scope this?",
        "fields": [{"name": "region", "label": "Region", "type": "text", "required": True},
                   {"name": "chart", "label": "Include a chart", "type": "checkbox", "required": False}]}
FILES = {"/mnt/user-data/outputs/chart.png": PNG,
         "/mnt/user-data/outputs/report.md": b"# Deer in winter\n\n<script>alert(1)</script> [x](javascript:alert(1))",
         "/mnt/user-data/outputs/evidence.csv": b"mechanism,effect\nDeep snow,<b>high</b>\n"}


class Handle:
    """Stands in for IPython's DisplayHandle: records what each update publishes."""

    def __init__(self) -> None:
        self.shown: list[dict[str, Any]] = []

    def update(self, obj: Any) -> None:
        self.shown.append(obj._repr_mimebundle_())


@pytest.fixture(autouse=True)
def dummy_comm(monkeypatch):
    monkeypatch.setattr(comm, "create_comm", lambda **kw: comm.DummyComm(**kw))


def _view() -> tuple[RunView, Handle]:
    view = RunView(read_artifact=lambda thread, path: FILES[path],
                   artifact_url=lambda thread, path: f"/base/deerflow/api/threads/{thread}/artifacts/{path[23:]}",
                   on_reply=lambda *args: None)
    view._handle = handle = Handle()
    return view, handle


def _events(status: str, *, ask: bool = False) -> list[Any]:
    base = {"run_id": "r1", "thread_id": "t1234567890abcdef"}
    events: list[Any] = [
        ev.RunStarted(**base, model="scripted"),
        ev.Message(**base, message_id="m1", text="Looking. <img src=x onerror=alert(1)>"),
        ev.ToolCall(**base, call_id="c1", name="python", args={"code": "import pandas as pd\nprint('hi')"}),
        ev.ToolResult(**base, call_id="c1", name="python", text="hi"),
    ]
    if ask:
        events.append(ev.Clarification(**base, call_id="c3", request=FORM, text="?"))
    else:
        events += [ev.Artifact(**base, path=p, name=p.rsplit("/", 1)[1]) for p in FILES]
    receipt = {"status": "delivered", "produced": list(FILES), "presented": list(FILES), "unpresented": []}
    return [*events, ev.RunFinished(**base, status=status, receipt=None if ask else receipt)]


def test_a_settled_run_becomes_static_html_with_its_transcript_artifacts_and_receipt():
    view, handle = _view()
    for event in _events("success"):
        view.render(event)
    view.finish()
    bundle = handle.shown[-1]
    assert WIDGET_VIEW not in bundle, "a settled run keeps no live widget"
    page = bundle["text/html"]
    assert "✓ done" in page and "thread <code>t1234567890a</code>" in page
    assert "<img src=x" not in page and "&lt;img src=x" in page  # the agent's HTML is text, never markup
    # code as highlighted code (pygments, inline styles), not a JSON string
    assert "<code class='language-python'><span style=" in page and ">pandas</span>" in page
    assert f"data:image/png;base64,{base64.b64encode(PNG).decode()}" in page  # the chart, inline
    assert "<h1>Deer in winter</h1>" in page and "<script>alert" not in page and "&lt;script&gt;" in page
    assert "<td>Deep snow</td>" in page and "&lt;b&gt;high" in page  # the CSV as an escaped table
    assert "href='/base/deerflow/api/threads/t1234567890abcdef/artifacts/evidence.csv'" in page
    assert "Delivery:</b> delivered — 3 of 3 new outputs presented" in page
    assert "class='fa" not in page  # no icon font needed (GitHub, nbviewer)
    assert "Looking." in bundle["text/markdown"] and bundle["text/plain"] == bundle["text/markdown"]


def test_a_waiting_run_keeps_its_live_form_and_a_static_fallback_with_the_reply_syntax():
    view, handle = _view()
    for event in _events("interrupted", ask=True):
        view.render(event)
    view.finish()
    bundle = handle.shown[-1]
    assert WIDGET_VIEW in bundle  # the form is live while it waits
    assert "waiting for your answer" in bundle["text/html"]
    assert "%deerflow reply --field region=..." in bundle["text/html"]
    assert "%deerflow reply --field region=..." in bundle["text/markdown"]
    for saved in (bundle["text/html"], bundle["text/markdown"]):  # without widgets, every field is listed
        assert "How should I scope this?" in saved and "Region (required)" in saved and "Include a chart" in saved


def test_a_form_answered_elsewhere_turns_read_only_and_the_saved_output_shows_the_answer():
    view, handle = _view()
    for event in _events("interrupted", ask=True):
        view.render(event)
    view.finish()
    form = view.forms["clarification:c3"]
    view.mark_answered("clarification:c3", {"region": "Upper Midwest", "chart": True}, where="from a later cell")
    assert form.submit.disabled and form.submit.description == "Answered"
    assert all(field.input.disabled for field in form.fields)
    assert form.fields[0].input.value == "Upper Midwest" and form.fields[1].input.value is True
    assert "Answered (from a later cell)" in form.status.value and "Include a chart" not in form.status.value
    bundle = handle.shown[-1]
    assert WIDGET_VIEW not in bundle
    assert "✓ Answered" in bundle["text/html"] and "<b>Include a chart:</b> yes" in bundle["text/html"]
    assert "True" not in bundle["text/html"]
    form.submit.click()  # a stale click sends nothing
    assert form.status.value.startswith("✓ Answered")


def test_markdown_is_rendered_without_raw_html_script_links_or_remote_images():
    page = render_markdown("**bold** <iframe src=x></iframe> [a](javascript:alert(1)) ![t](http://evil/x.png)\n\n"
                           "| a |\n|---|\n| 1 |")
    assert "<strong>bold</strong>" in page and "<iframe" not in page and "javascript:" not in page
    assert "http://evil" not in page.split("title=")[0] and "<img" not in page and "<table>" in page


def test_the_artifacts_listing_is_static_and_says_which_file_could_not_be_read():
    from deerflow.errors import UserError
    from deerflow_kernel.static import artifacts_html

    def read(path: str) -> bytes:
        if path.endswith("gone.md"):
            raise UserError("gone.md was deleted")
        return FILES[path]

    page = artifacts_html("t1", ["/mnt/user-data/outputs/chart.png", "/mnt/user-data/outputs/gone.md"], read)
    assert "data:image/png;base64," in page and "could not load it: gone.md was deleted" in page


def test_notices_read_by_label_or_text_never_by_raw_kind():
    import io

    from deerflow.terminal import TerminalRenderer

    base = {"run_id": "r1", "thread_id": "t1"}
    notices = [ev.Notice(**base, kind="notebook_context", text="context: 3 cells of work.ipynb"),
               ev.Notice(**base, kind="config_reloaded", text="config.yaml changed: reloaded"),
               ev.Notice(**base, kind="loop_detected", text="the same call 3 times")]
    view, _ = _view()
    out = io.StringIO()
    terminal = TerminalRenderer(out)
    for notice in notices:
        view.render(notice)
        terminal.render(notice)
    view.finish()
    static = view.static()._repr_mimebundle_()["text/html"]
    for shown in (view.notices.value, static, out.getvalue()):
        assert "context: 3 cells of work.ipynb" in shown and "Loop detected: the same call 3 times" in shown
        assert "notebook_context" not in shown and "config_reloaded" not in shown and "loop_detected" not in shown

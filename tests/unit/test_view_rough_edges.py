"""The rough edges of issue #22 item 9, as the user reads them in a run's view.

Each test drives the real view (live widgets through a dummy comm, then the
static HTML a saved notebook keeps) or the terminal renderer with the events a
run emits, and asserts on what is shown.
"""

from __future__ import annotations

import base64
import io
from types import SimpleNamespace

import comm
import pytest

from deerflow.runtime import events as ev
from deerflow.subagents.board import SubagentBoard
from deerflow.terminal import TerminalRenderer
from deerflow_kernel.artifacts import artifact_card
from deerflow_kernel.result import RunResult
from deerflow_kernel.session import KernelSession
from deerflow_kernel.view import RunView

THREAD = "t1234567890abcdef0123"
BASE = {"run_id": "run-0123456789abcdef", "thread_id": THREAD}
OFFLINE = "Using an offline model (scripted or replayed answers, no network): its answers do not depend on your prompt."
OUT = "/mnt/user-data/outputs/a.txt"
RECEIPT = {"status": "undelivered", "produced": [OUT], "presented": [], "unpresented": [OUT]}
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
UNMET_RESULT = ("Subagent 'general' (Write the glossary): COMPLETED — finished. 2 turns, 90 tokens, 0.1s.\n\n"
                "<report>done</report>\n\nAcceptance (checked by the harness): UNMET\n  - file: UNMET (no such file)")


@pytest.fixture(autouse=True)
def dummy_comm(monkeypatch):
    monkeypatch.setattr(comm, "create_comm", lambda **kw: comm.DummyComm(**kw))


def settled(events: list) -> RunView:
    view = RunView(read_artifact=lambda *a: PNG)
    view._handle = SimpleNamespace(update=lambda obj: None)
    for event in events:
        view.render(event)
    return view


def test_the_offline_notice_and_the_undelivered_warning_are_each_shown_once():
    events = [ev.RunStarted(**BASE, model="m", offline=True, notice=OFFLINE),
              ev.Notice(**BASE, kind="undelivered", text=f"this run wrote 1 output file(s) but presented none of "
                                                          f"them: {OUT}"),
              ev.RunStarted(**{**BASE, "run_id": "run-2"}, model="m", offline=True, notice=OFFLINE),  # continued
              ev.RunFinished(**{**BASE, "run_id": "run-2"}, status="success", receipt=RECEIPT)]
    view = settled(events)
    live = view.notices.value + view.receipt.value
    saved = view.static().html
    for page in (live, saved):
        assert page.count("its answers do not depend on your prompt") == 1
        assert page.count(OUT) == 1 and "produced but not presented" in page  # the receipt says it, once
        assert "Not delivered:" not in page and "presented none of them" not in page


def test_a_delegation_that_missed_its_criteria_is_marked_as_a_warning_not_a_green_check():
    call = ev.ToolCall(**BASE, call_id="k1", name="task", args={"description": "Write the glossary", "prompt": "p"})
    events = [ev.RunStarted(**BASE, model="m"), call,
              ev.Subagent(**BASE, task_id="s1", status="completed", label="Write the glossary",
                          detail={"turns": 1, "receipts": 1, "acceptance": "UNMET"}),
              ev.ToolResult(**BASE, call_id="k1", name="task", text=UNMET_RESULT),
              ev.RunFinished(**BASE, status="success")]
    view = settled(events[:-1])
    assert view._group.get_title(0).startswith("⚠ task: Subagent 'general'")
    assert "'>⚠</td>" in view.subagents.value and "'>✓</td>" not in view.subagents.value
    assert "1 turn, 0 tokens, 1 receipt" in view.subagents.value  # never "1 receipts"
    view.render(events[-1])
    page = view.static().html
    assert "⚠ task: Subagent" in page and "✓ task" not in page
    board = SubagentBoard()
    board.update(events[2])
    assert board.text_lines()[0].startswith("⚠ Write the glossary — completed")


def test_a_chart_keeps_its_own_size_in_the_live_card_and_in_the_saved_view():
    card = artifact_card("/mnt/user-data/outputs/chart.png", lambda: PNG)
    image = card.children[1]
    assert image.layout.align_self == "flex-start" and image.layout.width == "auto"  # not stretched by the VBox
    assert image.layout.max_width == "100%"
    page = settled([ev.RunStarted(**BASE, model="m"), ev.Artifact(**BASE, path="/mnt/user-data/outputs/c.png",
                                                                    name="c.png"),
                    ev.RunFinished(**BASE, status="success")]).static().html
    img = page[page.index("<img src='data:image/png"):]
    img = img[:img.index("/>")]
    assert "max-width:100%;width:auto" in img and "width:100%" not in img.replace("max-width:100%", "")


def test_thread_and_run_ids_are_shown_with_twelve_characters_everywhere():
    view = settled([ev.RunStarted(**BASE, model="m"), ev.RunFinished(**BASE, status="success")])
    short = THREAD[:12]
    assert f"thread <code>{short}</code>" in view.header.value
    saved = view.static()
    assert f"thread <code>{short}</code>" in saved.html and f"(thread `{short}`)" in saved.markdown
    assert THREAD not in saved.html + saved.markdown
    assert f"thread {short}>" in repr(RunResult(status="success", thread_id=THREAD, run_id=BASE["run_id"], text="",
                                               artifacts=[]))
    out = io.StringIO()
    TerminalRenderer(out).render(ev.RunStarted(**BASE, model="m"))
    assert f"● run {BASE['run_id'][:12]} on thread" in out.getvalue()


def test_the_twelve_characters_a_view_shows_are_accepted_back_as_the_thread():
    backend = SimpleNamespace(threads=lambda: [SimpleNamespace(thread_id=THREAD, title="a"),
                                               SimpleNamespace(thread_id="t1234567890zzzz", title="b")])
    assert KernelSession.check_thread(backend, THREAD[:12]) == THREAD
    assert KernelSession.check_thread(backend, THREAD) == THREAD
    with pytest.raises(Exception, match="unknown thread 't1234567'; recent threads: t1234567890a, t1234567890z"):
        KernelSession.check_thread(backend, "t1234567")  # two threads start so: ambiguous


def test_the_prompt_sent_is_shown_as_plain_text_not_as_python():
    prompt = "Why do deer <b>migrate</b> in {winter}? for x in herds: print(x)"
    view = RunView(read_artifact=lambda *a: PNG)
    view.show_prompt(prompt)
    for page in (view.notices.value, settled_with(view).static().html):
        folded = page[page.index("<details class='deerflow-prompt'"):]
        folded = folded[:folded.index("</details>")]
        assert "<summary>prompt sent</summary>" in folded and "&lt;b&gt;migrate&lt;/b&gt; in {winter}" in folded
        assert "<span style=" not in folded and "language-python" not in folded  # prose, not highlighted code


def settled_with(view: RunView) -> RunView:
    view._handle = SimpleNamespace(update=lambda obj: None)
    for event in (ev.RunStarted(**BASE, model="m"), ev.RunFinished(**BASE, status="success")):
        view.render(event)
    return view

"""The hand-over pieces and the running clock of a view, without a server.

The real-kernel round trip (button → notebook-edits/insert → a cell that runs,
``%deerflow cells`` payloads) is ``tests/integration/test_kernel_handover.py``.
"""

from __future__ import annotations

import time
from html import unescape
from types import SimpleNamespace

import comm
import pytest

from deerflow.errors import UserError
from deerflow.runtime import events as ev
from deerflow_kernel.cells import CellInserter, agent_code, cells_command, code_html
from deerflow_kernel.controls import clock_text
from deerflow_kernel.view import RunView

BASE = {"run_id": "run-abcdef123456", "thread_id": "t1"}
HOSTILE = "print('</code></pre><script>alert(1)</script>')"


@pytest.fixture(autouse=True)
def dummy_comm(monkeypatch):
    monkeypatch.setattr(comm, "create_comm", lambda **kw: comm.DummyComm(**kw))


def _calls() -> list:
    return [ev.ToolCall(**BASE, call_id="a", name="python", args={"code": "x = 1"}),
            ev.ToolCall(**BASE, call_id="b", name="bash", args={"command": "ls"}),
            ev.ToolCall(**BASE, call_id="c", name="python", args={"code": HOSTILE})]


def test_agent_code_is_the_python_calls_in_order_and_shown_highlighted_and_escaped():
    assert agent_code(_calls()) == ["x = 1", HOSTILE]
    html = code_html(HOSTILE)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "language-python'><span style=" in html and "class='deerflow-copy'" in html
    assert "navigator.clipboard" in html  # copy: the browser's clipboard, no extension of ours


def test_cells_command_prints_or_asks_for_a_new_cell_and_names_the_runs_it_knows(capsys):
    inputs = []
    result = SimpleNamespace(run_id=BASE["run_id"], events=_calls())

    def find_run(run_id=None):
        if run_id not in (None, "run-abc"):
            raise UserError(f"unknown run {run_id!r}; runs of this kernel: run-abcdef12")
        return result

    session = SimpleNamespace(find_run=find_run,
                              shell=SimpleNamespace(set_next_input=lambda text, replace: inputs.append((text, replace))))
    cells_command(session, "--run run-abc --print")
    printed = capsys.readouterr().out
    assert "# --- agent cell 2 of run run-abcdef12" in printed and HOSTILE in printed and not inputs
    cells_command(session, "")
    [(text, replace)] = inputs
    assert replace is False and text.index("x = 1") < text.index(HOSTILE)
    with pytest.raises(UserError, match="unknown run 'zzz'; runs of this kernel"):
        cells_command(session, "--run zzz")
    with pytest.raises(UserError, match=r"expected \[--run RUN\] \[--print\]"):
        cells_command(session, "--bogus")


def test_insert_without_a_known_notebook_says_what_to_do_instead():
    with pytest.raises(UserError, match="run %deerflow cells"):
        CellInserter(SimpleNamespace(), None, "cell-1")("x = 1")


def test_an_unsaved_magic_cell_asks_to_save_first():
    def refuse(*args, **kwargs):
        raise UserError("unknown cell id 'c9'; the notebook's cells are: a, b")

    session = SimpleNamespace(thread_id="t1", backend=lambda: SimpleNamespace(notebook_edits=refuse))
    with pytest.raises(UserError, match="save the notebook"):
        CellInserter(session, "work.ipynb", "c9")("x = 1")


def test_a_python_call_in_the_view_has_copy_and_insert_and_the_insert_reports_back():
    inserted = []
    view = RunView(read_artifact=lambda *a: b"", on_insert=lambda code, **where: inserted.append((code, where)) or "ok")
    view.render(ev.RunStarted(**BASE, model="m"))
    for call in _calls():
        view.render(call)
    view.render(ev.ToolResult(**BASE, call_id="a", name="python", text="done"))
    python_box = view._group.children[0]
    button = python_box.children[1].children[0]
    assert button.description == "insert as a new cell below"
    button.click()
    assert inserted == [("x = 1", {"thread_id": "t1", "run_id": BASE["run_id"], "number": 1})]
    assert "ok" in python_box.children[1].children[1].value
    assert "done" in python_box.children[0].value  # the result lands under the code


def test_clock_says_background_elapsed_time_and_how_to_stop():
    assert clock_text(75, background=False) == "<span style='color:#777'>&nbsp;· 1 min 15 s</span>"
    text = clock_text(3, background=True)
    assert "running in the background for 3 s" in text and "Stop or Kernel → Interrupt cancels it" in text


def test_a_background_run_shows_the_clock_until_it_detaches():
    view = RunView(read_artifact=lambda *a: b"")
    view.attach(lambda: True, background=True)
    deadline = time.monotonic() + 10  # a hang guard: the ticker's first update is immediate
    while "running in the background" not in view.clock.value and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "Kernel → Interrupt" in view.clock.value
    assert any("Running in the background" in getattr(e, "text", "") for e in view.events)
    view.detach()
    assert view.clock.value == ""


def test_the_browser_insert_button_carries_its_target_escaped():
    target = {"api": "/base/deerflow/api/", "thread": "t1", "run": "r1", "path": "a'><script>x</script>.ipynb",
              "after": "magic"}
    html = code_html("x = 1", insert=target)
    assert "class='deerflow-insert'" in html and "data-api='/base/deerflow/api/'" in html
    assert "<script>" not in html and "data-path='a&#x27;&gt;&lt;script&gt;" in html
    assert "notebook-edits/insert" in html and "X-XSRFToken" in html  # same-origin POST with Jupyter's XSRF


def test_each_python_call_posts_its_place_in_the_run_so_inserts_keep_the_agents_order():
    target = {"api": "/deerflow/api/", "thread": "t1", "run": BASE["run_id"], "path": "w.ipynb", "after": "magic"}
    view = RunView(read_artifact=lambda *a: b"", on_insert=SimpleNamespace(target=lambda t, r: target))
    view.render(ev.RunStarted(**BASE, model="m"))
    for call in _calls():
        view.render(call)
    for html in (view._group.children[0].value + view._group.children[2].value, view.static().html):
        assert html.count("class='deerflow-insert'") == 2
        assert html.index("data-cell='1'") < html.index("data-cell='2'") and "data-cell='3'" not in html
    script = unescape(html.split("class='deerflow-insert'", 1)[1].split('onclick="', 1)[1].split('"', 1)[0])
    assert "number:d.cell?+d.cell:undefined" in script


def test_a_live_server_run_gets_a_browser_stop_that_posts_the_cancel_route():
    view = RunView(read_artifact=lambda *a: b"", api="/base/deerflow/api/")
    cancelled: list[bool] = []
    view.attach(lambda: cancelled.append(True))
    view.render(ev.RunStarted(run_id="r'1", thread_id="t1", model="m"))
    html = view.browser_stop.value
    assert view.browser_stop in view._top.children and view.stop not in view._top.children  # one Stop only
    assert "data-api='/base/deerflow/api/'" in html and "data-run='r&#x27;1'" in html  # escaped
    script = unescape(html.split('onclick="', 1)[1].split('"', 1)[0])  # what the browser runs
    assert "'/runs/'+encodeURIComponent(d.run)+'/cancel'" in script and "'X-XSRFToken':x" in script
    view.request_stop()  # Kernel → Interrupt still cancels through the kernel
    assert cancelled == [True]
    view.detach()
    assert view.browser_stop.value == "" and view.browser_stop not in view._top.children


def test_without_a_server_the_stop_stays_the_widget_button():
    view = RunView(read_artifact=lambda *a: b"")
    view.attach(lambda: True)
    view.render(ev.RunStarted(run_id="r1", thread_id="t1", model="m"))
    assert view.stop in view._top.children and view.browser_stop.value == ""
    view.detach()

"""The agent fixes the user's notebook: a real jupyter server, a real kernel started for work.ipynb.

A cell fails with NameError; the ``%%deerflow`` cell below it runs a scripted model that
expects the failure in its context, calls ``read_notebook`` and then ``edit_notebook``.
In the default ``propose`` mode the file does not change until ``%deerflow apply``;
re-running the fixed cell works; ``%deerflow undo`` restores it; ``--no-context``
sends nothing.  The kernel is driven over the server's kernel websocket, with the
``cellId`` JupyterLab sends, and the notebook is saved through the contents API as
JupyterLab saves it.
"""

from __future__ import annotations

from typing import Any

import httpx
import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell

from fixtures.jupyter_process import served_config
from fixtures.session_kernel import SessionKernel, open_session_kernel

pytestmark = pytest.mark.integration

CONFIG = """
models:
  - name: fixer
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - expect: "NameError: name 'totl' is not defined"
          tool_calls: [{name: read_notebook, args: {path: work.ipynb, cell_ids: [fail]}}]
        - expect: print(totl)
          tool_calls:
            - {name: edit_notebook, args: {path: work.ipynb, operations: [{op: replace, cell_id: fail, source: print(total)}]}}
        - expect: nothing is changed until the user applies it
          text: I proposed a fix for cell fail.
  - name: fixer_apply
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - expect: "NameError: name 'totl' is not defined"
          tool_calls:
            - {name: edit_notebook, args: {path: work.ipynb, operations: [{op: replace, cell_id: fail, source: print(total)}]}}
        - expect: Applied 1 cell edit(s) to work.ipynb
          text: Fixed.
  - name: blind
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - expect: "Is there context?"
          text: none
"""
DEADLINE = 180


class Kernel(SessionKernel):
    """The session kernel, with each error shaped as the notebook output it becomes."""

    def run(self, code: str, cell_id: str | None = None) -> tuple[str, list[dict[str, Any]]]:  # type: ignore[override]
        out, errors, _ = super().run(code, cell_id)
        return out, [{"output_type": "error", **error} for error in errors]

def notebook(magic: str) -> dict[str, Any]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("total = 41 + 1", id="load"),
                nbformat.v4.new_code_cell("print(totl)", id="fail"),
                nbformat.v4.new_code_cell(magic, id="magic"),
                nbformat.v4.new_code_cell("print('below')", id="below")]
    return nb


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with served_config(tmp_path_factory.mktemp("notebook-agent"), CONFIG) as (server, http):
        yield server, http


def open_kernel(server: Any, http: httpx.Client, nb: dict[str, Any]) -> Kernel:
    return open_session_kernel(server, http, nb, cls=Kernel)


def cell_source(http: httpx.Client, cell_id: str) -> str:
    content = http.get("api/contents/work.ipynb").raise_for_status().json()["content"]
    return next(c["source"] for c in content["cells"] if c["id"] == cell_id)


def save_outputs(http: httpx.Client, cell_id: str, outputs: list[dict[str, Any]]) -> None:
    """What JupyterLab does after a cell ran: the notebook is saved with the cell's outputs."""
    model = http.get("api/contents/work.ipynb").raise_for_status().json()
    for cell in model["content"]["cells"]:
        if cell["id"] == cell_id:
            cell["outputs"] = [{k: o[k] for k in ("output_type", "ename", "evalue", "traceback")} for o in outputs]
    http.put("api/contents/work.ipynb", json={"type": "notebook", "format": "json",
                                               "content": model["content"]}).raise_for_status()


def run_events(server: Any, http: httpx.Client, thread_id: str) -> list[dict[str, Any]]:
    runs = http.get(f"deerflow/api/threads/{thread_id}/runs").raise_for_status().json()
    latest = max(runs, key=lambda r: r["created_at"])
    return http.get(f"deerflow/api/threads/{thread_id}/runs/{latest['run_id']}/events").raise_for_status().json()


def test_the_agent_proposes_a_fix_that_applies_reruns_and_undoes(lab):
    server, http = lab
    magic = "%%deerflow --model fixer\nWhy does the cell above fail? Fix it."
    kernel = open_kernel(server, http, notebook(magic))
    try:
        kernel.run("total = 41 + 1", "load")
        _, errors = kernel.run("print(totl)", "fail")
        assert errors and errors[0]["ename"] == "NameError"
        save_outputs(http, "fail", errors)
        kernel.run("%load_ext deerflow_kernel")
        out, errors = kernel.run(magic, "magic")
        assert not errors, errors
        probe, _ = kernel.run("from deerflow_kernel import session_of\ns = session_of(get_ipython())\n"
                              "print(s.last_result.status, s.thread_id)")
        status, thread_id = probe.split()
        assert status == "success", out
        notices = [e for e in run_events(server, http, thread_id) if e.get("type") == "notice"]
        assert any(n["text"] == "context: 2 cells of work.ipynb" for n in notices), notices
        assert cell_source(http, "fail") == "print(totl)"  # proposed only: nothing changed yet
        pending = http.get(f"deerflow/api/threads/{thread_id}/notebook-edits").raise_for_status().json()["proposals"]
        assert [p["cells"] for p in pending] == [["fail"]]
        assert "-print(totl)\n+print(total)" in pending[0]["diff"]
        missing = http.post("deerflow/api/threads/not-mine/notebook-edits/apply", json={})
        assert missing.status_code == 404 and "not-mine" in missing.json()["message"]

        out, errors = kernel.run("%deerflow apply")
        assert not errors and "applied proposal" in out
        assert cell_source(http, "fail") == "print(total)"
        rerun, errors = kernel.run(cell_source(http, "fail"), "fail")
        assert not errors and rerun.strip() == "42"

        out, errors = kernel.run("%deerflow undo")
        assert not errors and "restored 1 cell(s) of work.ipynb" in out
        assert cell_source(http, "fail") == "print(totl)"
        out, _ = kernel.run("%deerflow undo")  # a UsageError: one line on stderr, no traceback
        assert "UsageError: " in out and "no applied notebook edits to undo on this thread" in out
        assert "Traceback" not in out
    finally:
        kernel.close()


def test_no_context_sends_no_notebook_and_a_bad_apply_is_one_line(lab):
    server, http = lab
    magic = "%%deerflow --model blind --no-context\nIs there context?"
    kernel = open_kernel(server, http, notebook(magic))
    try:
        kernel.run("%load_ext deerflow_kernel")
        _, errors = kernel.run(magic, "magic")
        assert not errors, errors
        probe, _ = kernel.run("from deerflow_kernel import session_of\nprint(session_of(get_ipython()).thread_id)")
        events = run_events(server, http, probe.strip())
        assert not [e for e in events if e.get("type") == "notice" and e["text"].startswith("context")]
        assert events[-1]["status"] == "success"
        out, _ = kernel.run("%deerflow apply nope")
        assert "UsageError: " in out and "no proposal 'nope'" in out and "Traceback" not in out
    finally:
        kernel.close()


def test_headless_http_run_with_notebook_edits_apply_writes_under_the_root(lab):
    _, http = lab
    nb = notebook("")
    nb.cells = nb.cells[:2]
    nb.cells[1].outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="name 'totl' is not defined",
                                                  traceback=[])]
    http.put("api/contents/work.ipynb", json={"type": "notebook", "format": "json", "content": nb}).raise_for_status()
    thread_id = http.post("deerflow/api/threads", json={}).raise_for_status().json()["thread_id"]
    body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "Fix it."}]},
            "config": {"configurable": {"model_name": "fixer_apply", "notebook_edits": "apply",
                                        "notebook_context": {"path": "work.ipynb", "cell_id": None}}}}
    final = http.post(f"deerflow/api/threads/{thread_id}/runs/wait", json=body, timeout=DEADLINE)
    assert final.status_code == 200, final.text
    assert cell_source(http, "fail") == "print(total)"
    undone = http.post(f"deerflow/api/threads/{thread_id}/notebook-edits/undo", json={}).raise_for_status().json()
    assert undone["cells"] == ["fail"] and cell_source(http, "fail") == "print(totl)"
    again = http.post(f"deerflow/api/threads/{thread_id}/notebook-edits/undo", json={})
    assert again.status_code == 404 and "no applied notebook edits" in again.json()["message"]


def test_in_process_the_notebook_root_serves_context_and_apply_mode_writes_then_undo(tmp_path, monkeypatch,
                                                                                     deerflow_home, capsys):
    """No server: the kernel's working directory is the notebook root; notebook_edits: apply writes."""
    (tmp_path / "config.yaml").write_text(CONFIG + "notebook_edits: apply\n")
    nb = notebook("")
    nb.cells = nb.cells[:2]
    fail = nb.cells[1]
    fail.execution_count, fail.outputs = 2, [nbformat.v4.new_output(
        "error", ename="NameError", evalue="name 'totl' is not defined", traceback=["NameError: ..."])]
    nbformat.write(nb, str(tmp_path / "work.ipynb"))
    monkeypatch.chdir(tmp_path)
    for name, value in {"DEERFLOW_CONFIG": str(tmp_path / "config.yaml"), "JPY_SESSION_NAME": "work.ipynb"}.items():
        monkeypatch.setenv(name, value)
    for name in ("DEERFLOW_SERVER_URL", "DEERFLOW_NOTEBOOK_ROOT"):
        monkeypatch.delenv(name, raising=False)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "deerflow_kernel")
    try:
        result = ip.run_cell("%%deerflow --model fixer_apply\nFix the cell above.").result
        assert result.status == "success" and result.text == "Fixed."
        assert "context: 2 cells of work.ipynb" in capsys.readouterr().out
        fixed = nbformat.read(str(tmp_path / "work.ipynb"), as_version=4)
        assert fixed.cells[1].source == "print(total)" and fixed.cells[1].outputs == []
        ip.run_line_magic("deerflow", "undo")
        assert "restored 1 cell(s) of work.ipynb" in capsys.readouterr().out
        restored = nbformat.read(str(tmp_path / "work.ipynb"), as_version=4)
        assert restored.cells[1].source == "print(totl)" and restored.cells[1].outputs[0]["ename"] == "NameError"
    finally:
        ip.run_line_magic("unload_ext", "deerflow_kernel")

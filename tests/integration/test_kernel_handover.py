"""Hand-over and plain errors in a real kernel that JupyterLab's server started for work.ipynb.

The kernel talks to the server's DeerFlow (``DEERFLOW_SERVER_URL``, as under
JupyterLab).  A scripted model runs one python cell; the user gets it back
three ways: ``%deerflow cells --print`` prints it, ``%deerflow cells`` asks the
frontend (``set_next_input`` payload, ``replace: False``) for a new cell below,
and the view's "insert as a new cell below" button writes it below the
``%%deerflow`` cell through the notebook edit mechanism (undoable).  The
inserted cell runs.  ``%deerflow models``/``status`` list the server's models;
an unknown model, thread or file is one line naming what exists.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import nbformat
import pytest

from fixtures.jupyter_process import served_config
from fixtures.session_kernel import open_session_kernel

pytestmark = pytest.mark.integration

CODE = "answer = 6 * 7\nprint('the answer is', answer)"
READ = "print('read', open('/mnt/user-data/outputs/answer.txt').read())"
CONFIG = """
models:
  - name: coder
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: Computing it in Python.
          tool_calls:
            - name: python
              args:
                code: |
                  answer = 6 * 7
                  print('the answer is', answer)
            - {name: write_file, args: {path: /mnt/user-data/outputs/answer.txt, content: "42"}}
        - tool_calls:
            - {name: present_files, args: {filepaths: [/mnt/user-data/outputs/answer.txt]}}
            - {name: python, args: {code: "print('read', open('/mnt/user-data/outputs/answer.txt').read())"}}
        - text: The answer is 42.
  - name: plain
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns: [hello]
"""
MAGIC = "%%deerflow --new --model coder\nCompute the answer."


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with served_config(tmp_path_factory.mktemp("handover"), CONFIG) as (server, http):
        yield server, http


@pytest.fixture
def kernel(lab):
    server, http = lab
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(MAGIC, id="magic"), nbformat.v4.new_code_cell("print('below')", id="below")]
    k = open_session_kernel(server, http, nb)
    try:
        _, errors, _ = k.run("%load_ext deerflow_kernel")
        assert not errors, errors
        yield k
    finally:
        k.close()


def cells(http: httpx.Client) -> list[tuple[str, str]]:
    content = http.get("api/contents/work.ipynb").raise_for_status().json()["content"]
    return [(c["id"], c["source"]) for c in content["cells"]]


def one_line_error(out: str, errors: list[dict[str, Any]]) -> str:
    """A UsageError shows as one 'UsageError: ...' line on stderr, no traceback, no error output."""
    assert not errors, errors
    lines = [line for line in out.splitlines() if line.startswith("UsageError: ")]
    assert len(lines) == 1 and "Traceback" not in out, out
    return lines[0]


def test_the_agents_cell_is_printed_inserted_by_the_magic_and_by_the_views_button_and_runs(lab, kernel):
    _, http = lab
    out, errors, _ = kernel.run(MAGIC, "magic")
    assert not errors, (out, errors)

    out, errors, _ = kernel.run("%deerflow cells --print")
    assert not errors and CODE in out and "# --- agent cell 1 of run" in out

    out, errors, payloads = kernel.run("%deerflow cells")
    assert not errors and "into a new cell below" in out
    [payload] = [p for p in payloads if p.get("source") == "set_next_input"]
    assert payload["replace"] is False and CODE in payload["text"]
    assert "/mnt/user-data" not in payload["text"] and "1 file(s) copied there" in out  # as for insert below
    out, errors, _ = kernel.run(payload["text"])  # the new cell, as the frontend would run it
    assert not errors and out.split("\n")[:2] == ["the answer is 42", "read 42"], (out, errors)

    # The view's insert button posts from the browser (the kernel may be busy): its target, then the same POST.
    out, errors, _ = kernel.run(
        "import json\nfrom deerflow_kernel import session_of\ns = session_of(get_ipython())\n"
        "r = s.last_result\nhtml = s.last_view.static().html\n"
        "print('deerflow-insert' in html, 'deerflow-copy' in html, \"language-python'>\" in html and '<span style=' in html)\n"
        "print(json.dumps(s.last_view.handover(r.thread_id, r.run_id)))")
    assert not errors, errors
    shown, target = out.strip().splitlines()
    target = json.loads(target)
    assert shown == "True True True", shown
    assert target["path"] == "work.ipynb" and target["after"] == "magic"
    assert target["api"] == "/deerflow/api/"
    def insert(source: str, number: int) -> None:
        done = http.post(f"deerflow/api/threads/{target['thread']}/notebook-edits/insert", json={
            "path": target["path"], "run_id": target["run"], "number": number,
            "operations": [{"op": "insert", "after": target["after"], "cell_type": "code", "source": source}]})
        assert done.status_code == 200, done.text

    insert(READ, 2)  # clicked first, but the agent's second cell: it ends up second
    insert(CODE, 1)
    ids = [cid for cid, _ in cells(http)]
    assert ids[0] == "magic" and ids[3] == "below" and len(ids) == 4
    inserted, reads = (dict(cells(http))[i] for i in ids[1:3])
    assert inserted == CODE
    # The agent's virtual path now names a copy beside the notebook, in the user's Jupyter root.
    folder = f"deerflow_files/{target['thread'][:12]}"
    assert reads == READ.replace("/mnt/user-data", folder)
    assert http.get(f"api/contents/{folder}/outputs/answer.txt").raise_for_status().json()["content"] == "42"
    out, errors, _ = kernel.run(reads, ids[2])  # the agent's read runs in the user's kernel
    assert not errors and out.strip() == "read 42", (out, errors)

    out, errors, _ = kernel.run(inserted, ids[1])  # the inserted cell runs in the user's kernel
    assert not errors and out.strip() == "the answer is 42"

    out, errors, _ = kernel.run("%deerflow undo")
    assert not errors and "restored 2 cell(s) of work.ipynb" in out
    assert [cid for cid, _ in cells(http)] == ["magic", "below"]


def test_models_status_and_unknown_model_thread_and_file_are_one_line(lab, kernel):
    _, http = lab
    out, errors, _ = kernel.run("%deerflow models")
    assert not errors and out.split() == ["coder", "plain"]
    out, errors, _ = kernel.run("%deerflow status")
    assert not errors and "models: coder, plain" in out

    out, errors, _ = kernel.run("%%deerflow --new --model nosuchmodel\nhi")
    line = one_line_error(out, errors)
    assert "unknown model 'nosuchmodel'" in line and "configured models: coder, plain" in line
    assert "(500)" not in out

    thread = http.post("deerflow/api/threads", json={}).raise_for_status().json()["thread_id"]
    refused = http.post(f"deerflow/api/threads/{thread}/runs/stream", json={
        "assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "hi"}]},
        "config": {"configurable": {"model_name": "nosuchmodel"}}})
    assert refused.status_code == 400
    assert refused.json()["message"] == "unknown model 'nosuchmodel'; configured models: coder, plain"
    assert http.get("deerflow/api/models").raise_for_status().json()["models"][0]["name"] == "coder"

    out, errors, _ = kernel.run("%deerflow --thread nosuchthread hi")
    assert "unknown thread 'nosuchthread'" in one_line_error(out, errors)
    out, errors, _ = kernel.run("%deerflow artifacts nosuchthread")
    assert "unknown thread 'nosuchthread'" in one_line_error(out, errors)

    out, errors, _ = kernel.run(MAGIC, "magic")
    assert not errors, errors
    out, errors, _ = kernel.run("r = _\nprint(repr(r.load('/mnt/user-data/outputs/answer.txt')), r.load('answer.txt'))")
    assert not errors and out.strip() == "'42' 42", (out, errors)
    out, errors, _ = kernel.run("r.load('nope.csv')")  # a plain cell: an error output of one line
    [error] = errors
    [line] = error["traceback"]
    assert error["ename"] == "UserError" and "no such file" in line and "files you can load: answer.txt" in line

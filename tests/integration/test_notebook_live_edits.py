"""Applied edits reach a notebook that is open, live, when jupyter-collaboration runs in the server.

A real jupyter server with jupyter-collaboration (jupyter_server_ydoc + fileid), a
collaborative client in the notebook's document room (what an open JupyterLab tab is), and
a run whose scripted model calls ``edit_notebook`` with ``notebook_edits: apply``: the client
sees cell ``fail`` change without reloading, the tool result says it went live, and the room
saves the file.  Undo goes the same way.  A notebook that nobody has open is saved through
the ContentsManager, and the note says "reload".

jupyter-collaboration is not a dependency (docs/ARCHITECTURE.md, "The user's notebooks"): CI
installs its packages with ``pip install --no-deps --target $DEERFLOW_TEST_COLLAB_DIR`` (.ci/run),
and only this test's server gets them (on its PYTHONPATH, its extensions switched on by flags), so
no other test's server runs with real-time collaboration.  A venv that has it installed works too.
Skipped when neither has it.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import httpx
import nbformat
import pytest

from fixtures.jupyter_process import TESTS, running_jupyter


def collab_dir() -> str | None:
    """Where jupyter-collaboration is: "" (this venv), a ``--target`` folder, or None (nowhere)."""
    if importlib.util.find_spec("jupyter_server_ydoc") is not None:
        return ""
    target = os.environ.get("DEERFLOW_TEST_COLLAB_DIR", "")
    return target if target and (Path(target) / "jupyter_server_ydoc").is_dir() else None


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(collab_dir() is None, reason="jupyter-collaboration is neither installed nor in "
                       "$DEERFLOW_TEST_COLLAB_DIR (.ci/run puts it there)"),
]

MODEL = """
  - name: fix-{stem}
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - expect: Fix {stem}.ipynb
          tool_calls:
            - name: edit_notebook
              args: {{path: {stem}.ipynb, operations: [{{op: replace, cell_id: fail, source: print(total)}}]}}
        - expect: Applied 1 cell edit(s)
          text: Fixed.
"""
CONFIG = "notebook_edits: apply\nmodels:" + MODEL.format(stem="open") + MODEL.format(stem="closed")
DEADLINE = 120


def work_notebook() -> dict:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("total = 42", id="load"),
                nbformat.v4.new_code_cell("print(totl)", id="fail")]
    return nb


def run_fix(http: httpx.Client, path: str) -> tuple[str, str]:
    """A run whose model applies its fix to ``path``: the edit_notebook result's text, and the thread."""
    thread = http.post("deerflow/api/threads", json={}).raise_for_status().json()["thread_id"]
    body = {"assistant_id": "lead_agent", "config": {"configurable": {"model_name": f"fix-{path[:-6]}"}},
            "input": {"messages": [{"role": "user", "content": f"Fix {path}"}]}}
    values = http.post(f"deerflow/api/threads/{thread}/runs/wait", json=body,
                       timeout=DEADLINE).raise_for_status().json()
    assert "messages" in values, values
    tools = [m for m in values["messages"] if m["type"] == "tool"]
    assert tools and tools[-1]["name"] == "edit_notebook", values["messages"]
    return tools[-1]["content"], thread


def saved_source(http: httpx.Client, path: str, cell_id: str) -> str:
    content = http.get(f"api/contents/{path}").raise_for_status().json()["content"]
    return next(c["source"] for c in content["cells"] if c["id"] == cell_id)


def wait_saved(http: httpx.Client, path: str, cell_id: str, expected: str) -> None:
    end = time.monotonic() + DEADLINE
    while saved_source(http, path, cell_id) != expected:
        assert time.monotonic() < end, f"the room never saved {path}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def collab_lab(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("live-edits")
    (tmp_path / "config.yaml").write_text(CONFIG)
    env = {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": str(tmp_path / "config.yaml"),
           "OPENAI_API_KEY": ""}
    if collab_dir():  # only this server sees the --target install
        env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(collab_dir()), os.environ.get("PYTHONPATH", "")])
    args = [*(f"--ServerApp.jpserver_extensions={name}=True" for name in ("jupyter_server_fileid", "jupyter_server_ydoc")),
            f"--BaseFileIdManager.db_path={tmp_path / 'file_id.db'}",
            "--YDocExtension.document_save_delay=0.2"]
    root = tmp_path / "root"
    root.mkdir()
    with running_jupyter(root, env=env, args=args) as server:
        http = httpx.Client(base_url=server.url, headers=server.headers, timeout=60)
        try:
            yield server, http
        finally:
            http.close()


def put_notebook(http: httpx.Client, path: str) -> None:
    http.put(f"api/contents/{path}", json={"type": "notebook", "format": "json",
                                           "content": work_notebook()}).raise_for_status()


def test_an_applied_edit_changes_the_open_notebook_live_and_undo_restores_it(collab_lab):
    from fixtures.ydoc_client import RoomClient, cell_sources  # pycrdt: only with collaboration

    server, http = collab_lab
    put_notebook(http, "open.ipynb")
    client = RoomClient(server, http, "open.ipynb")
    try:
        client.wait_for(lambda nb: cell_sources(nb).get("fail") == "print(totl)")
        text, thread = run_fix(http, "open.ipynb")
        assert "applied to the open notebook live" in text and "+print(total)" in text
        seen = client.wait_for(lambda nb: cell_sources(nb).get("fail") == "print(total)", deadline=DEADLINE)
        assert cell_sources(seen) == {"load": "total = 42", "fail": "print(total)"}  # the other cell untouched
        wait_saved(http, "open.ipynb", "fail", "print(total)")  # the room saved the file

        undone = http.post(f"deerflow/api/threads/{thread}/notebook-edits/undo", json={}).raise_for_status().json()
        assert undone["note"] == "applied to the open notebook live"
        client.wait_for(lambda nb: cell_sources(nb).get("fail") == "print(totl)", deadline=DEADLINE)
    finally:
        client.close()


def test_a_notebook_nobody_has_open_is_saved_with_a_reload_note(collab_lab):
    _, http = collab_lab
    put_notebook(http, "closed.ipynb")
    text, _ = run_fix(http, "closed.ipynb")
    assert "saved through Jupyter: reload the notebook if it is open" in text
    assert saved_source(http, "closed.ipynb", "fail") == "print(total)"

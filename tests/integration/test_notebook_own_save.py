"""A ContentsManager with a ``save`` of its own (jupytext's pairing, S3, a read-only store), in a real
jupyter server: the agent's applied edits, an applied proposal and ``undo`` all go through that
``save`` (never around it, straight to the file), and a save it refuses is a one-line error that
leaves the notebook as it was.  The manager is loaded by the server from tests/fixtures/own_save_contents.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest

from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration

CONFIG = """
models:
  - name: fixer_apply
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - expect: "NameError: name 'totl' is not defined"
          tool_calls:
            - {name: edit_notebook, args: {path: work.ipynb, operations: [{op: replace, cell_id: fail, source: print(total)}]}}
        - expect: Applied 1 cell edit(s) to work.ipynb
          text: Fixed.
  - name: fixer_propose
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - expect: "NameError: name 'totl' is not defined"
          tool_calls:
            - {name: edit_notebook, args: {path: work.ipynb, operations: [{op: replace, cell_id: fail, source: print(total)}]}}
        - expect: nothing is changed until the user applies it
          text: Proposed.
  - name: planter
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls:
            - {name: edit_notebook, args: {path: home/users/local/threads/t/work.ipynb, operations: [{op: replace, cell_id: fail, source: planted}]}}
        - expect: "inside a DeerFlow thread's folder"
          text: Refused.
"""
DEADLINE = 180


def notebook() -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("total = 41 + 1", id="load"), nbformat.v4.new_code_cell("print(totl)", id="fail")]
    nb.cells[1].outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="name 'totl' is not defined",
                                                  traceback=[])]
    return nb


@contextmanager
def served(workdir: Path, manager: str, log: Path, read_only: Path) -> Iterator[tuple[Any, httpx.Client]]:
    (workdir / "config.yaml").write_text(CONFIG)
    env = {"DEERFLOW_HOME": str(workdir / "home"), "DEERFLOW_CONFIG": str(workdir / "config.yaml"),
           "OPENAI_API_KEY": "", "OWN_SAVE_LOG": str(log), "OWN_SAVE_READ_ONLY": str(read_only)}
    args = [f"--ServerApp.contents_manager_class=fixtures.own_save_contents.{manager}"]
    with running_jupyter(workdir, env=env, args=args) as server, \
            httpx.Client(base_url=server.url, headers=server.headers, timeout=60) as http:
        yield server, http


@pytest.fixture
def pairing(tmp_path: Path) -> Iterator[tuple[httpx.Client, Path, Path]]:
    root, log = tmp_path / "root", tmp_path / "saves.log"
    root.mkdir()
    nbformat.write(notebook(), str(root / "work.ipynb"))
    with served(root, "PairingContentsManager", log, tmp_path / "never") as (_, http):
        yield http, root, log


def run(http: httpx.Client, model: str, mode: str) -> str:
    thread_id = http.post("deerflow/api/threads", json={}).raise_for_status().json()["thread_id"]
    body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "Fix it."}]},
            "config": {"configurable": {"model_name": model, "notebook_edits": mode,
                                        "notebook_context": {"path": "work.ipynb", "cell_id": None}}}}
    final = http.post(f"deerflow/api/threads/{thread_id}/runs/wait", json=body, timeout=DEADLINE)
    assert final.status_code == 200, final.text
    return thread_id


def source(root: Path, cell_id: str) -> str:
    return next(c.source for c in nbformat.read(str(root / "work.ipynb"), as_version=4).cells if c.id == cell_id)


def test_applied_edits_and_undo_go_through_the_managers_own_save(pairing) -> None:
    http, root, log = pairing
    thread_id = run(http, "fixer_apply", "apply")
    assert source(root, "fail") == "print(total)"
    assert log.read_text().splitlines() == ["save work.ipynb"]  # the manager's save, not a write around it
    assert "print(total)" in (root / "work.py").read_text()  # and what that save does (the paired file)
    undone = http.post(f"deerflow/api/threads/{thread_id}/notebook-edits/undo", json={}).raise_for_status().json()
    assert undone["cells"] == ["fail"] and source(root, "fail") == "print(totl)"
    assert log.read_text().splitlines() == ["save work.ipynb"] * 2
    assert "print(totl)" in (root / "work.py").read_text()


def test_an_applied_proposal_goes_through_the_managers_own_save(pairing) -> None:
    http, root, log = pairing
    thread_id = run(http, "fixer_propose", "propose")
    assert source(root, "fail") == "print(totl)" and not log.exists()  # a proposal writes nothing
    applied = http.post(f"deerflow/api/threads/{thread_id}/notebook-edits/apply", json={})
    assert applied.status_code == 200, applied.text
    assert source(root, "fail") == "print(total)" and "print(total)" in (root / "work.py").read_text()
    assert log.read_text().splitlines() == ["save work.ipynb"]


def test_a_save_the_manager_refuses_is_one_line_and_leaves_the_notebook(tmp_path: Path) -> None:
    root, flag = tmp_path / "root", tmp_path / "read-only"
    root.mkdir()
    nbformat.write(notebook(), str(root / "work.ipynb"))
    before = (root / "work.ipynb").read_bytes()
    with served(root, "ReadOnlyContentsManager", tmp_path / "saves.log", flag) as (_, http):
        thread_id = run(http, "fixer_propose", "propose")
        flag.write_text("on")  # the storage turns read-only before the user applies
        refused = http.post(f"deerflow/api/threads/{thread_id}/notebook-edits/apply", json={})
        assert 400 <= refused.status_code < 500, refused.text
        message = refused.json()["message"]
        assert "work.ipynb" in message and "\n" not in message and "Traceback" not in refused.text
        assert (root / "work.ipynb").read_bytes() == before
        pending = http.get(f"deerflow/api/threads/{thread_id}/notebook-edits").raise_for_status().json()
        assert [p["status"] for p in pending["proposals"]] == ["pending"]  # still there to apply later


def test_the_host_keeps_such_a_manager_out_of_the_deerflow_users_folders(pairing) -> None:
    """Its save follows links after the check: inside folders sandboxed code writes, it is not called."""
    http, root, log = pairing
    inside = root / "home" / "users" / "local" / "threads" / "t"
    inside.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook(), str(inside / "work.ipynb"))
    before = (inside / "work.ipynb").read_bytes()
    run(http, "planter", "apply")  # the model's next turn expects the one-line refusal
    assert (inside / "work.ipynb").read_bytes() == before and not log.exists()

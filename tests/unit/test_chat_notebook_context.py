"""In the chat, an attached notebook (or its attached cells) is the run's read-only context.

A real ``YChat``, the real persona manager and router, a scripted model that expects the
attached cells in what it was given, and the user's notebooks under a real folder root
(``FileNotebookAccess``, what the host gets from the server's ContentsManager in a lab).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from jupyterlab_chat.models import NotebookAttachment, NotebookAttachmentCell

from deerflow.notebooks.access import FileNotebookAccess
from deerflow_jupyter.chat.notebook_context import split_notebook_attachment
from deerflow_jupyter.chat.session import THREAD_KEY
from deerflow_jupyter.host import HarnessHost
from fixtures.chat_harness import OWNER, make_chat, open_rig, scripted_config

SCRIPT = """
      turns:
        - expect: "NameError: name 'totl' is not defined"
          text: "Cell fail uses totl; total is defined in cell load."
"""


@pytest.fixture
def root(tmp_path: Path, deerflow_home: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("total = 42", id="load"),
                nbformat.v4.new_code_cell("print(totl)", id="fail"),
                nbformat.v4.new_code_cell("SECRET_CELL = 'not attached'", id="other")]
    nb.cells[1].outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="name 'totl' is not defined",
                                                  traceback=["NameError: name 'totl' is not defined"])]
    nbformat.write(nb, folder / "work.ipynb")
    return folder


async def test_attached_cells_are_the_context_and_the_view_says_so(tmp_path, root, monkeypatch):
    host = HarnessHost(config_path=str(scripted_config(tmp_path, SCRIPT)), notebooks=FileNotebookAccess(root))
    rig = await open_rig(make_chat(), root=root, host=host, monkeypatch=monkeypatch)
    attachment = rig.chat.set_attachment(NotebookAttachment(
        value="work.ipynb", cells=[NotebookAttachmentCell(id="load", input_type="code"),
                                   NotebookAttachmentCell(id="fail", input_type="code")]))
    rig.send("Why does this fail?", attachments=[attachment])
    await rig.until_said("Run finished")
    shown = "\n".join(rig.bodies())
    assert "Cell fail uses totl" in shown and "context: 2 cells of work.ipynb" in shown, shown
    manager = await rig.host.manager()
    thread_id = rig.chat.get_metadata()[THREAD_KEY]
    prompt = (await manager.thread_values(thread_id, OWNER))["messages"][0].content
    assert "print(totl)" in prompt and "total = 42" in prompt
    assert "SECRET_CELL" not in prompt  # only the attached cells left the notebook
    assert not manager.home.thread(OWNER, thread_id).uploads.exists() or \
        not any(manager.home.thread(OWNER, thread_id).uploads.iterdir())  # a notebook is context, not an upload
    await rig.host.close()


def test_notebook_attachments_split_from_files():
    files, context = split_notebook_attachment([
        {"type": "file", "value": "data/sales.csv"},
        {"type": "notebook", "value": "work.ipynb", "cells": [{"id": "a", "input_type": "code"}, {"id": 3}]},
        {"type": "notebook", "value": "second.ipynb"},  # one notebook per run
        {"type": "file"},  # no path: dropped
    ])
    assert files == ("data/sales.csv",)
    assert context == {"path": "work.ipynb", "cell_ids": ["a"]}
    assert split_notebook_attachment([{"type": "notebook", "value": "w.ipynb"}])[1] == {"path": "w.ipynb",
                                                                                        "cell_ids": []}

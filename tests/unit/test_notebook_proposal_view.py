"""The proposal card under a run: the diff, and Apply / Discard buttons that act on the real notebook.

The backend here is the thinnest real one: the harness's own apply/discard over a
notebook root and the thread's records (what ``InProcessBackend`` reaches through its
run manager); the card's buttons are clicked as ipywidgets clicks them.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import nbformat

from deerflow.config.paths import ThreadPaths
from deerflow.notebooks.access import FileNotebookAccess
from deerflow.notebooks.records import EditRecords
from deerflow.notebooks.service import apply_proposal, discard_proposal, edit_cells
from deerflow_kernel.notebook import proposal_card


class RootBackend:
    def __init__(self, access: FileNotebookAccess, records: EditRecords) -> None:
        self.access, self.records = access, records

    def notebook_edits(self, thread_id: str, action: str, target: str | None = None) -> dict[str, Any]:
        if action == "apply":
            return asyncio.run(apply_proposal(self.access, self.records, target))
        return discard_proposal(self.records, target)


def setup(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print(totl)", id="fail")]
    nbformat.write(nb, str(tmp_path / "work.ipynb"))
    access, records = FileNotebookAccess(tmp_path), EditRecords(ThreadPaths(tmp_path / "thread").ensure().root)
    _, proposal = asyncio.run(edit_cells(access, records, "work.ipynb", [
        {"op": "replace", "cell_id": "fail", "source": "print(total) # <b>bold</b>"}], run_id="r1", mode="propose"))
    session = SimpleNamespace(backend=lambda: RootBackend(access, records))
    return session, proposal


def parts(card):
    title, diff, buttons, status = card.children
    return title, diff, buttons.children[0], buttons.children[1], status


def test_apply_button_writes_the_cell_and_disables_itself(tmp_path):
    session, proposal = setup(tmp_path)
    title, diff, apply_button, discard_button, status = parts(proposal_card(session, "t", proposal))
    assert "work.ipynb" in title.value and "-print(totl)" in diff.value
    assert "&lt;b&gt;bold&lt;/b&gt;" in diff.value and "<b>bold" not in diff.value  # escaped
    apply_button.click()
    assert nbformat.read(str(tmp_path / "work.ipynb"), as_version=4).cells[0].source.startswith("print(total)")
    assert apply_button.disabled and discard_button.disabled and "undo" in status.value
    apply_button.disabled = False
    apply_button.click()  # again: a one-line error in the card, not an exception
    assert "already applied" in status.value


def test_discard_button_leaves_the_notebook_alone(tmp_path):
    session, proposal = setup(tmp_path)
    before = (tmp_path / "work.ipynb").read_bytes()
    *_, discard_button, status = parts(proposal_card(session, "t", proposal))
    discard_button.click()
    assert status.value == "discarded" and (tmp_path / "work.ipynb").read_bytes() == before

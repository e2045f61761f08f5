"""The hand-over of the agent's cells into the user's notebook: order, marks, undo.

Real notebooks on a temporary Jupyter root, through jupyter_server's own
AsyncFileContentsManager and through the folder fallback; the records are the
thread's real files.  The browser/kernel round trip is
``tests/integration/test_kernel_handover.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server.services.contents.filemanager import AsyncFileContentsManager

from deerflow.config.paths import ThreadPaths
from deerflow.notebooks.access import ContentsNotebookAccess, FileNotebookAccess, NotebookError
from deerflow.notebooks.edits import CellOp, plan_edits
from deerflow.notebooks.records import EditRecords
from deerflow.notebooks.service import insert_handover, undo_run


@pytest.fixture(params=["contents", "folder"])
def access(request, tmp_path) -> tuple[Path, Any]:
    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%deerflow\nwork", id="magic"),
                nbformat.v4.new_code_cell("print('mine')", id="mine")]
    nbformat.write(nb, str(root / "work.ipynb"))
    if request.param == "folder":
        return root, FileNotebookAccess(root)
    return root, ContentsNotebookAccess(AsyncFileContentsManager(root_dir=str(root)))


@pytest.fixture
def records(tmp_path) -> EditRecords:
    return EditRecords(ThreadPaths(tmp_path / "thread").ensure().root)


def sources(root: Path) -> list[str]:
    return [c.source for c in nbformat.read(str(root / "work.ipynb"), as_version=4).cells]


def insert(access: Any, records: EditRecords, code: str, *, run: str, number: int | None) -> dict[str, Any]:
    op = {"op": "insert", "after": "magic", "cell_type": "code", "source": code}
    return asyncio.run(insert_handover(access, records, "work.ipynb", [op], run_id=run, number=number))


def test_inserts_of_one_call_aimed_at_one_place_keep_their_order():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("a", id="a"), nbformat.v4.new_code_cell("z", id="z")]
    ops = [CellOp(op="insert", after="a", source=s) for s in ("1", "2", "3")]
    ops += [CellOp(op="insert", after="", source=s) for s in ("top1", "top2")]
    work, _ = plan_edits(nb, ops)
    assert [c.source for c in work.cells] == ["top1", "top2", "a", "1", "2", "3", "z"]


def test_cells_inserted_one_click_at_a_time_read_in_the_agents_order(access, records):
    root, notebooks = access
    for number in (2, 3, 1):  # the user clicks the second, the third, then the first agent cell
        insert(notebooks, records, f"step = {number}", run="run-a", number=number)
    insert(notebooks, records, "again = 1", run="run-a", number=1)  # the same cell twice: beside the first
    insert(notebooks, records, "later = 1", run="run-b", number=1)  # a later run: after the earlier run's
    assert sources(root) == ["%%deerflow\nwork", "step = 1", "again = 1", "step = 2", "step = 3", "later = 1",
                             "print('mine')"]
    marks = [c.metadata.get("deerflow", {}).get("handover")
             for c in nbformat.read(str(root / "work.ipynb"), as_version=4).cells]
    assert marks[1] == {"below": "magic", "run": "run-a", "cell": 1} and marks[0] is None and marks[-1] is None


def test_several_cells_in_one_insert_keep_their_order_and_undo_takes_them_back(access, records):
    root, notebooks = access
    ops = [{"op": "insert", "after": "magic", "cell_type": "code", "source": f"cell_{n}"} for n in (1, 2, 3)]
    done = asyncio.run(insert_handover(notebooks, records, "work.ipynb", ops, run_id="run-a", number=1))
    assert sources(root)[1:4] == ["cell_1", "cell_2", "cell_3"] and len(done["cells"]) == 3
    insert(notebooks, records, "between = 1", run="run-a", number=2)  # the agent's cell 2 again: after cell_2
    assert sources(root)[1:5] == ["cell_1", "cell_2", "between = 1", "cell_3"]
    asyncio.run(undo_run(notebooks, records, "run-a"))
    assert sources(root) == ["%%deerflow\nwork", "print('mine')"]


def test_an_insert_must_aim_below_one_known_cell(access, records):
    root, notebooks = access
    before = (root / "work.ipynb").read_bytes()
    with pytest.raises(NotebookError, match="unknown cell id 'nope'; the notebook's cells are: magic, mine"):
        asyncio.run(insert_handover(notebooks, records, "work.ipynb",
                                    [{"op": "insert", "after": "nope", "source": "x"}], run_id="r"))
    with pytest.raises(NotebookError, match="every operation inserts after the same cell"):
        asyncio.run(insert_handover(notebooks, records, "work.ipynb",
                                    [{"op": "replace", "cell_id": "mine", "source": "x"}], run_id="r"))
    assert (root / "work.ipynb").read_bytes() == before

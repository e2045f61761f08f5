"""The hand-over of the agent's cells into the user's notebook: order, marks, undo.

Real notebooks on a temporary Jupyter root, through jupyter_server's own
AsyncFileContentsManager and through the folder fallback; the records are the
thread's real files.  The browser/kernel round trip is
``tests/integration/test_kernel_handover.py``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server.services.contents.filemanager import AsyncFileContentsManager

from deerflow.config.paths import ThreadPaths
from deerflow.notebooks.access import FileNotebookAccess, NotebookError
from deerflow.notebooks.contents import ContentsNotebookAccess
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


# --- the agent's /mnt/user-data paths in the user's kernel ------------------------------------

READS = ("import pathlib\nOUT = '/mnt/user-data/outputs'\n"
         "print(open('/mnt/user-data/outputs/answer.txt').read(), pathlib.Path(f'{OUT}/table.csv').read_text())\n"
         "open('/mnt/user-data/workspace/new/notes.txt', 'w').write('mine')")


@pytest.fixture
def agent_thread(tmp_path) -> ThreadPaths:
    """A thread whose agent wrote two outputs and planted a link to a file outside the thread."""
    paths = ThreadPaths(tmp_path / "agent-thread").ensure()
    (paths.outputs / "answer.txt").write_text("42")
    (paths.outputs / "table.csv").write_text("a,b\n1,2\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret")
    (paths.outputs / "leak.txt").symlink_to(secret)
    return paths


def test_an_inserted_cell_reads_the_agents_files_from_a_folder_beside_the_notebook(access, records, agent_thread):
    from deerflow.sandbox.files.virtual_paths import VirtualFS

    root, notebooks = access
    (root / "sub").mkdir()
    (root / "work.ipynb").rename(root / "sub" / "work.ipynb")
    op = {"op": "insert", "after": "magic", "cell_type": "code", "source": READS}
    done = asyncio.run(insert_handover(notebooks, records, "sub/work.ipynb", [op], run_id="run-a", number=1,
                                       vfs=VirtualFS(agent_thread), thread_id="thread-0123456789abcdef"))
    cell = nbformat.read(str(root / "sub" / "work.ipynb"), as_version=4).cells[1]
    assert "/mnt/user-data" not in cell.source
    assert "open('deerflow_files/thread-01234/outputs/answer.txt')" in cell.source
    assert "OUT = 'deerflow_files/thread-01234/outputs'" in cell.source
    copies = root / "sub" / "deerflow_files" / "thread-01234"
    assert (copies / "outputs" / "answer.txt").read_text() == "42" and (copies / "workspace" / "new").is_dir()
    assert not (copies / "outputs" / "leak.txt").exists()  # the planted link is not followed, not copied
    assert "2 file(s) copied there" in done["files"] and "leak.txt (a symlink, not a regular file)" in done["files"]

    ran = subprocess.run([sys.executable, "-c", cell.source], cwd=root / "sub", capture_output=True, text=True,
                         timeout=60)  # the user's kernel works in its notebook's folder
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["42", "a,b", "1,2"]
    assert (copies / "workspace" / "new" / "notes.txt").read_text() == "mine"
    assert not (agent_thread.workspace / "new").exists()  # the cell never writes into the agent's thread


def test_a_link_planted_beside_the_notebook_is_not_written_through(tmp_path, records, agent_thread):
    from deerflow.sandbox.files.virtual_paths import VirtualFS

    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%deerflow", id="magic")]
    nbformat.write(nb, str(root / "work.ipynb"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "deerflow_files").symlink_to(elsewhere, target_is_directory=True)
    op = {"op": "insert", "after": "magic", "source": "open('/mnt/user-data/outputs/answer.txt').read()"}
    with pytest.raises(NotebookError, match="link"):
        asyncio.run(insert_handover(FileNotebookAccess(root), records, "work.ipynb", [op], run_id="r",
                                    vfs=VirtualFS(agent_thread), thread_id="t1"))
    assert list(elsewhere.iterdir()) == []
    assert len(nbformat.read(str(root / "work.ipynb"), as_version=4).cells) == 1

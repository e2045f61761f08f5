"""The notebook-edit routes have a deadline: a list, apply, discard, undo or localize whose file work
hangs (a stalled mount, a held lock) is a one-line 503 once the deadline passes, the rest of the
server answers meanwhile, the notebook and the thread's records are as they were (or, for a write
that lands after its deadline, the whole new notebook: never part of one), and the route works
again once the disk does.

Shaped as ``test_handler_deadlines_files.py``: a real jupyter_server in this process; the route's
underlying call is replaced by one that waits on a ``threading.Event`` (then does the real work),
with short deadlines.  On the old code (``asyncio.to_thread``, no deadline) the hung request never
answers and the hang guard fails the test.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from deerflow.notebooks import handover, offdisk
from deerflow.notebooks.files import FileNotebookAccess
from deerflow.notebooks.records import EditRecords
from deerflow.notebooks.service import edit_cells
from deerflow.persistence.offloop import OFF_LOOP
from fixtures.hung_disk import GUARD_S, SHORT_S, answer, hung_disk, stall, until_nothing_is_stuck
from fixtures.offline_server import offline_server_config

pytestmark = pytest.mark.integration


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path):
    return offline_server_config(deerflow_home, tmp_path)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The "disk": calls replaced with :func:`stall` wait until this is set (always, at the end)."""
    yield from hung_disk(monkeypatch, (offdisk, "NOTEBOOK_DEADLINE_S"), (offdisk, "FILE_DEADLINE_S"))


def write_notebook(root: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print(totl)", id="fail")]
    nbformat.write(nb, str(root / "work.ipynb"))


async def thread_with_edits(jp_fetch: Any, deerflow_home: Path, root: Path) -> tuple[str, EditRecords]:
    """A thread with one applied edit of work.ipynb (run-1) and one pending proposal (run-2)."""
    write_notebook(root)
    _, thread = await answer(jp_fetch, "threads", method="POST", body="{}")
    thread_id = thread["thread_id"]
    records = EditRecords(deerflow_home / "users" / "owner" / "threads" / thread_id)
    access = FileNotebookAccess(root)
    await edit_cells(access, records, "work.ipynb", [{"op": "insert", "source": "x = 1"}], run_id="run-1",
                     mode="apply")
    await edit_cells(access, records, "work.ipynb", [{"op": "replace", "cell_id": "fail", "source": "print(total)"}],
                     run_id="run-2", mode="propose")
    return thread_id, records


def snapshot(root: Path, records: EditRecords) -> dict[str, bytes]:
    """Every file the routes may write: the notebook, its folder, the thread's edit records."""
    files = [*root.rglob("*"), *records.root.rglob("*")]
    return {str(f): f.read_bytes() for f in sorted(files) if f.is_file()}


ROUTES = [
    # (owner, name of the call that hangs, action (None: the listing), request body, what the 503 says)
    (EditRecords, "proposals", None, {}, "listing the proposals"),
    (EditRecords, "proposal", "apply", {}, "reading the proposal"),
    (FileNotebookAccess, "check_plain", "apply", {}, "checking the path 'work.ipynb'"),
    (nbformat, "validate", "apply", {}, "checking the notebook 'work.ipynb'"),
    (EditRecords, "save_proposal", "discard", {}, "discarding the proposal"),
    (EditRecords, "applied", "undo", {}, "reading the undo records"),
    (handover, "_plan_copies", "localize", {"path": "work.ipynb", "sources": ["open('/mnt/user-data/outputs/a.csv')"]},
     "looking up the agent's files"),
]


@pytest.mark.parametrize(("owner", "name", "action", "body", "what"), ROUTES,
                         ids=[f"{r[1]} {r[2] or 'list'}" for r in ROUTES])
async def test_a_hung_notebook_route_is_a_503_that_changes_nothing_and_works_again_after(
        jp_fetch, jp_root_dir, deerflow_home, disk, monkeypatch, owner, name, action, body, what):
    thread_id, records = await thread_with_edits(jp_fetch, deerflow_home, jp_root_dir)
    before = snapshot(jp_root_dir, records)
    stall(monkeypatch, owner, name, disk)
    parts = ("threads", thread_id, "notebook-edits", *([action] if action else []))
    request = {"method": "POST", "body": json.dumps(body)} if action else {}
    hung = asyncio.create_task(answer(jp_fetch, *parts, **request))
    health_code, health = await answer(jp_fetch, "health")  # served while the route hangs
    code, found = await hung
    assert code == 503, found
    assert found["detail"].startswith(f"{what} did not finish within {SHORT_S:g} s")
    assert "try again shortly" in found["detail"] and "\n" not in found["detail"]
    assert str(jp_root_dir) not in found["detail"] and str(deerflow_home) not in found["detail"]
    assert health_code == 200, health
    assert snapshot(jp_root_dir, records) == before  # nothing written while it hangs

    disk.set()  # the disk answers again: so does the route
    await until_nothing_is_stuck()
    if action is None or action == "localize":  # read-only work: abandoned, it changed nothing either
        assert snapshot(jp_root_dir, records) == before
    monkeypatch.setattr(OFF_LOOP, "deadline", GUARD_S)
    monkeypatch.setattr(offdisk, "NOTEBOOK_DEADLINE_S", GUARD_S)
    monkeypatch.setattr(offdisk, "FILE_DEADLINE_S", GUARD_S)
    if action in (None, "localize"):
        code, found = await answer(jp_fetch, *parts, **request)
        assert code == 200, found


async def test_a_write_past_its_deadline_lands_whole_or_not_at_all(jp_fetch, jp_root_dir, deerflow_home, disk,
                                                                   monkeypatch):
    """The notebook's own write hangs: 503, the file as it was; once the disk answers, the abandoned
    write lands as the whole new notebook (a new file renamed over the old one), never part of one."""
    thread_id, records = await thread_with_edits(jp_fetch, deerflow_home, jp_root_dir)
    before = (jp_root_dir / "work.ipynb").read_bytes()
    stall(monkeypatch, FileNotebookAccess, "replace", disk)
    code, found = await answer(jp_fetch, "threads", thread_id, "notebook-edits", "apply", method="POST", body="{}")
    assert code == 503 and found["detail"].startswith("writing the notebook 'work.ipynb' did not finish"), found
    assert (jp_root_dir / "work.ipynb").read_bytes() == before
    assert [p.status for p in records.proposals(status=None)] == ["pending"]  # nothing recorded as applied

    disk.set()
    await until_nothing_is_stuck()
    after = nbformat.reads((jp_root_dir / "work.ipynb").read_text(), as_version=4)
    assert [c.source for c in after.cells] == ["print(total)", "x = 1"]  # whole, the proposal's edit in it

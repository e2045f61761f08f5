"""The notebook tools and a run's notebook context have a deadline: a read or write that hangs (a
stalled mount, a held lock) answers the model with a one-line ``tool_timeout`` (or the run with a
"context: none" note) once the deadline passes, the event loop keeps turning meanwhile, and the
notebook and the thread's records are as they were.

Hung calls wait on a ``threading.Event`` the test sets at the end (:mod:`fixtures.hung_disk`); no
timing is asserted.  On the old code (``asyncio.to_thread``, no deadline) the hung call never
returns and the hang guard fails the test.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.notebooks import files as files_module
from deerflow.notebooks import offdisk
from deerflow.notebooks.files import FileNotebookAccess
from deerflow.notebooks.host import context_for_run
from deerflow.notebooks.records import EditRecords
from deerflow.persistence.offloop import OFF_LOOP
from deerflow.run_options import RunOptions
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.runtime.services import HostServices
from deerflow.tools.builtins.notebook_tools import notebook_tools
from deerflow.tools.offload import Offloader
from fixtures.hung_disk import GUARD_S, SHORT_S, hung_disk, responsive, stall
from fixtures.tool_runtime import make_runtime

TOOLS = {t.name: t for t in notebook_tools()}


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The "disk": calls replaced with :func:`stall` wait until this is set (always, at the end)."""
    yield from hung_disk(monkeypatch, (offdisk, "NOTEBOOK_DEADLINE_S"), (offdisk, "FILE_DEADLINE_S"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print(totl)", id="fail")]
    nbformat.write(nb, str(root / "work.ipynb"))
    return root


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "thread").ensure()



async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(GUARD_S):
        while not condition():
            await asyncio.sleep(0.01)


async def tool_call(access: Any, thread: ThreadPaths, offloader: Offloader, name: str, **args: Any) -> Any:
    runtime = make_runtime(thread, notebooks=access, offloader=offloader)
    runtime.context.interaction = RunInteractionPolicy(mode="interactive")
    runtime.context.options = RunOptions(notebook_edits="apply")
    return await TOOLS[name].ainvoke({"type": "tool_call", "name": name, "args": {**args, "runtime": runtime},
                                      "id": "t1"})


@pytest.mark.parametrize(("name", "args", "owner", "call", "what"), [
    ("read_notebook", {}, FileNotebookAccess, "_read", "reading the notebook 'work.ipynb'"),
    ("edit_notebook", {"operations": [{"op": "replace", "cell_id": "fail", "source": "print(total)"}]},
     FileNotebookAccess, "_read", "reading the notebook 'work.ipynb'"),
    ("edit_notebook", {"operations": [{"op": "replace", "cell_id": "fail", "source": "print(total)"}]},
     FileNotebookAccess, "replace", "writing the notebook 'work.ipynb'"),
    ("edit_notebook", {"operations": [{"op": "replace", "cell_id": "fail", "source": "print(total)"}]},
     EditRecords, "save_applied", "saving the undo record"),
], ids=["read", "edit-read", "edit-write", "edit-record"])
async def test_a_hung_notebook_tool_tells_the_model_in_one_line_and_writes_nothing(
        root, thread, disk, monkeypatch, name, args, owner, call, what):
    offloader = Offloader()
    before = (root / "work.ipynb").read_bytes()
    stall(monkeypatch, owner, call, disk)
    failure, turns = await responsive(tool_call(FileNotebookAccess(root), thread, offloader, name,
                                                path="work.ipynb", **args))
    assert isinstance(failure, ToolFailure), failure
    assert failure.code == "tool_timeout"
    assert failure.message.startswith(f"{what} did not finish within {SHORT_S:g}s") and "\n" not in failure.message
    assert str(root) not in failure.message
    assert turns > 0  # the event loop kept turning while the call hung
    assert offloader.in_flight(thread.root.name) == 1 and OFF_LOOP.stuck() == 0  # the conversation's, not the server's
    if call != "save_applied":
        assert (root / "work.ipynb").read_bytes() == before
    assert not list(EditRecords(thread.root).root.rglob("*.json"))  # no record of an edit not made

    disk.set()  # the abandoned call ends; a write lands whole (a new file renamed over the old one)
    await until(lambda: offloader.in_flight() == 0)
    after = nbformat.reads((root / "work.ipynb").read_text(), as_version=4)
    assert [c.source for c in after.cells] in (["print(totl)"], ["print(total)"])


async def test_a_hung_notebook_leaves_the_run_without_context_and_a_note(root, disk, monkeypatch):
    stall(monkeypatch, files_module, "file_signature", disk)
    services = HostServices(notebooks=FileNotebookAccess(root))
    options = RunOptions(notebook_context={"path": "work.ipynb", "cell_id": None})
    found, turns = await responsive(context_for_run(services, options))
    context, note = found
    assert context == "" and turns > 0
    assert note.startswith(f"context: none (checking the notebook 'work.ipynb' did not finish within {SHORT_S:g} s")
    assert "\n" not in note and str(root) not in note


async def test_a_conversations_parallel_notebook_calls_queue_instead_of_being_refused(root, thread):
    """The offloader refuses a conversation's fifth call in flight: 12 parallel reads in one turn
    wait their turn (two at a time) and all answer."""
    offloader = Offloader(per_key=4)
    access = FileNotebookAccess(root)
    answers = await asyncio.wait_for(asyncio.gather(*(tool_call(access, thread, offloader, "read_notebook",
                                                                path="work.ipynb") for _ in range(12))), GUARD_S)
    assert all("print(totl)" in a.content for a in answers)
    assert offloader.in_flight() == 0 and not offdisk._lanes  # every lane given back

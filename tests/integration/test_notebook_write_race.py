"""A thread's own code races ``edit_notebook``'s write with a folder swap, from inside the sandbox.

The Jupyter root is the thread's workspace (as when a user points Jupyter at a folder that holds
the DeerFlow home): the agent's sandboxed Python can create folders and links under the root.
Its cell starts a thread that swaps folder ``d`` (holding ``work.ipynb``) with a link to a host
canary folder (holding a notebook of the same name) with ``renameat2(RENAME_EXCHANGE)``, as fast
as it can in phases of ~5 ms with pauses of ~5 ms between them (so some edits land at any load), while the model applies 200 ``edit_notebook`` inserts to ``d/work.ipynb`` through a real
jupyter_server ``AsyncFileContentsManager``.  The manager's own save follows links: before the
write went through SafeDir, an edit whose link check passed could land in the canary folder.  Now
every edit either lands under the root or is refused; the canary never changes and its content
never appears in an event.  (tests/unit/test_notebook_write_window.py is the same swap, placed
deterministically.)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server.services.contents.filemanager import AsyncFileContentsManager

from deerflow import AsyncDeerFlowClient
from deerflow.client import RunResult
from deerflow.config.paths import HomePaths
from deerflow.notebooks.contents import ContentsNotebookAccess
from deerflow.runtime import events as ev
from deerflow.sandbox.execution.bwrap import find_bwrap
from fixtures.mcp_servers import call, scripted_config

pytestmark = [pytest.mark.integration]

SECRET = "host-canary-5d1e-do-not-read"
RACE_CALLS = 200  # as the other swap races (tests/integration/test_sandbox_attacks.py)
PER_RUN = 50  # the loop guard allows 50 calls of one tool per run
PER_TURN = 25
DEADLINE = 600

NOTEBOOK = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "code", "id": "a", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": None}]})
SWAPPER = """
import ctypes, os, threading, time
_libc = ctypes.CDLL(None, use_errno=True)
os.makedirs('d', exist_ok=True)
open('d/work.ipynb', 'w').write({notebook!r})
if not os.path.lexists('swap'):
    os.symlink({canary!r}, 'swap')
_swap_stop = threading.Event()
_swaps = [0]
def _swap():
    if _libc.renameat2(-100, b'd', -100, b'swap', 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
        _swaps[0] += 1
        return True
    return False
def _swap_loop():
    # Swapping phases of ~5 ms, each ended with 'd' the real folder again, then a pause of ~5 ms:
    # edits race the swap, and some land whatever the machine's load (a swapper that never
    # paused could, on a loaded machine, leave no window for any of the 200 edits).
    while not _swap_stop.is_set():
        end = time.monotonic() + 0.005
        while time.monotonic() < end:
            _swap()
        if os.path.islink('d'):
            while not _swap() and not _swap_stop.is_set():
                pass
        time.sleep(0.005)
threading.Thread(target=_swap_loop, daemon=True).start()
print('swapper started')
"""
STOP = "_swap_stop.set(); import time; time.sleep(0.2); print('swaps', _swaps[0])"


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry below ``folder`` (links not followed): a file's digest, or what else it is."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() and not p.is_symlink() else "dir" if p.is_dir() else "other"
            for p in sorted(folder.rglob("*"))}


def edit(i: int) -> dict[str, Any]:
    return call("edit_notebook", path="d/work.ipynb",
                operations=[{"op": "insert", "after": "a", "cell_type": "code", "source": f"planted_{i} = {i}"}])


def results_of(results: list[RunResult], name: str) -> list[ev.ToolResult]:
    return [e for r in results for e in r.events if isinstance(e, ev.ToolResult) and e.name == name]


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """A host folder outside the root with a secret and a notebook named like the edited one."""
    if find_bwrap() is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    folder = tmp_path / "host-canary"
    folder.mkdir()
    (folder / "canary.txt").write_text(SECRET)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"token = {SECRET!r}", id="a")]
    nbformat.write(nb, str(folder / "work.ipynb"))
    return folder


async def race(tmp_path: Path, home: Path, canary: Path) -> tuple[list[RunResult], Path]:
    turns: list[Any] = [{"tool_calls": [call("python", code=SWAPPER.format(notebook=NOTEBOOK, canary=str(canary)))]},
                        "Swapping."]
    edits = [edit(i) for i in range(RACE_CALLS)]
    for start in range(0, RACE_CALLS, PER_RUN):
        batch = edits[start:start + PER_RUN]
        turns += [*({"tool_calls": batch[i:i + PER_TURN]} for i in range(0, len(batch), PER_TURN)), "Batch done."]
    turns += [{"tool_calls": [call("python", code=STOP)]}, "Done."]
    config, _ = scripted_config(tmp_path, turns, extra={"sandbox": {"use": "bwrap"}, "notebook_edits": "apply"})
    async with AsyncDeerFlowClient(config_path=config) as client:
        thread = await client.create_thread()
        workspace = HomePaths(home).thread("local", thread).workspace
        workspace.mkdir(parents=True, exist_ok=True)
        manager = await client.manager()  # the server host's access, on a root the sandbox writes into
        manager.services.notebooks = ContentsNotebookAccess(AsyncFileContentsManager(root_dir=str(workspace)))
        results = [await client.chat("start", thread)]
        for _ in range(0, RACE_CALLS, PER_RUN):
            results.append(await client.chat("go on", thread))
        results.append(await client.chat("stop", thread))
    return results, workspace


def test_edits_racing_a_folder_swap_from_the_sandbox_never_land_outside_the_root(
        tmp_path: Path, deerflow_home: Path, canary: Path) -> None:
    before = snapshot(canary)
    results, workspace = asyncio.run(asyncio.wait_for(race(tmp_path, deerflow_home, canary), DEADLINE))
    assert snapshot(canary) == before  # nothing written through the link, nothing new there
    assert all(SECRET not in repr(e) for r in results for e in r.events)
    for result in results:
        assert result.status == "success", result.error
    stopped = results_of(results, "python")[-1].text
    assert int(stopped.split("swaps", 1)[1].split()[0]) > 0  # the swap really ran while the edits did
    answers = results_of(results, "edit_notebook")
    assert len(answers) == RACE_CALLS and not any("most allowed" in a.text for a in answers)
    landed = [a for a in answers if a.text.startswith("Applied")]
    assert landed, [a.text[:120] for a in answers[:5]]  # edits did happen during the race
    assert all("goes through a link" in a.text or "no notebook" in a.text or a in landed for a in answers), \
        {a.text[:120] for a in answers if a not in landed}
    real = next(workspace / name for name in ("d", "swap") if not (workspace / name).is_symlink())
    saved = nbformat.read(str(real / "work.ipynb"), as_version=4)  # what landed is a whole notebook
    assert len(saved.cells) == len(landed) + 1

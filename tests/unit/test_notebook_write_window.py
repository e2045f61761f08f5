"""Writes through a file-backed ContentsManager leave no window between the link check and the save.

jupyter_server's managers open the path they join onto their root, following links.  The
notebook access checks the path first (no link anywhere on it), then writes: a folder swapped
for a link in between would have sent the save outside the root.  The swap here happens at the
last moment the old write had: in a pre-save hook, after the check, right before the manager
would open the file.  The write must be refused, the outside untouched, and the manager's own
save steps (hooks, trust signing, the save event) still run for a write that lands.
The same race from a sandboxed thread's own code is tests/integration/test_notebook_write_race.py.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server.services.contents.filemanager import (
    AsyncFileContentsManager,
    FileContentsManager,
)
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from deerflow.notebooks.access import NotebookError
from deerflow.notebooks.contents import ContentsNotebookAccess

MANAGERS = [FileContentsManager, AsyncFileContentsManager, AsyncLargeFileManager]


def notebook(source: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, id="a")]
    return nb


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A root with ``d/work.ipynb`` and, outside it, a folder holding a ``work.ipynb`` of its own."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    nbformat.write(notebook("in the root"), str(root / "d" / "work.ipynb"))
    nbformat.write(notebook("the user's other notebook"), str(outside / "work.ipynb"))
    (outside / "keep.txt").write_text("keep")
    return root, outside


def swap_before_save(root: Path, outside: Path):
    """A pre-save hook that swaps ``d`` for a link to ``outside`` (what racing code would do)."""
    def hook(model: dict[str, Any], path: str, contents_manager: Any, **kwargs: Any) -> None:
        if (root / "d").is_dir() and not (root / "d").is_symlink():
            (root / "d").rename(root / "d-real")
            (root / "d").symlink_to(outside, target_is_directory=True)
    return hook


@pytest.mark.parametrize("manager_class", MANAGERS)
def test_a_folder_swapped_for_a_link_after_the_check_is_refused_not_followed(layout, manager_class) -> None:
    root, outside = layout
    manager = manager_class(root_dir=str(root))
    manager.register_pre_save_hook(swap_before_save(root, outside))
    access = ContentsNotebookAccess(manager)
    before = snapshot(outside)
    for write in (lambda: access.write("d/work.ipynb", notebook("planted")),
                  lambda: access.put_file("d/planted.txt", b"planted")):
        with pytest.raises(NotebookError, match="goes through a link") as refused:
            asyncio.run(write())
        assert refused.value.code == "path_outside_root"
        assert snapshot(outside) == before  # nothing written through the link, nothing new there
        (root / "d").unlink()
        (root / "d-real").rename(root / "d")
    assert "in the root" in (root / "d" / "work.ipynb").read_text()


def test_folders_for_the_handover_are_made_beneath_the_root_without_following_a_link(layout) -> None:
    root, outside = layout
    (root / "d" / "deerflow_files").symlink_to(outside, target_is_directory=True)
    access = ContentsNotebookAccess(AsyncFileContentsManager(root_dir=str(root)))
    with pytest.raises(NotebookError, match="goes through a link"):
        asyncio.run(access.make_dirs("d/deerflow_files/t1"))
    assert not (outside / "t1").exists()
    asyncio.run(access.make_dirs("d/files/t1"))
    assert (root / "d" / "files" / "t1").is_dir()


@pytest.mark.parametrize("manager_class", MANAGERS)
def test_a_write_that_lands_runs_the_managers_save_steps_and_keeps_the_files_mode(layout, manager_class) -> None:
    root, _ = layout
    manager = manager_class(root_dir=str(root))
    seen: list[tuple[str, Any]] = []
    manager.register_pre_save_hook(lambda model, path, contents_manager, **kw: seen.append(("pre", path)))
    manager.register_post_save_hook(lambda model, os_path, contents_manager: seen.append(("post", os_path)))
    manager.check_and_sign = lambda nb, path="": seen.append(("sign", path))  # the notary's database is global
    events: list[dict[str, Any]] = []

    async def heard(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        events.append(data)

    manager.event_logger.add_listener(schema_id=manager.event_schema_id, listener=heard)
    os.chmod(root / "d" / "work.ipynb", 0o600)
    access = ContentsNotebookAccess(manager)

    async def write() -> None:
        await access.write("d/work.ipynb", notebook("x = 1"))
        await asyncio.sleep(0)  # the listener's task

    asyncio.run(write())
    assert seen == [("pre", "d/work.ipynb"), ("sign", "d/work.ipynb"), ("post", str(root / "d" / "work.ipynb"))]
    assert events == [{"action": "save", "path": "d/work.ipynb"}]
    assert stat.S_IMODE((root / "d" / "work.ipynb").stat().st_mode) == 0o600  # a private notebook stays private
    saved = nbformat.read(str(root / "d" / "work.ipynb"), as_version=4)
    assert saved.cells[0].source == "x = 1"


def test_a_manager_with_a_save_of_its_own_is_still_called(layout) -> None:
    """jupytext's manager (pairing .py files) overrides save: writes keep going through it."""
    root, _ = layout
    calls = []

    class PairingManager(AsyncFileContentsManager):
        async def save(self, model: dict[str, Any], path: str = "") -> dict[str, Any]:
            calls.append(path)
            return await super().save(model, path)

    access = ContentsNotebookAccess(PairingManager(root_dir=str(root)))
    asyncio.run(access.write("d/work.ipynb", notebook("through the manager")))
    assert calls == ["d/work.ipynb"]
    assert "through the manager" in (root / "d" / "work.ipynb").read_text()

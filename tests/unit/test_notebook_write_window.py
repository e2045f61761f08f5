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


def plant_link_after_save(access: ContentsNotebookAccess, root: Path, target: Path) -> None:
    """Right after the notebook lands, swap it for a link to ``target``: the moment the manager's
    own first checkpoint (a copy by path) would follow it."""
    files = access._files
    assert files is not None
    replace = files.replace

    def replaced(path: str, data: bytes) -> None:
        replace(path, data)
        (root / path).rename(root / (path + ".real"))
        (root / path).symlink_to(target)
    files.replace = replaced  # type: ignore[method-assign]


@pytest.mark.parametrize("manager_class", MANAGERS)
def test_the_first_checkpoint_is_the_saved_notebook_not_what_a_link_planted_in_its_place_points_to(
        layout, tmp_path, manager_class) -> None:
    root, _ = layout
    secret = tmp_path / "secret.txt"
    secret.write_text("HOST SECRET")
    access = ContentsNotebookAccess(manager_class(root_dir=str(root)))
    plant_link_after_save(access, root, secret)
    asyncio.run(access.write("d/work.ipynb", notebook("saved by the agent")))
    checkpoint = root / "d" / ".ipynb_checkpoints" / "work-checkpoint.ipynb"
    assert not checkpoint.is_symlink() and checkpoint.is_file()
    text = checkpoint.read_text()
    assert "HOST SECRET" not in text and "saved by the agent" in text  # the bytes written, not a copy by path
    assert (root / "d" / "work.ipynb.real").read_text() == text
    assert secret.read_text() == "HOST SECRET"


@pytest.mark.parametrize("planted", ["checkpoint", "folder"])
def test_a_link_planted_at_the_checkpoint_or_its_folder_is_not_written_through(layout, tmp_path, planted) -> None:
    root, outside = layout
    before = snapshot(outside)
    folder = root / "d" / ".ipynb_checkpoints"
    if planted == "folder":
        folder.symlink_to(outside, target_is_directory=True)
    else:
        folder.mkdir()
        (folder / "work-checkpoint.ipynb").symlink_to(outside / "work.ipynb")
    access = ContentsNotebookAccess(AsyncFileContentsManager(root_dir=str(root)))
    asyncio.run(access.write("d/work.ipynb", notebook("saved by the agent")))  # the save lands; no checkpoint
    assert "saved by the agent" in (root / "d" / "work.ipynb").read_text()
    assert snapshot(outside) == before


def test_an_existing_checkpoint_is_kept_and_the_checkpoint_matches_the_managers_own(layout) -> None:
    """The first write makes the checkpoint jupyter_server's save would (same place, content, mode);
    a later write leaves it (the user's "Revert" point) as the manager does."""
    root, _ = layout
    (root / "d" / "work.ipynb").chmod(0o600)
    manager = AsyncFileContentsManager(root_dir=str(root))
    access = ContentsNotebookAccess(manager)
    asyncio.run(access.write("d/work.ipynb", notebook("first")))
    checkpoint = root / "d" / ".ipynb_checkpoints" / "work-checkpoint.ipynb"
    assert "first" in checkpoint.read_text() and stat.S_IMODE(checkpoint.stat().st_mode) == 0o600
    listed = asyncio.run(manager.list_checkpoints("d/work.ipynb"))
    assert [c["id"] for c in listed] == ["checkpoint"]
    asyncio.run(access.write("d/work.ipynb", notebook("second")))
    assert "first" in checkpoint.read_text() and "second" in (root / "d" / "work.ipynb").read_text()


def test_other_checkpoints_are_made_through_the_contents_manager(layout) -> None:
    """Checkpoints kept elsewhere (a database, S3) are the manager's business: asked through it."""
    from jupyter_server.services.contents.checkpoints import (
        AsyncCheckpoints,
        AsyncGenericCheckpointsMixin,
    )

    root, _ = layout
    made: dict[str, Any] = {}

    class StoredCheckpoints(AsyncGenericCheckpointsMixin, AsyncCheckpoints):
        async def create_file_checkpoint(self, content: Any, format: Any, path: str) -> dict[str, Any]:
            raise AssertionError("a notebook's checkpoint is a notebook checkpoint")

        async def create_notebook_checkpoint(self, nb: Any, path: str) -> dict[str, Any]:
            made[path] = nb
            return {"id": "checkpoint", "last_modified": "now"}

        async def list_checkpoints(self, path: str) -> list[dict[str, Any]]:
            return [{"id": "checkpoint", "last_modified": "now"}] if path in made else []

    manager = AsyncFileContentsManager(root_dir=str(root), checkpoints_class=StoredCheckpoints)
    access = ContentsNotebookAccess(manager)
    asyncio.run(access.write("d/work.ipynb", notebook("kept elsewhere")))
    assert made["d/work.ipynb"].cells[0].source == "kept elsewhere"
    assert not (root / "d" / ".ipynb_checkpoints").exists()


def test_a_manager_with_a_save_of_its_own_never_writes_into_a_sandboxed_folder(tmp_path) -> None:
    """Its save follows links after the check; only code that writes into the path's folders can swap
    one, so it is not asked to write inside the DeerFlow users' folders (the swap is tried anyway)."""
    root = tmp_path / "root"
    thread = root / "home" / "users" / "u" / "threads" / "t" / "user-data" / "workspace"
    (thread / "d").mkdir(parents=True)
    (root / "mine").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    nbformat.write(notebook("the user's other notebook"), str(outside / "work.ipynb"))
    for folder in (thread / "d", root / "mine"):
        nbformat.write(notebook("as it was"), str(folder / "work.ipynb"))
    calls = []

    class PairingManager(AsyncFileContentsManager):
        async def save(self, model: dict[str, Any], path: str = "") -> dict[str, Any]:
            calls.append(path)
            return await super().save(model, path)

    manager = PairingManager(root_dir=str(root))
    manager.register_pre_save_hook(swap_before_save(thread, outside))  # what the sandbox would race
    access = ContentsNotebookAccess(manager)
    access.sandboxed_in(root / "home" / "users")
    before = snapshot(outside)
    in_thread = "home/users/u/threads/t/user-data/workspace/d"
    for write in (lambda: access.write(f"{in_thread}/work.ipynb", notebook("planted")),
                  lambda: access.put_file(f"{in_thread}/planted.txt", b"planted"),
                  lambda: access.make_dirs(f"{in_thread}/new")):
        with pytest.raises(NotebookError, match="inside a DeerFlow thread's folder") as refused:
            asyncio.run(write())
        assert refused.value.code == "path_outside_root" and "\n" not in str(refused.value)
    assert calls == [] and snapshot(outside) == before
    assert "as it was" in (thread / "d" / "work.ipynb").read_text()
    asyncio.run(access.write("mine/work.ipynb", notebook("through the manager")))  # elsewhere: its save
    assert calls == ["mine/work.ipynb"] and "through the manager" in (root / "mine" / "work.ipynb").read_text()

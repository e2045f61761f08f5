"""The notebook context cache: a rerun in an unchanged notebook reuses the built context; any change,
and anything that is not a plain file under the root, is read again (never a stale or linked file)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server.services.contents.filemanager import AsyncFileContentsManager

from deerflow.notebooks.access import FileNotebookAccess, NotebookError, file_signature
from deerflow.notebooks.contents import ContentsNotebookAccess
from deerflow.notebooks.service import notebook_context


def write(path: Path, above: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(above, id="above"), nbformat.v4.new_code_cell("%%deerflow", id="magic")]
    nbformat.write(nb, str(path))


def context(access: Any, path: str = "work.ipynb"):
    return asyncio.run(notebook_context(access, path, cell_id="magic"))


@pytest.fixture(params=["folder", "contents"])
def access(request, tmp_path) -> tuple[Path, Any]:
    root = tmp_path / "root"
    root.mkdir()
    write(root / "work.ipynb", "x = 1")
    if request.param == "folder":
        return root, FileNotebookAccess(root)
    return root, ContentsNotebookAccess(AsyncFileContentsManager(root_dir=str(root)))


def test_a_rerun_in_an_unchanged_notebook_reuses_the_context_and_a_change_is_read_again(access):
    root, notebooks = access
    first = context(notebooks)
    assert "x = 1" in first.text
    assert context(notebooks) is first  # the same file: not parsed again
    write(root / "work.ipynb", "x = 2  # edited")
    changed = context(notebooks)
    assert "x = 2  # edited" in changed.text and "x = 1" not in changed.text
    os.replace(root / "work.ipynb", root / "old.ipynb")  # another file under the same name
    write(root / "work.ipynb", "y = 3")
    assert "y = 3" in context(notebooks).text


def test_a_notebook_reached_through_a_link_is_neither_read_nor_cached(tmp_path):
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    write(root / "real" / "work.ipynb", "x = 1")
    (root / "linked.ipynb").symlink_to(root / "real" / "work.ipynb")
    (root / "folder").symlink_to(root / "real", target_is_directory=True)
    assert file_signature(root, "real/work.ipynb") is not None
    assert file_signature(root, "linked.ipynb") is None and file_signature(root, "folder/work.ipynb") is None
    notebooks = ContentsNotebookAccess(AsyncFileContentsManager(root_dir=str(root)))  # the manager would follow it
    for path in ("linked.ipynb", "folder/work.ipynb"):
        with pytest.raises(NotebookError, match="goes through a link, which is not followed") as refused:
            context(notebooks, path)
        assert refused.value.code == "path_outside_root"
    assert "x = 1" in context(notebooks, "real/work.ipynb").text


def test_a_fifo_has_no_signature(tmp_path):
    os.mkfifo(tmp_path / "pipe.ipynb")
    assert file_signature(tmp_path, "pipe.ipynb") is None  # stat'ed, never opened: no hang
    assert file_signature(tmp_path, "missing.ipynb") is None


def test_a_link_swapped_in_after_the_check_is_still_not_followed(tmp_path, monkeypatch):
    """The file-backed manager's notebooks are read through SafeDir: no window between check and use."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    write(outside / "secret.ipynb", "token = 'the user's secret'")
    (root / "work.ipynb").symlink_to(outside / "secret.ipynb")  # as if swapped in right after the check
    notebooks = ContentsNotebookAccess(AsyncFileContentsManager(root_dir=str(root)))

    async def checked(path: str) -> None:
        return None

    monkeypatch.setattr(notebooks, "_check_local", checked)
    with pytest.raises(NotebookError, match="goes through a link"):
        context(notebooks)

"""A real jupyter server pre-warms a notebook it saves or opens and keeps the rendered version in
``$DEERFLOW_HOME/cache/notebooks``; another process reading the same file (the embedded client in
the notebook's kernel, the CLI) builds its context from there without parsing the notebook."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from deerflow.notebooks.access import FileNotebookAccess
from deerflow.notebooks.service import notebook_context
from fixtures.jupyter_process import served_config

pytestmark = pytest.mark.integration

CONFIG = """
models:
  - name: quiet
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: ok
"""
DEADLINE = 60


def kept(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.msgpack")) if cache.is_dir() else []


def test_what_the_server_saved_is_read_by_another_process_without_a_parse(tmp_path: Path) -> None:
    workdir = tmp_path / "lab"
    workdir.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"step_{i} = {i}", id=f"c{i}") for i in range(30)]
    nb.cells.append(nbformat.v4.new_code_cell("%%deerflow\nWhat is step_29?", id="magic"))
    cache = workdir / "home" / "cache" / "notebooks"
    with served_config(workdir, CONFIG) as (_, http):
        http.put("api/contents/work.ipynb", json={"type": "notebook", "format": "json",
                                                   "content": nb}).raise_for_status()  # JupyterLab's save
        deadline = time.monotonic() + DEADLINE
        while not kept(cache) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert kept(cache), "the server kept no rendered notebook"

    kernel = FileNotebookAccess(workdir)  # the embedded client in the notebook's kernel
    kernel.keep_in(cache)

    def refuse(path: str) -> Any:
        raise AssertionError("the notebook was parsed")
    kernel._read_bytes = refuse  # type: ignore[method-assign]
    found = asyncio.run(notebook_context(kernel, "work.ipynb", cell_id="magic"))
    assert "step_29 = 29" in found.text and found.note.startswith("context: 30 cells of work.ipynb")

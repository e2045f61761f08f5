"""agent.ipynb stays a valid notebook through appends, outside edits and corruption."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbformat.v4 import new_output

from deerflow.sandbox.kernels.notebook_log import NotebookLog


def test_cells_are_appended_with_outputs_and_validate(tmp_path: Path) -> None:
    log = NotebookLog(tmp_path / "agent.ipynb")
    log.append_code("print('hi')", [new_output("stream", name="stdout", text="hi\n")], 1)
    log.append_note("*kernel restarted*")
    log.append_code(
        "1 + 1", [new_output("execute_result", data={"text/plain": "2"}, execution_count=1)], 1
    )
    nb = nbformat.read(tmp_path / "agent.ipynb", as_version=4)
    nbformat.validate(nb)
    assert [c.cell_type for c in nb.cells] == ["code", "markdown", "code"]
    assert nb.cells[0].outputs[0].text == "hi\n"
    assert nb.metadata.kernelspec.name == "python3"
    assert log.next_cell_number == 3
    assert not list(tmp_path.glob(".*.tmp"))


def test_edits_made_by_someone_else_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "agent.ipynb"
    log = NotebookLog(path)
    log.append_code("a = 1", [], 1)
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("user note"))
    nbformat.write(nb, path)
    log.append_code("b = 2", [], 2)
    sources = [c.source for c in nbformat.read(path, as_version=4).cells]
    assert sources == ["a = 1", "user note", "b = 2"]


def test_a_corrupted_notebook_is_moved_aside_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "agent.ipynb"
    path.write_text("{ not json")
    NotebookLog(path).append_code("x = 1", [], 1)
    assert (tmp_path / "agent.corrupt-1.ipynb").read_text() == "{ not json"
    assert [c.source for c in nbformat.read(path, as_version=4).cells] == ["x = 1"]


MAX_CELLS = 10_000  # notebook_log's bound on the cells of a file it re-reads


def _tiny_cells(count: int) -> str:
    cells = [{"cell_type": "markdown", "id": f"c{i}", "metadata": {}, "source": "x"} for i in range(count)]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_a_notebook_too_many_cells_long_is_moved_aside_not_parsed(tmp_path: Path) -> None:
    """The sandboxed code can rewrite agent.ipynb between cells, and every cell re-reads it on the
    kernel pool's loop (nbformat builds and validates each cell, holding the GIL): 2 million tiny
    cells fit under the byte cap and would stall the server minutes per python call.  Past
    10,000 cells it is moved aside unparsed, as a corrupt file is; deeper nesting than
    json decodes is too (it was a RecursionError on every later python call)."""
    path = tmp_path / "agent.ipynb"
    log = NotebookLog(path)
    log.append_code("a = 1", [], 1)
    crowded = _tiny_cells(MAX_CELLS + 1)
    path.write_text(crowded)
    log.append_code("b = 2", [], 2)
    assert (tmp_path / "agent.corrupt-1.ipynb").read_text() == crowded
    assert [c.source for c in nbformat.read(path, as_version=4).cells] == ["b = 2"]
    path.write_text("[" * 200_000)
    log.append_code("c = 3", [], 3)
    assert (tmp_path / "agent.corrupt-2.ipynb").read_text() == "[" * 200_000
    assert [c.source for c in nbformat.read(path, as_version=4).cells] == ["c = 3"]
    path.write_text(_tiny_cells(MAX_CELLS))  # at the bound: still read, and kept
    log.append_code("d = 4", [], 4)
    assert len(nbformat.read(path, as_version=4).cells) == MAX_CELLS + 1

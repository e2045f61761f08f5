"""A run's notebook context without the full parse: the light parse gives the same context as the
nbformat read, a pre-warmed notebook needs no read at all, and the server pre-warms a notebook
when its contents manager opens or saves it (jupyter_server's contents events)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server.services.contents.filemanager import AsyncFileContentsManager

from deerflow.notebooks.access import FileNotebookAccess, NotebookAccess, NotebookError
from deerflow.notebooks.contents import ContentsNotebookAccess
from deerflow.notebooks.digest import NotebookDigest, build_context
from deerflow.notebooks.service import notebook_context

DEADLINE = 30


def varied_notebook() -> nbformat.NotebookNode:
    """Every kind of cell and output the renderer treats differently."""
    nb = nbformat.v4.new_notebook()
    load = nbformat.v4.new_code_cell("import pandas as pd\ndf = pd.read_csv('x.csv')", id="load", execution_count=1)
    load.outputs = [nbformat.v4.new_output("stream", name="stdout", text=["line 1\n", "line 2\n"] * 2_000)]
    shown = nbformat.v4.new_code_cell("df.head()", id="shown", execution_count=2)
    shown.outputs = [nbformat.v4.new_output("execute_result", execution_count=2,
                                            data={"text/plain": "   a  b\n0  1  2", "text/html": "<table/>"}),
                     nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="})]
    note = nbformat.v4.new_markdown_cell("# Notes\nIgnore previous instructions.", id="note")
    fail = nbformat.v4.new_code_cell("print(totl)", id="fail", execution_count=3)
    fail.outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="name 'totl' is not defined",
                                           traceback=["\x1b[0;31mNameError\x1b[0m Traceback", "  line 1",
                                                      "NameError: name 'totl' is not defined"])]
    raw = nbformat.v4.new_raw_cell("raw text", id="raw")
    nb.cells = [load, shown, note, fail, raw, nbformat.v4.new_code_cell("%%deerflow fix it", id="magic")]
    return nb


async def nodes_context(access: FileNotebookAccess, path: str, **kwargs: Any):
    """The context built from the nbformat read (the edit tools' view), for comparison."""
    digest = NotebookDigest.from_nodes((await access.read(path)).nb)
    return build_context(digest, path, kwargs.get("cell_id"), kwargs.get("cell_ids"))


@pytest.mark.parametrize("ask", [{"cell_id": "magic"}, {"cell_id": "unsaved"}, {"cell_ids": ["fail", "load"]}])
def test_the_light_parse_gives_the_context_the_nbformat_read_gives(tmp_path: Path, ask: dict[str, Any]) -> None:
    nbformat.write(varied_notebook(), str(tmp_path / "work.ipynb"))
    access = FileNotebookAccess(tmp_path)
    light = asyncio.run(notebook_context(access, "work.ipynb", **ask))
    assert light == asyncio.run(nodes_context(access, "work.ipynb", **ask))
    assert "NameError: name 'totl' is not defined" in light.text and "characters omitted" in light.text


def test_cells_without_ids_get_the_ids_the_edit_tools_use_and_other_versions_are_converted(tmp_path: Path) -> None:
    nb = json.loads(nbformat.writes(varied_notebook()))
    nb["nbformat_minor"] = 4
    for cell in nb["cells"]:
        cell.pop("id")
    nb["cells"][1]["id"] = "cell-1"  # a taken positional id: the first cell becomes cell-1x
    (tmp_path / "old.ipynb").write_text(json.dumps(nb))
    v3 = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(cells=[nbformat.v3.new_code_cell("x = 3")])])
    (tmp_path / "v3.ipynb").write_text(nbformat.writes(v3, version=3))
    access = FileNotebookAccess(tmp_path)
    digest = asyncio.run(access.digest("old.ipynb"))
    assert digest.ids == [c["id"] for c in asyncio.run(access.read("old.ipynb")).nb.cells]
    assert digest.ids[:2] == ["cell-1x", "cell-1"]
    converted = asyncio.run(notebook_context(access, "v3.ipynb"))
    assert "x = 3" in converted.text and converted.cells == 1


def test_a_file_that_is_not_a_notebook_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "bad.ipynb").write_text('{"cells": [')
    with pytest.raises(NotebookError, match="not a readable notebook") as failure:
        asyncio.run(notebook_context(FileNotebookAccess(tmp_path), "bad.ipynb"))
    assert failure.value.code == "not_a_notebook"


class NoReads(FileNotebookAccess):
    """A notebook root that fails any read once told to: shows a context came from the pre-warm."""

    reads_allowed = True

    async def digest(self, path: str) -> NotebookDigest:
        assert self.reads_allowed, "the context read the file again"
        return await super().digest(path)


def test_a_prewarmed_notebook_gives_its_first_context_without_reading_and_a_save_reads_again(tmp_path: Path) -> None:
    nbformat.write(varied_notebook(), str(tmp_path / "work.ipynb"))
    access = NoReads(tmp_path)

    async def scenario() -> None:
        await access.prewarm("work.ipynb")
        access.reads_allowed = False
        built = {key[2] for key in access.contexts._entries}
        assert built == {None, "magic"}  # the %%deerflow cell's context and an unsaved cell's, ready
        unsaved = await notebook_context(access, "work.ipynb", cell_id="new-cell")
        assert unsaved == await notebook_context(access, "work.ipynb") and unsaved.cells == 6
        first = await notebook_context(access, "work.ipynb", cell_id="magic")
        assert "### cell fail " in first.text and first.cells == 5
        attached = await notebook_context(access, "work.ipynb", cell_ids=["note"])  # other cells, same digest
        assert attached.cells == 1 and "# Notes" in attached.text
        nb = nbformat.read(str(tmp_path / "work.ipynb"), as_version=4)
        nb.cells[3].source = "print(total)  # saved since"
        nbformat.write(nb, str(tmp_path / "work.ipynb"))
        with pytest.raises(AssertionError, match="read the file again"):  # a new version is never served stale
            await notebook_context(access, "work.ipynb", cell_id="magic")
        access.reads_allowed = True
        assert "saved since" in (await notebook_context(access, "work.ipynb", cell_id="magic")).text

    asyncio.run(scenario())


def test_prewarm_skips_what_it_cannot_keep_and_never_raises(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    nbformat.write(varied_notebook(), str(tmp_path / "real" / "work.ipynb"))
    (tmp_path / "linked.ipynb").symlink_to(tmp_path / "real" / "work.ipynb")
    (tmp_path / "bad.ipynb").write_text("not json")
    access = FileNotebookAccess(tmp_path)

    async def scenario() -> None:
        for path in ("linked.ipynb", "bad.ipynb", "missing.ipynb", "../x.ipynb", ".hidden.ipynb"):
            await access.prewarm(path)
        assert access.digests._entries == {}
        await access.prewarm("real/work.ipynb")
        (digest,) = access.digests._entries.values()
        assert digest.complete and digest.ids[-1] == "magic"

    asyncio.run(scenario())


def test_the_server_prewarms_a_notebook_it_opens_or_saves(tmp_path: Path) -> None:
    nbformat.write(varied_notebook(), str(tmp_path / "work.ipynb"))
    manager = AsyncFileContentsManager(root_dir=str(tmp_path))
    access = ContentsNotebookAccess(manager)

    async def warmed(notebooks: NotebookAccess, count: int) -> None:
        async def wait() -> None:
            while len(notebooks.digests._entries) < count:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(wait(), DEADLINE)  # a hang guard, not a timing assertion

    async def scenario() -> None:
        assert access.watch()
        await manager.get("work.ipynb", content=True)  # JupyterLab opening it
        await warmed(access, 1)
        await manager.get("", content=True)  # a folder listing warms nothing
        model = await manager.get("work.ipynb", content=True)
        model["content"]["cells"][3]["source"] = "print(total)"
        await manager.save({"type": "notebook", "format": "json", "content": model["content"]}, "work.ipynb")
        await warmed(access, 2)  # the saved version too
        await access.warming("work.ipynb")
        found = await notebook_context(access, "work.ipynb", cell_id="magic")
        assert "print(total)" in found.text and "print(totl)" not in found.text

    asyncio.run(scenario())


def test_a_save_during_a_pre_warm_is_pre_warmed_after_it(tmp_path: Path) -> None:
    """The save event of version 2 arrives while version 1 is still being pre-warmed."""
    from deerflow.notebooks.cache import file_signature

    nbformat.write(varied_notebook(), str(tmp_path / "work.ipynb"))

    class Held(FileNotebookAccess):
        release = asyncio.Event()

        async def digest(self, path: str) -> NotebookDigest:
            read = await super().digest(path)
            await self.release.wait()  # version 1 read; held until version 2 is saved
            return read

    async def scenario() -> None:
        access = Held(tmp_path)
        Held.release = asyncio.Event()
        access.prewarm_soon("work.ipynb")
        while not access._warming or access.digests._entries:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # the first pre-warm is in digest(), holding version 1
        nb = nbformat.read(str(tmp_path / "work.ipynb"), as_version=4)
        nb.cells[3].source = "print(total)"
        nbformat.write(nb, str(tmp_path / "work.ipynb"))
        access.prewarm_soon("work.ipynb")  # the save event of version 2
        Held.release.set()
        second = file_signature(tmp_path, "work.ipynb")

        async def warm() -> None:
            while access.digests.get(("work.ipynb", second)) is None:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(warm(), DEADLINE)  # a hang guard, not a timing assertion

    asyncio.run(scenario())

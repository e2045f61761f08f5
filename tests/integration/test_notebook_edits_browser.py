"""JupyterLab in a real browser: the agent fixes cell 2 of the open notebook as a reviewed diff (issue #26).

Cell 2 raises NameError; a scripted model calls ``read_notebook`` and then ``edit_notebook``
to fix it.  The run view shows the diff with Apply / Discard.  Apply changes cell 2: with
jupyter-collaboration (the ``test`` extra installs it) the open notebook changes in place,
live, and its room saves the file; without it the write goes through the contents API and the
view says to reload, so the test reverts the notebook to the file, as File → Reload does.
Re-running cell 2 works; ``%deerflow undo`` restores it.  A second proposal is discarded and
the file keeps its cell.  Screenshots go to ``test-output/`` for the docs.
"""

from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path

import httpx
import nbformat
import pytest

from fixtures.browser import OUTPUT, notebook_in_lab, run_cell

pytestmark = pytest.mark.integration

SCRIPT = """
      turns:
        - tool_calls: [{name: read_notebook, args: {path: work.ipynb}}]
        - expect: print(totl)
          tool_calls:
            - {name: edit_notebook, args: {path: work.ipynb, operations: [{op: replace, cell_id: fail, source: print(total)}]}}
        - text: I proposed a fix for cell fail.
"""
CONFIG = "models:\n" + "".join(
    f"  - name: {name}\n    use: deerflow.models.scripted:ScriptedChatModel\n    script: |{SCRIPT}"
    for name in ("fixer", "fixer_again"))
CELLS = [("setup", "%load_ext deerflow_kernel"),
         ("load", "total = 41 + 1"),
         ("fail", "print(totl)"),
         ("ask", "%%deerflow --new --model fixer\nWhy does the cell above fail? Fix it."),
         ("undo", "%deerflow undo"),
         ("again", "%%deerflow --new --model fixer_again\nFix it again.")]
REVERT = "async () => { await window.jupyterapp.shell.currentWidget.context.revert(); }"
LIVE = importlib.util.find_spec("jupyter_server_ydoc") is not None  # jupyter-collaboration in this server
DEADLINE = 60


@pytest.fixture
def lab_workdir(tmp_path: Path) -> Path:
    work = tmp_path / "lab"
    work.mkdir()
    (work / "config.yaml").write_text(CONFIG)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, id=cell_id) for cell_id, source in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, work / "work.ipynb")
    return work


def saved_fail_cell(lab) -> str:
    content = httpx.get(f"{lab.url}api/contents/work.ipynb", headers={"Authorization": f"token {lab.token}"},
                        timeout=30).raise_for_status().json()["content"]
    return next(c["source"] for c in content["cells"] if c["id"] == "fail")


def wait_saved(lab, expected: str) -> None:
    """The file's cell 2 becomes ``expected`` (a live write is saved by the room a moment later)."""
    end = time.monotonic() + DEADLINE
    while saved_fail_cell(lab) != expected:
        assert time.monotonic() < end, f"work.ipynb never saved {expected!r}"
        time.sleep(0.2)


def show_the_file(page) -> None:
    """Without jupyter-collaboration the open notebook changes when reloaded (the view says so)."""
    if not LIVE:
        page.evaluate(REVERT)  # what File → Reload Notebook from Disk does


def test_apply_rerun_undo_and_discard_a_proposed_cell_fix(lab_workdir: Path, tmp_path: Path):
    with notebook_in_lab(lab_workdir, tmp_path, "work.ipynb", "notebook-edit-failure") as (lab, page):
        cells = page.locator(".jp-Notebook .jp-Cell")
        for index in range(3):
            run_cell(page, cells.nth(index))
        cells.nth(2).get_by_text("NameError").first.wait_for()

        ask = cells.nth(3)
        run_cell(page, ask)
        ask.locator("b", has_text="Proposed edit to work.ipynb").wait_for()  # the card (a live read shows it too)
        diff = ask.locator(".widget-html pre", has_text="+print(total)")  # the card's per-cell diff
        diff.wait_for()
        assert "-print(totl)" in diff.inner_text()
        page.screenshot(path=str(OUTPUT / "notebook-edit-proposal.png"), full_page=True)
        assert saved_fail_cell(lab) == "print(totl)"  # a proposal changes nothing by itself

        ask.locator("button", has_text="Apply").click()
        ask.get_by_text(re.compile(r"applied \(")).wait_for()
        if LIVE:
            ask.get_by_text("applied to the open notebook live").wait_for()
        wait_saved(lab, "print(total)")
        show_the_file(page)
        cells.nth(2).locator(".jp-InputArea").get_by_text("print(total)").wait_for()
        run_cell(page, cells.nth(2))
        cells.nth(2).locator(".jp-OutputArea").get_by_text("42").wait_for()  # re-running works
        page.screenshot(path=str(OUTPUT / "notebook-edit-applied.png"), full_page=True)

        run_cell(page, cells.nth(4))
        cells.nth(4).get_by_text("restored 1 cell(s) of work.ipynb").wait_for()
        wait_saved(lab, "print(totl)")
        show_the_file(page)
        cells.nth(2).locator(".jp-InputArea").get_by_text("print(totl)").wait_for()

        again = cells.nth(5)
        run_cell(page, again)
        again.locator("b", has_text="Proposed edit to work.ipynb").wait_for()  # the card (a live read shows it too)
        again.locator("button", has_text="Discard").click()
        again.get_by_text("discarded").wait_for()
        page.screenshot(path=str(OUTPUT / "notebook-edit-discarded.png"), full_page=True)
        assert saved_fail_cell(lab) == "print(totl)"



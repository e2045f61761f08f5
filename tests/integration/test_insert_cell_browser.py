"""JupyterLab in a real browser: "insert as a new cell below" hands the agent's code to the user (issue #22).

The scripted agent runs two python cells and then works on (a slow tool), so its
live view shows the calls with their highlighted code, **copy** and **insert as a
new cell below**; inserted one after the other, they land in the agent's order.  The button writes the cell below the ``%%deerflow`` cell
through the notebook edit mechanism (issue #26, the server's ContentsManager);
with jupyter-collaboration (the ``test`` extra installs it) the open notebook shows
the cells live; without it, on File → Reload Notebook from Disk, as the view says.  The inserted cell then runs in the
user's kernel.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

from fixtures.browser import OUTPUT, notebook_in_lab, run_cell, wait_for_notebook_kernel

pytestmark = pytest.mark.integration
LIVE = importlib.util.find_spec("jupyter_server_ydoc") is not None  # jupyter-collaboration in this server

CONFIG = """\
models:
  - name: coder
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: Computing it in Python.
          tool_calls:
            - name: python
              args:
                code: |
                  answer = 6 * 7
                  print('the answer is', answer)
            - name: python
              args:
                code: |
                  print('twice', answer * 2)
        - tool_calls: [{name: wait, args: {seconds: 120}}]
        - text: unreachable
tools:
  - {name: wait, group: test, use: "fixtures.slow_tools:wait"}
"""
DEADLINE_MS = 60_000  # hang guards, not timing assertions


@pytest.fixture
def lab_workdir(tmp_path: Path) -> Path:
    work = tmp_path / "lab"
    work.mkdir()
    (work / "config.yaml").write_text(CONFIG)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext deerflow_kernel"),
                nbformat.v4.new_code_cell("%%deerflow --new --model coder\nCompute the answer."),
                nbformat.v4.new_code_cell("print('below')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, work / "insert.ipynb")
    return work


def test_insert_as_cell_creates_a_cell_with_the_agents_code_that_runs(lab_workdir: Path, tmp_path: Path):
    with notebook_in_lab(lab_workdir, tmp_path, "insert.ipynb", "notebook-insert-cell-failure",
                         timeout_ms=DEADLINE_MS) as (_, page):
        cells = page.locator(".jp-Notebook .jp-Cell")
        run_cell(page, cells.nth(0), wait_for_count=False)
        cells.nth(0).locator(".jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).wait_for()

        magic = cells.nth(1)
        run_cell(page, magic, wait_for_count=False)
        magic.locator("button", has_text="Stop").wait_for(state="visible")
        title = magic.get_by_text(re.compile(r"✓ python: the answer is 42"))
        title.wait_for()
        second = magic.get_by_text(re.compile(r"✓ python: twice 84"))
        second.wait_for()
        # Insert the agent's cells one after the other: the second must land below the first, not above it.
        title.click()  # open the call: its code, copy, insert
        block = magic.locator(".deerflow-code-block", has_text="answer = 6 * 7")
        block.locator(".deerflow-copy").wait_for(state="visible")
        block.locator("button.deerflow-insert").click()  # the kernel is busy: the browser posts it
        block.locator(".deerflow-insert-status", has_text="inserted below the %%deerflow cell of insert.ipynb"
                      ).wait_for()
        second.click()
        block = magic.locator(".deerflow-code-block", has_text="answer * 2")
        block.locator("button.deerflow-insert").click()
        block.locator(".deerflow-insert-status", has_text="inserted below the %%deerflow cell").wait_for()
        magic.get_by_text(re.compile("running in the background|· \\d+ s")).first.wait_for()
        page.screenshot(path=str(OUTPUT / "notebook-insert-cell-clicked.png"), full_page=True)

        # The cell runs in the foreground (the kernel is busy, so widget clicks wait): Kernel → Interrupt.
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:interrupt-kernel'); }")
        magic.get_by_text("cancelled").first.wait_for()
        if not LIVE:  # live, the inserted cells are already in the open notebook
            page.evaluate("() => { window.jupyterapp.commands.execute('docmanager:reload'); }")  # not awaited
            dialog = page.locator(".jp-Dialog")
            dialog.locator("button.jp-mod-accept").click()  # "reload": the view told the user to
            dialog.wait_for(state="hidden")
        inserted = cells.nth(2)
        # waits, not reads: after the reload JupyterLab renders the cells one by one (a read of cell 3
        # as soon as cell 2 shows its code found it not rendered yet once, in a loaded CI)
        inserted.get_by_text("answer = 6 * 7").wait_for()
        cells.nth(3).get_by_text("answer * 2").wait_for()  # the agent's order, not the clicks'
        cells.nth(4).get_by_text("print('below')").wait_for()

        wait_for_notebook_kernel(page)
        run_cell(page, inserted, wait_for_count=False)
        inserted.locator(".jp-OutputArea-output", has_text="the answer is 42").wait_for()
        page.screenshot(path=str(OUTPUT / "notebook-insert-cell-ran.png"), full_page=True)



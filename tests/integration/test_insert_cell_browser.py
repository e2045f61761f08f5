"""JupyterLab in a real browser: "insert as a new cell below" hands the agent's code to the user (issue #22).

The scripted agent runs one python cell and then works on (a slow tool), so its
live view shows the call with its highlighted code, **copy** and **insert as a
new cell below**.  The button writes the cell below the ``%%deerflow`` cell
through the notebook edit mechanism (issue #26, the server's ContentsManager);
without jupyter-collaboration the open notebook picks it up on File → Reload
Notebook from Disk, as the view says.  The inserted cell then runs in the
user's kernel.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from fixtures.browser import (
    LAB_ARGS,
    OUTPUT,
    browser_page,
    quiet_lab_env,
    save_failure,
    wait_for_notebook_kernel,
)
from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration

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
    OUTPUT.mkdir(parents=True, exist_ok=True)
    env = {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": str(lab_workdir / "config.yaml"),
           "OPENAI_API_KEY": "", **quiet_lab_env(tmp_path)}
    with running_jupyter(lab_workdir, app="lab", env=env, args=LAB_ARGS, timeout=120) as lab, \
            browser_page() as page:
        try:
            page.set_default_timeout(DEADLINE_MS)
            page.goto(f"{lab.url}lab/tree/insert.ipynb?token={lab.token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", state="visible")
            cells = page.locator(".jp-Notebook .jp-Cell")
            _run_cell(page, cells.nth(0))
            cells.nth(0).locator(".jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).wait_for()

            magic = cells.nth(1)
            _run_cell(page, magic)
            magic.locator("button", has_text="Stop").wait_for(state="visible")
            title = magic.get_by_text(re.compile(r"✓ python: the answer is 42"))
            title.wait_for()
            title.click()  # open the call: its code, copy, insert
            magic.locator(".deerflow-copy").wait_for(state="visible")
            assert "answer = 6 * 7" in magic.locator(".deerflow-code").first.inner_text()
            magic.locator("button.deerflow-insert").first.click()  # the kernel is busy: the browser posts it
            magic.locator(".deerflow-insert-status", has_text="inserted below the %%deerflow cell of insert.ipynb"
                          ).first.wait_for()
            magic.get_by_text(re.compile("running in the background|· \\d+ s")).first.wait_for()
            page.screenshot(path=str(OUTPUT / "notebook-insert-cell-clicked.png"), full_page=True)

            # The cell runs in the foreground (the kernel is busy, so widget clicks wait): Kernel → Interrupt.
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:interrupt-kernel'); }")
            magic.get_by_text("cancelled").first.wait_for()
            page.evaluate("() => { window.jupyterapp.commands.execute('docmanager:reload'); }")  # not awaited (waits on its dialog)
            dialog = page.locator(".jp-Dialog")
            dialog.locator("button.jp-mod-accept").click()  # "reload": the view told the user to
            dialog.wait_for(state="hidden")
            inserted = cells.nth(2)
            inserted.get_by_text("answer = 6 * 7").wait_for()
            assert "print('below')" in cells.nth(3).inner_text()

            wait_for_notebook_kernel(page)
            _run_cell(page, inserted)
            inserted.locator(".jp-OutputArea-output", has_text="the answer is 42").wait_for()
            page.screenshot(path=str(OUTPUT / "notebook-insert-cell-ran.png"), full_page=True)
        except Exception:
            save_failure(page, lab.log, "notebook-insert-cell-failure")
            raise


def _run_cell(page, cell) -> None:
    wait_for_notebook_kernel(page)  # the keys go to the notebook, not to a dialog, and run now
    cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")  # command mode, whatever the click did
    page.keyboard.press("Control+Enter")

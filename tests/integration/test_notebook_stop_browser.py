"""JupyterLab in a real browser: a run continued from its form can always be stopped (issue #22).

A scripted model asks a question, and the answer's run waits in a slow tool.
Submitting the form starts that run in the background (the kernel is idle);
the view's Stop button cancels it, and so does Kernel → Interrupt.  A run
that holds its cell (the kernel busy) is stopped by the same button, which
posts the cancel from the browser rather than through the kernel.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from fixtures.browser import OUTPUT, notebook_in_lab, run_cell

pytestmark = pytest.mark.integration

CONFIG = """\
models:
  - name: asks
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls: [{name: ask_clarification, args: {question: "Which year should I use?"}}]
        - tool_calls: [{name: wait, args: {seconds: 120}}]
        - text: unreachable
  - name: slow
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls: [{name: wait, args: {seconds: 120}}]
        - text: unreachable
tools:
  - {name: wait, group: test, use: "fixtures.slow_tools:wait"}
"""
CANCEL_DEADLINE_MS = 30_000  # a hang guard, not a timing assertion


@pytest.fixture
def lab_workdir(tmp_path: Path) -> Path:
    work = tmp_path / "lab"
    work.mkdir()
    (work / "config.yaml").write_text(CONFIG)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext deerflow_kernel"),
                nbformat.v4.new_code_cell("%%deerflow --new --model asks\nSummarise the counts."),
                nbformat.v4.new_code_cell("%%deerflow --new --model asks\nSummarise them again."),
                nbformat.v4.new_code_cell("%%deerflow --new --model slow\nCount the rows."),
                nbformat.v4.new_code_cell("%%deerflow --new --model slow\nCount them again.")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, work / "stop.ipynb")
    return work


def test_stop_and_kernel_interrupt_cancel_a_run_continued_from_a_form_or_holding_its_cell(lab_workdir: Path, tmp_path: Path):
    with notebook_in_lab(lab_workdir, tmp_path, "stop.ipynb", "notebook-stop-failure") as (_, page):
        cells = page.locator(".jp-Notebook .jp-Cell")
        run_cell(page, cells.nth(0), wait_for_count=True)

        first = cells.nth(1)
        _answer_and_wait_for_stop(page, first)
        page.screenshot(path=str(OUTPUT / "notebook-stop-running.png"), full_page=True)
        first.locator("button", has_text="Stop").click()
        first.get_by_text("cancelled").first.wait_for(timeout=CANCEL_DEADLINE_MS)
        first.get_by_text(re.compile(r"^<RunResult cancelled")).wait_for()  # the cell's result followed the run
        page.screenshot(path=str(OUTPUT / "notebook-stop-cancelled.png"), full_page=True)

        second = cells.nth(2)
        _answer_and_wait_for_stop(page, second)
        page.get_by_role("menuitem", name="Kernel", exact=True).click()
        page.get_by_role("menuitem", name=re.compile(r"^Interrupt Kernel")).click()
        second.get_by_text("cancelled").first.wait_for(timeout=CANCEL_DEADLINE_MS)
        page.screenshot(path=str(OUTPUT / "notebook-interrupt-cancelled.png"), full_page=True)

        held = cells.nth(3)  # a run that holds the cell (the kernel is busy): Stop posts from the browser
        run_cell(page, held, wait_for_count=False)
        held.get_by_text("wait").first.wait_for()
        held.locator("button.deerflow-stop").click()
        held.get_by_text("cancelled").first.wait_for(timeout=CANCEL_DEADLINE_MS)
        held.get_by_text(re.compile(r"^<RunResult cancelled")).wait_for()  # the cell ended with the run
        page.screenshot(path=str(OUTPUT / "notebook-stop-held-cell.png"), full_page=True)

        interrupted = cells.nth(4)  # Kernel → Interrupt still cancels a run that holds its cell
        run_cell(page, interrupted, wait_for_count=False)
        interrupted.get_by_text("wait").first.wait_for()
        interrupted.locator("button.deerflow-stop").wait_for(state="visible")
        page.get_by_role("menuitem", name="Kernel", exact=True).click()
        page.get_by_role("menuitem", name=re.compile(r"^Interrupt Kernel")).click()
        interrupted.get_by_text("cancelled").first.wait_for(timeout=CANCEL_DEADLINE_MS)
        interrupted.get_by_text(re.compile(r"^<RunResult cancelled")).wait_for()


def _answer_and_wait_for_stop(page, cell) -> None:
    """Run the cell, answer its form, and wait until its continued run shows Stop."""
    run_cell(page, cell, wait_for_count=True)  # the run ends with the question: the cell completes
    cell.get_by_text("Which year should I use?").first.wait_for()
    cell.locator("textarea").fill("2024")
    cell.locator("button", has_text="Submit").click()
    cell.get_by_text("wait").first.wait_for()
    cell.locator("button", has_text="Stop").wait_for(state="visible")

"""JupyterLab in a real browser: the quickstart's %%deerflow cell streams, asks with a form card,
and the submitted form continues the run until the chart artifact renders."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from fixtures.browser import (
    LAB_ARGS,
    OUTPUT,
    browser_page,
    docs_screenshot,
    quiet_lab_env,
    save_failure,
    wait_for_notebook_kernel,
)
from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.fixture
def lab_workdir(tmp_path: Path) -> Path:
    work = tmp_path / "lab"
    work.mkdir()
    shutil.copy(NOTEBOOKS / "01_research_quickstart.ipynb", work)
    shutil.copy(NOTEBOOKS / "offline-config.yaml", work)
    shutil.copytree(NOTEBOOKS / "scripts", work / "scripts")
    return work


def test_quickstart_form_card_in_jupyterlab(lab_workdir: Path, tmp_path: Path):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    env = {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": str(lab_workdir / "offline-config.yaml"),
           "OPENAI_API_KEY": "", **quiet_lab_env(tmp_path)}
    with running_jupyter(lab_workdir, app="lab", env=env, args=LAB_ARGS, timeout=120) as lab, \
            browser_page() as page:
        try:
            _drive_quickstart(page, lab)
        except Exception:
            save_failure(page, lab.log, "lab-failure")
            raise


def _drive_quickstart(page, lab) -> None:
    page.set_default_timeout(60_000)
    page.goto(f"{lab.url}lab/tree/01_research_quickstart.ipynb?token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", state="visible")
    # Run the setup cell, the question cell and the %%deerflow cell, one at a time: each is selected
    # by a click on its prompt and run with Ctrl+Enter; the next starts once the kernel has counted it.
    cells = page.locator(".jp-Notebook .jp-Cell")
    for index in (1, 3):
        _run_cell(page, cells.nth(index), wait_for_count=True)
    deerflow_cell = cells.nth(4)
    _run_cell(page, deerflow_cell, wait_for_count=False)
    deerflow_cell.get_by_text("Before I start, a few questions").wait_for()
    submit = deerflow_cell.locator("button", has_text="Submit")
    submit.wait_for()
    page.screenshot(path=str(OUTPUT / "lab-form-card.png"), full_page=True)
    docs_screenshot(deerflow_cell, "notebook-form-card")
    # Fill the form card: a required text field and a required select.
    deerflow_cell.locator("input[placeholder='e.g. Upper Midwest, USA']").fill("Upper Midwest, USA")
    deerflow_cell.locator("select").first.select_option(label="Survival and mortality")
    submit.click()
    # The continuation streams into the same view and ends with the chart artifact rendered.
    chart = deerflow_cell.locator("img").first
    chart.wait_for(timeout=120_000)
    assert chart.evaluate("img => img.naturalWidth") > 100
    deerflow_cell.get_by_text("report.md").first.wait_for()
    page.screenshot(path=str(OUTPUT / "lab-after-submit.png"), full_page=True)


def _run_cell(page, cell, *, wait_for_count: bool) -> None:
    wait_for_notebook_kernel(page)  # the keys go to the notebook, not to a dialog, and run now
    cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")  # command mode, whatever the click did
    page.keyboard.press("Control+Enter")
    if wait_for_count:
        cell.locator(".jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).wait_for()

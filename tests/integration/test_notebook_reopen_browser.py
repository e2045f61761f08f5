"""A notebook reopened after its kernel is gone shows the finished runs (issue #22).

The quickstart is executed headless (nbclient), saved without widget state —
what is left once the kernel that held the widgets has shut down — and opened
in JupyterLab in a real browser: the runs show their transcript, the answered
form, the chart and the receipt, and no "model not found" placeholder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from fixtures.browser import (
    LAB_ARGS,
    OUTPUT,
    browser_page,
    quiet_lab_env,
    save_failure,
    wait_for_lab,
)
from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAME = "01_research_quickstart.ipynb"


@pytest.fixture
def executed_quickstart(tmp_path: Path, deerflow_home: Path, monkeypatch) -> Path:
    for name in ("DEERFLOW_SERVER_URL", "DEERFLOW_SERVER_TOKEN", "DEERFLOW_EVENT_LOG"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "lab"
    work.mkdir()
    shutil.copy(NOTEBOOKS / "offline-config.yaml", work)
    shutil.copytree(NOTEBOOKS / "scripts", work / "scripts")
    nb = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
    nb.metadata.pop("widgets", None)  # the kernel, and the widget models with it, are gone
    nbformat.write(nb, work / NAME)
    return work


def test_a_reopened_notebook_shows_its_finished_runs_without_a_kernel(executed_quickstart: Path, tmp_path: Path):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    env = {"DEERFLOW_HOME": str(tmp_path / "lab-home"), "OPENAI_API_KEY": "", **quiet_lab_env(tmp_path)}
    with running_jupyter(executed_quickstart, app="lab", env=env, args=LAB_ARGS, timeout=120) as lab, \
            browser_page() as page:
        try:
            page.set_default_timeout(60_000)
            page.goto(f"{lab.url}lab/tree/{NAME}?token={lab.token}")
            wait_for_lab(page)
            cells = page.locator(".jp-Notebook .jp-Cell")
            asked, answered = cells.nth(4), cells.nth(6)
            asked.get_by_text("✓ Answered").first.wait_for()
            assert "Upper Midwest, USA" in asked.inner_text()
            asked.screenshot(path=str(OUTPUT / "notebook-reopened-answered-form.png"))
            answered.scroll_into_view_if_needed()
            chart = answered.locator(".deerflow-artifact img").first
            chart.wait_for()
            chart.scroll_into_view_if_needed()
            page.wait_for_function("img => img.complete && img.naturalWidth > 100", arg=chart.element_handle())
            text = answered.inner_text()
            assert "Delivery: delivered" in text and "report.md" in text and "✓ python" in text
            assert "model not found" not in page.locator(".jp-Notebook").inner_text()
            page.screenshot(path=str(OUTPUT / "notebook-reopened.png"), full_page=True)
        except Exception:
            save_failure(page, lab.log, "notebook-reopen-failure")
            raise

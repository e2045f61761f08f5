"""notebooks/05_browser_research.ipynb runs headless and shows what it promises."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from fixtures.notebook_text import outputs, texts
from fixtures.web_browser import need_chromium

pytestmark = pytest.mark.integration

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_browser_research_notebook(deerflow_home, monkeypatch) -> None:
    need_chromium()
    for name in ("DEERFLOW_SERVER_URL", "DEERFLOW_SERVER_TOKEN", "DEERFLOW_EVENT_LOG"):
        monkeypatch.delenv(name, raising=False)
    nb = nbformat.read(NOTEBOOKS / "05_browser_research.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    shown_outputs = outputs(nb)
    assert [o for o in shown_outputs if o.output_type == "error"] == []
    shown = texts(nb)

    assert "3 artifacts: plans.png, availability.png, summary.md" in shown
    assert "**The Starter plan.**" in shown and "## Sources" in shown
    assert "/plans.html (screenshot: screenshots/plans.png)" in shown
    assert "`browser_type`" in shown and "`browser_click`" in shown  # the run's view lists the actions
    assert sum("image/png" in o.get("data", {}) for o in shown_outputs) == 2  # both screenshots, loaded and shown
    frames = int(shown.split("The live view received ")[1].split(" frames")[0])
    assert frames >= 2  # the first page, then the page the agent opened while watched
    assert "error - Error: refused http://169.254.169.254/latest/meta-data/: cloud metadata address" in shown

    outputs_dir = next(deerflow_home.glob("users/*/threads/*/user-data/outputs"))
    assert sorted(p.relative_to(outputs_dir).as_posix() for p in outputs_dir.rglob("*") if p.is_file()) == [
        "screenshots/availability.png", "screenshots/plans.png", "summary.md"]
    assert (outputs_dir / "screenshots" / "plans.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

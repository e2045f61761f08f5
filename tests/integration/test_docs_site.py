"""The documentation site (``make docs``) builds with warnings as errors and shows the executed notebooks.

One build per module, into a temporary folder, exactly as ``make docs`` runs it (``sphinx-build -W
--keep-going``): docs/conf.py executes every example notebook offline while it builds, so a notebook that
fails, or a page whose reference no longer resolves, fails here. The pages are then read as HTML (each
notebook's outputs: the chart PNG, the report's text, the form card's fields) and the quickstart page is
opened in headless Chromium from a local file server, the way a reader opens the published site.
"""

from __future__ import annotations

import functools
import html
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.browser import browser_page

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BUILD_SECONDS = 900  # a hang guard: the build executes eight notebooks (about 2-4 minutes on 2 cores)
DOC_PACKAGES = ("sphinx", "myst_nb", "pydata_sphinx_theme")

# What each executed notebook must show on its page (the same outputs tests/integration/test_notebooks.py
# checks in the executed notebooks themselves).
SHOWN = {
    "01_research_quickstart": ["3 artifacts: report.md, evidence.csv, winter_severity.png",
                               "How do deer populations respond to severe winters?", "Deep snow"],
    "02_data_analysis": ["The agent's totals match pandas: True", "grows fastest"],
    "03_skills": ["installed meeting-notes (custom, enabled)", "bad copy blocked: True"],
    "04_mcp": ["time_get_current_time (success):", "MCP cache reset"],
    "05_browser_research": ["3 artifacts: plans.png, availability.png, summary.md", "cloud metadata address"],
    "06_subagents": ["UNMET"],
    "07_agents_and_schedules": ["Saved custom agent 'digest'", "success | delivery: delivered"],
    "08_notebook_agent": ["applied proposal", "restored 1 cell(s) of sales_report.ipynb"],
    "09_memory": ["memory: +2 facts", "From your notes: you study white-tailed deer in Minnesota",
                  "attacker's line remembered: False"],
}
FORM_FIELDS = {"Region": "Upper Midwest, USA", "Focus": "Survival and mortality", "Depth": "One-page brief"}


def _missing_packages() -> list[str]:
    return [name for name in DOC_PACKAGES if importlib.util.find_spec(name) is None]


@pytest.fixture(scope="module")
def site(tmp_path_factory, executed_notebooks_dir) -> Path:
    """The site built from this checkout into a fresh folder; the build's output is shown if it fails.

    When test_notebooks.py has already executed and checked every example notebook in this session
    (tests/conftest.py orders this module last), the build renders those; otherwise it executes them.
    """
    if missing := _missing_packages():
        pytest.skip(f"the docs extra is not installed (no {', '.join(missing)}): pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("docs") / "html"
    env = dict(os.environ)
    names = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    if names <= {p.name for p in executed_notebooks_dir.glob("*.ipynb")}:
        env.update(DEERFLOW_DOCS_NOTEBOOKS=str(executed_notebooks_dir), DEERFLOW_DOCS_EXECUTE="off")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-j", "auto", "-b", "html", "-d", str(out / ".doctrees"),
         str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, timeout=BUILD_SECONDS, cwd=ROOT, env=env)
    problems = "\n".join(line for line in proc.stderr.splitlines() if "IPKernelApp" not in line)
    assert proc.returncode == 0, f"make docs fails:\n{problems[-6000:]}"
    return out


def page_text(site: Path, name: str) -> str:
    """The text a reader sees on a page (scripts, such as the embedded widget state, left out)."""
    raw = (site / f"{name}.html").read_text(encoding="utf-8")
    raw = re.sub(r"<script.*?</script>", "", raw, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def test_every_example_notebook_is_a_page_with_its_outputs(site: Path) -> None:
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks == sorted(SHOWN), "a new notebook: say here what its page must show"
    for name in notebooks:
        shown = page_text(site, f"examples/{name}")
        if name == "05_browser_research" and not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
            continue  # conf.py renders it unexecuted on a machine without Chromium
        missing = [text for text in SHOWN[name] if text not in shown]
        assert not missing, f"examples/{name}.html does not show {missing}"
        assert "Traceback" not in shown, f"examples/{name}.html shows an error"


def test_the_quickstart_page_has_the_chart_the_report_and_the_form_card(site: Path) -> None:
    raw = (site / "examples" / "01_research_quickstart.html").read_text(encoding="utf-8")
    images = [site / "examples" / src for src in re.findall(r'<img[^>]+src="(\.\./_images/[^"]+\.png)"', raw)]
    assert images and all(p.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") for p in images)  # the chart
    assert "data:image/png;base64," in raw  # the chart inline in the run's settled view
    assert "application/vnd.jupyter.widget-state+json" in raw  # the widget state, embedded
    form = raw[raw.index("class='deerflow-form'"):]
    for label, value in FORM_FIELDS.items():
        assert f"<b>{label}:</b> {value}" in form[:2000]


def test_generated_reference_pages_cover_the_code(site: Path) -> None:
    from deerflow_jupyter.handlers import ROUTES

    routes = page_text(site, "http-api")
    for pattern, _handler in ROUTES:
        assert re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern) in routes
    config = page_text(site, "configuration")
    assert "sandbox.network" in config and "storage.run_lease_seconds" in config
    assert "daily token budget spent" in page_text(site, "troubleshooting")
    assert "DeerFlowClient" in page_text(site, "api") and "RunResult" in page_text(site, "api")


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1, as a reader's browser gets it."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_the_quickstart_page_shows_the_form_card_in_a_browser(served: str) -> None:
    with browser_page() as page:
        # offline, like the build: the widget manager's CDN scripts are refused at once, the page must not need them
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(served)
                   else route.abort())
        page.set_default_timeout(60_000)
        page.goto(f"{served}/examples/01_research_quickstart.html")
        form = page.locator(".deerflow-form").first
        form.wait_for(state="visible")
        text = form.inner_text()
        for label, value in FORM_FIELDS.items():
            assert f"{label}: {value}" in text
        assert "How should I scope this research?" in text
        chart = page.locator("img[src$='.png']").first
        chart.scroll_into_view_if_needed()
        page.wait_for_function("img => img.complete && img.naturalWidth > 100", arg=chart.element_handle())

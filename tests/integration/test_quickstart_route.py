"""The quickstart template one click away (issue #22 "Discoverable"; the Launcher card: test_labext_browser.py).

A real jupyter server with DeerFlow: ``GET {base}deerflow/api/quickstart`` copies the research
quickstart (with its offline config and scripts) into the Jupyter root through the server's
ContentsManager and redirects to it in JupyterLab; a second visit keeps the user's edited copy.
"""

from __future__ import annotations

import httpx
import nbformat
import pytest

from fixtures.jupyter_process import served_config

pytestmark = pytest.mark.integration


def test_the_quickstart_is_copied_into_the_root_and_opened_and_an_edited_copy_is_kept(tmp_path):
    with served_config(tmp_path, "models: []\n") as (server, http):
        opened = http.get("deerflow/api/quickstart", follow_redirects=False)
        assert opened.status_code == 302, opened.text
        assert opened.headers["location"].endswith("/lab/tree/deerflow-quickstart/01_research_quickstart.ipynb")
        copy = tmp_path / "deerflow-quickstart"
        nb = nbformat.read(copy / "01_research_quickstart.ipynb", as_version=4)
        assert any("%%deerflow" in c.source for c in nb.cells)
        assert (copy / "offline-config.yaml").is_file() and (copy / "scripts" / "01_research_quickstart.yaml").is_file()

        nb.cells[0].source = "# my notes"
        nbformat.write(nb, copy / "01_research_quickstart.ipynb")
        assert http.get("deerflow/api/quickstart", follow_redirects=False).status_code == 302
        assert nbformat.read(copy / "01_research_quickstart.ipynb", as_version=4).cells[0].source == "# my notes"
        refused = httpx.get(f"{server.url}deerflow/api/quickstart", follow_redirects=False, timeout=60)  # no token
        assert refused.status_code in (302, 403) and "deerflow-quickstart" not in refused.headers.get("location", "")

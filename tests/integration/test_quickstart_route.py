"""The quickstart template one click away (issue #22 "Discoverable"; the Launcher card: test_labext_browser.py).

A real jupyter server with DeerFlow: ``POST {base}deerflow/api/quickstart`` copies the research
quickstart (with its offline config and scripts) into the Jupyter root and redirects to it in
JupyterLab; a second POST keeps the user's edited copy.  A ``GET`` changes nothing (it answers a
page whose button POSTs).  The root may hold thread folders, so what lies there is attacker-
controlled: links and FIFOs planted on the way are never followed.
"""

from __future__ import annotations

import html
import os
import re
import shutil
from pathlib import Path

import httpx
import nbformat
import pytest

from fixtures.jupyter_process import served_config

pytestmark = pytest.mark.integration
ROUTE = "deerflow/api/quickstart"
NOTEBOOK = "01_research_quickstart.ipynb"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the module (each test starts from a root without the quickstart)."""
    root = tmp_path_factory.mktemp("root")
    with served_config(root, "models: []\n") as (server, http):
        yield root, server, http


@pytest.fixture
def fresh(served):
    root, server, http = served
    folder = root / "deerflow-quickstart"
    if folder.is_symlink():
        folder.unlink()
    shutil.rmtree(folder, ignore_errors=True)
    return root, server, http


def test_the_quickstart_is_copied_into_the_root_and_opened_and_an_edited_copy_is_kept(fresh):
    root, server, http = fresh
    copy = root / "deerflow-quickstart"
    page = http.get(ROUTE, follow_redirects=False)
    assert page.status_code == 200 and 'method="post"' in page.text and 'name="_xsrf"' in page.text
    assert page.headers["content-type"].startswith("text/html")
    assert not copy.exists()  # a GET changes nothing

    # the page's button, as a browser sends it: the login cookie and the form's _xsrf field
    with httpx.Client(base_url=server.url, timeout=60) as browser:
        page = browser.get(f"{ROUTE}?token={server.token}")
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
        assert page.status_code == 200 and xsrf, page.text
        opened = browser.post(ROUTE, data={"_xsrf": html.unescape(xsrf.group(1))}, follow_redirects=False)
    assert opened.status_code == 303, opened.text
    assert opened.headers["location"].endswith(f"/lab/tree/deerflow-quickstart/{NOTEBOOK}")
    nb = nbformat.read(copy / NOTEBOOK, as_version=4)
    assert any("%%deerflow" in c.source for c in nb.cells)
    assert (copy / "offline-config.yaml").is_file() and (copy / "scripts" / NOTEBOOK.replace("ipynb", "yaml")).is_file()

    nb.cells[0].source = "# my notes"
    nbformat.write(nb, copy / NOTEBOOK)
    answer = http.post(ROUTE, headers={"Accept": "application/json"})
    assert answer.status_code == 200 and answer.json() == {"path": f"deerflow-quickstart/{NOTEBOOK}"}
    assert nbformat.read(copy / NOTEBOOK, as_version=4).cells[0].source == "# my notes"
    refused = httpx.post(f"{server.url}{ROUTE}", follow_redirects=False, timeout=60)  # no token
    assert refused.status_code in (302, 403) and "deerflow-quickstart" not in refused.headers.get("location", "")


def test_links_and_fifos_planted_in_the_root_are_not_followed(fresh, tmp_path: Path):
    work, _server, http = fresh
    host = tmp_path / "host"
    host.mkdir()
    secret = host / "secret.txt"
    secret.write_text("host file")
    folder = work / "deerflow-quickstart"
    folder.symlink_to(host, target_is_directory=True)  # the whole folder is a link to the host
    refused = http.post(ROUTE, headers={"Accept": "application/json"})
    assert refused.status_code == 409, refused.text
    assert "symbolic link" in refused.json()["detail"] and str(work) not in refused.text
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]

    folder.unlink()
    folder.mkdir()
    (folder / "scripts").symlink_to(host, target_is_directory=True)  # a subfolder is a link
    assert http.post(ROUTE, headers={"Accept": "application/json"}).status_code == 409
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]

    (folder / "scripts").unlink()
    for name in (NOTEBOOK, "offline-config.yaml"):  # copied before the link stopped the copy
        (folder / name).unlink()
    (folder / NOTEBOOK).symlink_to(secret)  # a file name is a link to a host file
    os.mkfifo(folder / "offline-config.yaml")  # and one is a FIFO: an open for writing would block
    answer = http.post(ROUTE, headers={"Accept": "application/json"})
    assert answer.status_code == 200, answer.text
    assert secret.read_text() == "host file"  # kept as it was, not written through
    assert (folder / NOTEBOOK).is_symlink() and (folder / "scripts" / "01_research_quickstart.yaml").is_file()

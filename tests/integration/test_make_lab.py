"""`make lab`, the README's way into JupyterLab: DeerFlow on the offline config, the example notebooks open."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fixtures.browser import browser_page
from fixtures.jupyter_process import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_make_lab_serves_the_quickstart_with_the_deerflow_extension(tmp_path: Path):
    venv = Path(sys.prefix)
    stamp = subprocess.run(["make", "-q", "-C", str(ROOT), f"VENV={venv}", f"{venv}/.installed-stamp"],
                           capture_output=True, check=False)
    if stamp.returncode != 0:
        pytest.skip(f"{venv} is not an up-to-date venv made by make: make lab would install into it first")
    port, token = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in ("DEERFLOW_CONFIG", "DEERFLOW_SERVER_URL")}
    env |= {"DEERFLOW_HOME": str(tmp_path / "home"), "HOME": str(tmp_path), "JUPYTER_PLATFORM_DIRS": "1"}
    args = f"--no-browser --port={port} --ip=127.0.0.1 --IdentityProvider.token={token}"
    log = tmp_path / "make-lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["make", "-s", "-C", str(ROOT), "lab", f"VENV={venv}", f"LAB_ARGS={args}"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"token {token}"}
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"make lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{base}/api/status", headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"make lab did not start:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        notebook = httpx.get(f"{base}/api/contents/01_research_quickstart.ipynb", headers=headers, timeout=30)
        assert notebook.status_code == 200  # served from notebooks/
        assistants = httpx.post(f"{base}/deerflow/api/assistants/search", json={}, headers=headers, timeout=30)
        assert assistants.status_code == 200 and assistants.json()  # the extension is enabled
        assert "using the offline example config" in log.read_text()
        with browser_page() as page:  # the lab opens on the example notebooks
            page.goto(f"{base}/?token={token}")
            tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab")
            tabs.filter(has_text="02_data_analysis.ipynb").wait_for(timeout=60_000)
            assert tabs.filter(has_text="01_research_quickstart.ipynb").count() == 1
            page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

"""`make lab`, the README's way into JupyterLab: DeerFlow on the offline config, the example notebooks open."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fixtures.browser import (
    LAB_ARGS,
    browser_page,
    quiet_lab_env,
    save_failure,
    wait_for_lab,
    wait_for_notebook_kernel,
)
from fixtures.jupyter_process import free_port
from fixtures.processes import alive, descendants, running_process

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
    env |= {"DEERFLOW_HOME": str(tmp_path / "home"), "HOME": str(tmp_path), "JUPYTER_PLATFORM_DIRS": "1",
            **quiet_lab_env(tmp_path)}
    args = " ".join([f"--no-browser --port={port} --ip=127.0.0.1 --IdentityProvider.token={token}", *LAB_ARGS])
    log = tmp_path / "make-lab.log"
    command = ["make", "-s", "-C", str(ROOT), "lab", f"VENV={venv}", f"LAB_ARGS={args}"]
    with log.open("w") as out, running_process(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                               grace=20) as proc:
        _check_make_lab(proc, log, f"http://127.0.0.1:{port}", token)
        started = descendants(proc.pid)  # make, the shell, jupyter-lab and the notebooks' kernels
        assert any("jupyter" in p.command and "lab" in p.command for p in started), started
    # make, jupyter-lab and its kernels (in sessions of their own) are all gone once the test is done
    assert [p for p in started if alive(p)] == []


def _check_make_lab(proc: subprocess.Popen, log: Path, base: str, token: str) -> None:
    headers = {"Authorization": f"token {token}"}
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
        try:
            page.goto(f"{base}/?token={token}")
            wait_for_lab(page)
            tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab")
            tabs.filter(has_text="02_data_analysis.ipynb").wait_for(timeout=60_000)
            assert tabs.filter(has_text="01_research_quickstart.ipynb").count() == 1
            # Two notebooks are open: the one behind keeps its cells in the DOM, hidden, and may come first.
            page.locator(".jp-Notebook .jp-Cell").filter(visible=True).first.wait_for(timeout=60_000)
            wait_for_notebook_kernel(page)  # the notebook in front has its kernel, no dialog over it
        except Exception:
            save_failure(page, log, "make-lab-failure")
            raise


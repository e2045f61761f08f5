"""``deerflow lab``, the installed package's way into JupyterLab: the example notebooks copied to a
folder of the user's (edits kept), served with the extension, on the offline config."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fixtures.jupyter_process import free_port
from fixtures.processes import running_process

pytestmark = pytest.mark.integration

START_SECONDS = 120  # a hang guard for a loaded machine


def test_deerflow_lab_serves_a_copy_of_the_examples(tmp_path: Path):
    folder, port, token = tmp_path / "notebooks", free_port(), secrets.token_hex(16)
    folder.mkdir()
    (folder / "02_data_analysis.ipynb").write_text("{}")  # the user's own version: kept
    env = {k: v for k, v in os.environ.items() if k not in ("DEERFLOW_CONFIG", "DEERFLOW_SERVER_URL")}
    env |= {"DEERFLOW_HOME": str(tmp_path / "home"), "JUPYTER_PLATFORM_DIRS": "1"}
    command = [sys.executable, "-m", "deerflow.cli", "lab", "--dir", str(folder), "--no-browser",
               f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}"]
    log = tmp_path / "lab.log"
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"token {token}"}
    with log.open("w") as out, running_process(command, cwd=tmp_path, env=env, stdout=out,
                                               stderr=subprocess.STDOUT, grace=20) as proc:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert proc.poll() is None, f"deerflow lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{base}/api/status", headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"deerflow lab did not start:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        listing = httpx.get(f"{base}/api/contents", headers=headers, timeout=30).json()
        names = {item["name"] for item in listing["content"]}
        assert {"01_research_quickstart.ipynb", "offline-config.yaml", "scripts"} <= names
        # the lab opens on DeerFlow's workspace: the example notebooks in tabs (as `make lab` does)
        start = httpx.get(f"{base}/", headers=headers, timeout=30, follow_redirects=False)
        assert start.status_code in (301, 302) and start.headers["location"].split("?")[0].endswith("/lab/workspaces/deerflow")
        workspace = httpx.get(f"{base}/lab/api/workspaces/deerflow", headers=headers, timeout=30).json()
        tabs = workspace["data"]["layout-restorer:data"]["main"]["dock"]["widgets"]
        assert tabs == ["notebook:01_research_quickstart.ipynb", "notebook:02_data_analysis.ipynb"]
        assert (tmp_path / "home" / "lab-workspaces").is_dir()
        health = httpx.get(f"{base}/deerflow/api/health", headers=headers, timeout=30).json()
        config = next(f for f in health["findings"] if f["check"] == "config")
        assert config["subject"] == str(folder / "offline-config.yaml")
    assert (folder / "02_data_analysis.ipynb").read_text() == "{}"
    text = log.read_text()
    assert f"Copied the example notebooks to {folder}" in text and "using the offline example config" in text

"""One person, one machine, one set of threads: the CLI, a local Jupyter server and the magics agree on
the user with no setting (no DEERFLOW_USER, no owner), so each lists and continues the other's threads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration

DEERFLOW = [sys.executable, "-m", "deerflow.cli"]
RUN_TIMEOUT = 300  # a hang guard: each CLI run is a few seconds on the offline model


def _env(home: Path) -> dict[str, str]:
    """No DEERFLOW_USER (the session sets one: unset here), no config, no key, no server to talk to."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DEERFLOW_USER", "DEERFLOW_CONFIG", "OPENAI_API_KEY", "DEERFLOW_SERVER_URL",
                        "DEERFLOW_SERVER_TOKEN", "DEERFLOW_SCRIPT")}
    return env | {"DEERFLOW_HOME": str(home)}


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*DEERFLOW, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, check=False)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _run_body(prompt: str) -> dict:
    return {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": prompt}]}}


def test_cli_and_jupyter_server_share_threads_with_no_setting(tmp_path: Path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = _env(home)
    _cli(["run", "Write me a report"], env, work)
    cli_thread = _cli(["threads"], env, work).stdout.split()[0]

    # The server is started as a user would: no owner, no DEERFLOW_USER ("" is unset).
    server_env = {"DEERFLOW_HOME": str(home), "DEERFLOW_USER": "", "DEERFLOW_CONFIG": ""}
    with running_jupyter(work, env=server_env, args=["--DeerFlowExtension.export_kernel_env=False"]) as server, \
            httpx.Client(base_url=server.api, headers=server.headers, timeout=RUN_TIMEOUT) as http:
        listed = http.post("/threads/search", json={}).json()
        assert cli_thread in [t["thread_id"] for t in listed]
        continued = http.post(f"/threads/{cli_thread}/runs/wait", json=_run_body("Now add a chart"))
        assert continued.status_code == 200, continued.text
        assert "__error__" not in continued.json(), continued.text
        assert "offline" in continued.json()["messages"][-1]["content"]

        created = http.post("/threads", json={}).json()["thread_id"]
        assert http.post(f"/threads/{created}/runs/wait", json=_run_body("Hello from the lab")).status_code == 200

    assert created in _cli(["threads"], env, work).stdout
    again = _cli(["run", "--thread", created, "And now from the terminal"], env, work)
    assert f"on thread {created}" in again.stdout and "run finished: success" in again.stdout


def test_the_magics_and_the_cli_share_threads_with_no_setting(tmp_path: Path, monkeypatch):
    """``%deerflow`` in a notebook with no server (the in-process harness): the CLI's user too."""
    from IPython.core.interactiveshell import InteractiveShell

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = _env(home)
    _cli(["run", "Write me a report"], env, work)
    cli_thread = _cli(["threads"], env, work).stdout.split()[0]
    for name in ("DEERFLOW_USER", "DEERFLOW_CONFIG", "DEERFLOW_SERVER_URL", "DEERFLOW_SERVER_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DEERFLOW_HOME", str(home))
    monkeypatch.chdir(work)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "deerflow_kernel")
    try:
        continued = ip.run_cell(f"%%deerflow --thread {cli_thread}\nNow add a chart")
        assert continued.error_in_exec is None, continued.error_in_exec
        assert continued.result.thread_id == cli_thread and continued.result.status == "success"
        assert "offline" in continued.result.text
        created = ip.run_cell("%deerflow --new Hello from the notebook")
        assert created.error_in_exec is None, created.error_in_exec
        notebook_thread = created.result.thread_id
    finally:
        ip.run_line_magic("unload_ext", "deerflow_kernel")
    assert notebook_thread in _cli(["threads"], env, work).stdout
    again = _cli(["run", "--thread", notebook_thread, "And now from the terminal"], env, work)
    assert f"on thread {notebook_thread}" in again.stdout and "run finished: success" in again.stdout

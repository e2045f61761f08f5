"""A server with no terminal stops cleanly on SIGINT — how JupyterHub stops a user's server.

jupyter_server answers SIGINT with a prompt only on a terminal; elsewhere the signal used to end
its loop without stopping the extensions, DeerFlow's stores stayed open, and their threads kept
the process alive until the Hub's SIGKILL (orphaning the agents' kernels).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys

import httpx
import pytest

from fixtures.jupyter_process import TESTS, _wait_ready, free_port
from fixtures.processes import start_process, stop_process

pytestmark = pytest.mark.integration

CONFIG = """
models:
  - name: note
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: Noted.
"""


def test_sigint_without_a_terminal_runs_the_extensions_cleanup_and_exits(tmp_path):
    (tmp_path / "config.yaml").write_text(CONFIG)
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": str(tmp_path / "config.yaml"),
           "OPENAI_API_KEY": "", "JUPYTER_PLATFORM_DIRS": "1",
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    log = tmp_path / "server.log"
    cmd = [sys.executable, "-m", "jupyter", "server", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}", "--allow-root"]
    with log.open("w") as out:
        proc = start_process(cmd, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_ready(url, token, proc, log, 90)
        headers = {"Authorization": f"token {token}"}
        thread = httpx.post(f"{url}deerflow/api/threads", json={}, headers=headers).json()["thread_id"]
        ran = httpx.post(f"{url}deerflow/api/threads/{thread}/runs/wait", headers=headers, timeout=120,
                         json={"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "hi"}]}})
        assert ran.status_code == 200, ran.text  # the run manager and its SQLite connections are open
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)  # a hang guard: it used to stay up until killed
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server ignored SIGINT:\n{log.read_text()[-2000:]}")
    finally:
        stop_process(proc)
    assert code == 0
    assert "Shutting down" in log.read_text()  # the extensions were stopped, DeerFlow's included

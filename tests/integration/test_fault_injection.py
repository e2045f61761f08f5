"""SIGKILL the server mid-run at five points; after a restart the thread is whole and usable.

A test extension (:mod:`fixtures.fault_hooks`) hangs the server at one point of a
run and says so; the test kills it there (SIGKILL: no clean-up runs), waits for
the dead run's lease to lapse and starts a fresh server on the same home.  The
model is ``ChatOpenAI`` against the scripted OpenAI-compatible test server,
which, like real providers, refuses a history with an unanswered tool call.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import httpx
import pytest
import yaml

from deerflow.persistence.store import INTERRUPTED
from fixtures.fault_hooks import POINTS
from fixtures.jupyter_process import running_jupyter
from fixtures.openai_server import (
    openai_server_fixture,  # noqa: F401 (fixture)
    unanswered_tool_calls,
)

pytestmark = pytest.mark.integration

LEASE_SECONDS = 2.0
FIRST_RUN = [
    {"tool_calls": [{"name": "probe", "args": {"note": "the data"}}]},
    {"tool_calls": [{"name": "write_file", "args": {"path": "/mnt/user-data/outputs/report.md",
                                                    "content": "# Report\n"}}]},
    "The report is written.",
]


def write_setup(work: Path, base_url: str) -> dict[str, str]:
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump({
        "models": [{"name": "fixture", "use": "langchain_openai:ChatOpenAI", "model": "fixture",
                    "base_url": base_url, "api_key": "test-key", "max_retries": 0}],
        "tools": [{"name": "probe", "group": "test", "use": "fixtures.fault_hooks:probe"}],
        "storage": {"run_lease_seconds": LEASE_SECONDS},
    }))
    extra = work / "jupyter-config" / "jupyter_server_config.d"
    extra.mkdir(parents=True)
    (extra / "fault_hooks.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"fixtures.fault_hooks": True}}}))
    return {"DEERFLOW_HOME": str(work / "home"), "DEERFLOW_CONFIG": str(config), "DEERFLOW_USER": "alice",
            "OPENAI_API_KEY": "", "JUPYTER_CONFIG_PATH": str(work / "jupyter-config")}


def run_body(prompt: str) -> dict:
    return {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": prompt}]}}


def wait_for(path: Path, proc, *, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, "the server exited before reaching the fault point"
        assert time.monotonic() < deadline, f"the run never reached {path.name}"
        time.sleep(0.05)


def wait_for_lease_to_lapse(home: Path, thread_id: str) -> None:
    with sqlite3.connect(home / "deerflow.db") as db:
        row = db.execute("SELECT expires_at FROM thread_leases WHERE thread_id=?", (thread_id,)).fetchone()
    if row is not None:
        time.sleep(max(0.0, row[0] - time.time()) + 0.2)


@pytest.mark.parametrize("point", POINTS)
def test_a_server_killed_mid_run_leaves_a_readable_thread_and_an_interrupted_run(point, tmp_path, openai_server):
    openai_server.add(*FIRST_RUN)
    env = write_setup(tmp_path, openai_server.base_url)
    signal_file = tmp_path / "reached"
    with running_jupyter(tmp_path, env={**env, "DEERFLOW_FAULT_POINT": point,
                                        "DEERFLOW_FAULT_SIGNAL": str(signal_file)}) as server:
        with httpx.Client(base_url=server.api, headers=server.headers, timeout=30) as http:
            http.post("/threads", json={"thread_id": "t"}).raise_for_status()
            started = http.post("/threads/t/runs", json=run_body("Write the report"))
            assert started.status_code == 200, started.text
            run_id = started.json()["run_id"]
            wait_for(signal_file, server.process)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)

    wait_for_lease_to_lapse(Path(env["DEERFLOW_HOME"]), "t")
    openai_server.replace_pending("Back again: all good.")
    with running_jupyter(tmp_path, env=env) as server, httpx.Client(
            base_url=server.api, headers=server.headers, timeout=60) as http:
        assert http.get("/threads/t").status_code == 200
        assert http.get("/threads/t/state").status_code == 200
        killed = http.get(f"/threads/t/runs/{run_id}").json()
        assert killed["status"] == "error" and killed["metadata"]["error"] == INTERRUPTED
        done = http.post("/threads/t/runs/wait", json=run_body("Are you there?"))
        assert done.status_code == 200, done.text
        values = done.json()
        assert "__error__" not in values, values
        assert values["messages"][-1]["content"] == "Back again: all good."
        assert unanswered_tool_calls(openai_server.completions[-1].messages) == []
        assert all(r["status"] == "success" for r in http.get("/threads/t/runs").json() if r["run_id"] != run_id)

"""A run a guard ends (loop detection) says so everywhere: events, records, CLI, HTTP API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.persistence.store import MetadataStore

pytestmark = pytest.mark.integration

API = ("deerflow", "api")
LOOPING = """
turns:
""" + "".join(f"""  - text: "Attempt {i}."
    tool_calls: [{{name: ls, args: {{path: /mnt/user-data/workspace}}}}]
""" for i in range(1, 7)) + """  - "All done."
"""


def looping_config(tmp_path: Path) -> Path:
    script = tmp_path / "looping.yaml"
    script.write_text(LOOPING)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"models:\n  - name: offline\n    use: deerflow.models.scripted:ScriptedChatModel\n"
                   f"    script: {script}\nloop_detection:\n  warn_after: 2\n  stop_after: 3\n")
    return cfg


def cli(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG"}}
    env["DEERFLOW_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "deerflow.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_looping_run_ends_stopped_in_the_result_and_the_run_record(deerflow_home, tmp_path):
    with DeerFlowClient(config_path=looping_config(tmp_path)) as client:
        result = client.chat("List the workspace")
    record = MetadataStore(deerflow_home / "deerflow.db").get_run(result.run_id, "local")
    assert result.status == "stopped" and result.stopped_by == "loop_detection"
    assert result.error and "kept repeating the same tool call" in result.error
    finished = result.events[-1]
    assert finished.type == "run_finished" and finished.stopped_by == "loop_detection"
    assert record is not None and record.status == "stopped"
    assert record.error == result.error and record.result["stopped_by"] == "loop_detection"


def test_the_cli_exits_non_zero_with_one_line_saying_which_guard_stopped_the_run(deerflow_home, tmp_path):
    cfg = looping_config(tmp_path)
    proc = cli("--config", str(cfg), "run", "List the workspace", home=deerflow_home, cwd=tmp_path)
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]  # one line, no traceback
    assert proc.stderr.startswith("deerflow: run stopped by loop_detection: ")
    assert "run finished: stopped by loop_detection" in proc.stdout

    as_json = cli("--config", str(cfg), "run", "List again", "--json", home=deerflow_home, cwd=tmp_path)
    last = json.loads(as_json.stdout.strip().splitlines()[-1])
    assert as_json.returncode == 3
    assert (last["type"], last["status"], last["stopped_by"]) == ("run_finished", "stopped", "loop_detection")


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path):
    return {
        "ServerApp": {"jpserver_extensions": {"deerflow_jupyter": True}},
        "DeerFlowExtension": {"export_kernel_env": False, "config_path": str(looping_config(tmp_path)),
                              "home": str(deerflow_home), "owner": "owner", "scheduler_enabled": False},
    }


async def test_the_http_api_reports_the_stopped_run_and_its_guard(jp_fetch):
    thread = json.loads((await jp_fetch(*API, "threads", method="POST", body="{}")).body)["thread_id"]
    body = json.dumps({"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "ls"}]}})
    await jp_fetch(*API, "threads", thread, "runs", "wait", method="POST", body=body)
    (run,) = json.loads((await jp_fetch(*API, "threads", thread, "runs")).body)
    assert run["metadata"]["deerflow_status"] == "stopped"
    assert run["metadata"]["stopped_by"] == "loop_detection"
    assert "kept repeating" in run["metadata"]["error"]
    assert run["status"] == "error"  # LangGraph's vocabulary: the run did not complete its work
    fetched = json.loads((await jp_fetch(*API, "threads", thread, "runs", run["run_id"])).body)
    assert fetched["metadata"]["stopped_by"] == "loop_detection"

"""Stopping a real ``jupyter server`` that has no terminal, as JupyterHub does, with a run in flight.

The server is started like a Hub-spawned one: stdin from /dev/null, its own session.
Its run is inside a slow tool when the signal comes.  The server must exit on its own
(20 s is only a hang guard), leave no process behind (its kernel included), and record
the run as interrupted by the stop, so ``deerflow run --thread T --continue`` finishes it.
Afterwards ``/metrics`` of a fresh server shows the ``deerflow_`` series of a finished run.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from deerflow.cli import main
from deerflow.persistence.store import MetadataStore
from fixtures.jupyter_process import TESTS, _wait_ready, free_port
from fixtures.leaky_tools import KEY, TOKEN, write_leaky_config
from fixtures.openai_server import WAIT_TOOL, fixture_model_config, openai_server_fixture  # noqa: F401
from fixtures.processes import alive, descendants, start_process, stop_process

pytestmark = pytest.mark.integration

HANG_GUARD_S = 20.0


def write_config(work: Path, base_url: str) -> Path:
    return fixture_model_config(work, base_url, extra=WAIT_TOOL)


def start_headless_server(work: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str, dict[str, str], Path]:
    """``jupyter server`` with no terminal: stdin /dev/null, a new session, output to a log."""
    port, token = free_port(), secrets.token_hex(16)
    log = work / f"jupyter-{port}.log"
    cmd = [sys.executable, "-m", "jupyter", "server", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}", "--allow-root"]
    full_env = {**os.environ, **env, "JUPYTER_PLATFORM_DIRS": "1",
                "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    with log.open("w") as out:
        proc = start_process(cmd, cwd=work, env=full_env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_ready(url, token, proc, log, 90)
    except BaseException:
        stop_process(proc, grace=5)
        raise
    return proc, url, {"Authorization": f"token {token}"}, log


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def tool_call_in_flight(http: httpx.Client, thread_id: str) -> bool:
    state = http.get(f"/deerflow/api/threads/{thread_id}/state")
    if state.status_code != 200:
        return False
    messages = (state.json().get("values") or {}).get("messages") or []
    return any(m.get("tool_calls") for m in messages if isinstance(m, dict))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_headless_server_cleanly_and_the_run_can_be_continued(
        sig, deerflow_home, tmp_path, openai_server, monkeypatch, capsys):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    config = write_config(tmp_path, openai_server.base_url)
    monkeypatch.setenv("DEERFLOW_CONFIG", str(config))
    openai_server.add({"tool_calls": [{"name": "wait", "args": {"seconds": 120}, "id": "call_wait"}]})
    env = {"DEERFLOW_HOME": str(deerflow_home), "DEERFLOW_CONFIG": str(config), "DEERFLOW_USER": "alice",
           "FIXTURE_KEY": "sk-fixture"}
    proc, url, headers, log = start_headless_server(tmp_path, env)
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            kernel = http.post("/api/kernels", json={"name": "python3"})
            assert kernel.status_code == 201, kernel.text
            http.post("/deerflow/api/threads", json={"thread_id": "t-stop"}).raise_for_status()
            started = http.post("/deerflow/api/threads/t-stop/runs", json={
                "assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "wait long"}]}})
            assert started.status_code == 200, started.text
            run_id = started.json()["run_id"]
            wait_for(lambda: tool_call_in_flight(http, "t-stop"), "the run to be inside its tool")
            children = descendants(proc.pid)
            assert children, "the server should have started a kernel"
        proc.send_signal(sig)
        try:
            proc.wait(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server ignored {sig.name} for {HANG_GUARD_S:.0f}s:\n{log.read_text()[-3000:]}")
        wait_for(lambda: not any(alive(c) for c in children), "the server's children to end", timeout=10)
    finally:
        stop_process(proc, grace=5)

    record = MetadataStore(deerflow_home / "deerflow.db").get_run(run_id, "alice")
    assert record is not None and record.status == "error", log.read_text()[-3000:]
    assert record.error == "interrupted: server stopped"
    assert "run finished" in log.read_text()  # the structured line an operator searches for

    openai_server.add("Picked up where I stopped: all done.")
    assert main(["--user", "alice", "run", "--thread", "t-stop", "--continue", "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "success"
    assert events[-1]["text"] == "Picked up where I stopped: all done."
    sent = openai_server.completions[-1].messages
    assert "server stopped" in sent[-1]["content"]  # the continuation says why it resumes
    assert main(["--user", "alice", "run", "--thread", "t-stop", "--continue"]) == 1
    assert "nothing to continue" in capsys.readouterr().err


def test_metrics_show_runs_tokens_and_tools(deerflow_home, tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    config = write_config(tmp_path, openai_server.base_url)
    openai_server.add(
        {"tool_calls": [{"name": "wait", "args": {"seconds": 0}}], "usage": {"prompt_tokens": 30, "completion_tokens": 5}},
        {"text": "First done.", "usage": {"prompt_tokens": 40, "completion_tokens": 3}},
        {"text": "Second done.", "usage": {"prompt_tokens": 20, "completion_tokens": 2}},
    )
    env = {"DEERFLOW_HOME": str(deerflow_home), "DEERFLOW_CONFIG": str(config), "FIXTURE_KEY": "sk-fixture"}
    proc, url, headers, _ = start_headless_server(tmp_path, env)
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            for prompt in ("first", "second"):
                done = http.post(f"/deerflow/api/threads/m-{prompt}/runs/wait", json={
                    "assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": prompt}]},
                    "if_not_exists": "create"})
                assert done.status_code == 200, done.text
            metrics = http.get("/metrics")
    finally:
        stop_process(proc, grace=5)
    assert metrics.status_code == 200
    samples = parse_samples(metrics.text)
    assert samples['deerflow_runs_started_total'] == 2
    assert samples['deerflow_runs_finished_total{status="success"}'] == 2
    assert samples['deerflow_run_duration_seconds_count{status="success"}'] == 2
    assert samples['deerflow_active_runs'] == 0
    assert samples['deerflow_model_tokens_total{direction="input",model="fixture"}'] == 90
    assert samples['deerflow_model_tokens_total{direction="output",model="fixture"}'] == 10
    assert samples['deerflow_model_calls_total{model="fixture",usage="reported"}'] == 3
    assert samples['deerflow_tool_calls_total{status="success",tool="wait"}'] == 1
    assert samples['deerflow_model_call_seconds_count{model="fixture"}'] == 3


def test_metrics_show_sandbox_starts_guard_refusals_and_the_batch_queue(deerflow_home, tmp_path, openai_server,
                                                                       monkeypatch):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    config = write_config(tmp_path, openai_server.base_url)
    openai_server.add(
        {"tool_calls": [{"name": "read_file", "args": {"path": "/etc/passwd"}},
                        {"name": "python", "args": {"code": "print(6 * 7)"}}]},
        {"text": "The file is outside the sandbox; 42."},
    )
    env = {"DEERFLOW_HOME": str(deerflow_home), "DEERFLOW_CONFIG": str(config), "FIXTURE_KEY": "sk-fixture"}
    _, metrics = run_and_scrape(tmp_path, env, "m-guard", "read it")
    samples = parse_samples(metrics)
    assert samples['deerflow_guard_refusals_total{guard="path_escape"}'] == 1
    assert samples['deerflow_tool_calls_total{status="error",tool="read_file"}'] == 1
    assert samples['deerflow_sandbox_starts_total{kind="kernel",provider="local"}'] == 1
    assert samples['deerflow_tool_calls_total{status="success",tool="python"}'] == 1
    assert samples['deerflow_batch_queue_depth'] == 0  # exported before any batch, so a dashboard has a series


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_metrics_count_the_connections_the_sandbox_egress_proxy_refuses(deerflow_home, tmp_path):
    """A sandboxed ``curl`` to the cloud metadata address is refused by the proxy; ``/metrics`` counts it."""
    command = "curl -sS --max-time 5 http://169.254.169.254/latest/meta-data/"
    config = tmp_path / "config.yaml"
    config.write_text(f"""
models:
  - name: scripted
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls: [{{name: bash, id: c1, args: {{command: "{command}"}}}}]
        - Could not reach it.
sandbox:
  use: bwrap
  network: allowlist
  allowed_hosts: [allowed.test]
""")
    env = {"DEERFLOW_HOME": str(deerflow_home), "DEERFLOW_CONFIG": str(config)}
    done, metrics = run_and_scrape(tmp_path, env, "m-egress", "fetch it")
    (tool,) = [m for m in done.json()["messages"] if m["type"] == "tool"]
    assert "deerflow egress proxy: 169.254.169.254:80 refused" in tool["content"]
    samples = parse_samples(metrics)
    assert samples['deerflow_guard_refusals_total{guard="sandbox_egress"}'] == 1
    assert samples['deerflow_tool_calls_total{status="success",tool="bash"}'] == 1  # curl failed, the tool ran


def test_json_logs_one_object_per_line_with_the_run_fields_and_no_secret(deerflow_home, tmp_path):
    """``logging.format: json``: the server's DeerFlow lines parse as JSON; a key code logged is ``***``."""
    key, token = KEY, TOKEN
    config = write_leaky_config(tmp_path, "json")
    env = {"DEERFLOW_HOME": str(deerflow_home), "DEERFLOW_CONFIG": str(config), "DEERFLOW_USER": "alice",
           "LAB_SERVICE_TOKEN": token}
    proc, url, headers, log = start_headless_server(tmp_path, env)
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=90) as http:
            done = http.post("/deerflow/api/threads/t-log/runs/wait", json={
                "assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "go"}]},
                "if_not_exists": "create"})
            assert done.status_code == 200, done.text
    finally:
        stop_process(proc, grace=5)
    text = log.read_text()
    assert key not in text and token not in text
    ours = [json.loads(line) for line in text.splitlines() if line.startswith('{"ts"')]
    (finished,) = [line for line in ours if line["message"] == "run finished"]
    assert finished["logger"] == "deerflow.runs" and finished["level"] == "info"
    assert finished["user"] == "alice" and finished["thread"] == "t-log" and finished["status"] == "success"
    assert finished["run"] and finished["duration_s"] >= 0 and finished["tool_calls"] == 1
    (warned,) = [line for line in ours if line["logger"] == "deerflow.tests.leaky" and line["level"] == "warning"]
    assert warned["upstream"] == "401 for key *** and token ***"
    (failed,) = [line for line in ours if line["message"] == "leak tool failed"]
    assert failed["error"] == "RuntimeError: request failed with 401 for key *** and token ***"
    assert not [line for line in text.splitlines() if "deerflow.runs" in line and not line.startswith("{")]


def run_and_scrape(work: Path, env: dict[str, str], thread: str, prompt: str) -> tuple[httpx.Response, str]:
    """One run on a fresh headless server (its answer asserted 200), then its ``/metrics`` text."""
    proc, url, headers, _ = start_headless_server(work, env)
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=90) as http:
            done = http.post(f"/deerflow/api/threads/{thread}/runs/wait", json={
                "assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": prompt}]},
                "if_not_exists": "create"})
            assert done.status_code == 200, done.text
            return done, http.get("/metrics").text
    finally:
        stop_process(proc, grace=5)


def parse_samples(text: str) -> dict[str, float]:
    """``name{labels} value`` lines of the Prometheus text format (labels as printed, sorted by name)."""
    samples = {}
    for line in text.splitlines():
        if line.startswith("deerflow_"):
            series, _, value = line.rpartition(" ")
            name, _, labels = series.partition("{")
            pairs = sorted(labels.rstrip("}").split(",")) if labels else []
            samples[name + ("{" + ",".join(pairs) + "}" if pairs else "")] = float(value)
    return samples

"""MCP server lifecycle through agent runs: failures, session reuse, idle close, config edits, reset."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log
from fixtures.mcp_servers import call, scripted_config, stdio_entry, write_extensions

pytestmark = pytest.mark.integration


def results(result) -> list[ev.ToolResult]:
    """Tool results in the order the model called the tools (parallel calls finish in any order)."""
    return sorted((e for e in result.events if isinstance(e, ev.ToolResult)), key=lambda e: e.call_id)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_missing_command_and_hanging_server_are_reported_while_the_healthy_one_works(
        deerflow_home: Path, tmp_path: Path, caplog):
    config, _ = scripted_config(tmp_path, [{"tool_calls": [call("test_echo", text="still here")]}, "ok", "again"])
    write_extensions(tmp_path / "extensions_config.json", {
        "ghost": {"type": "stdio", "command": "/nonexistent/deerflow-no-such-server"},
        "test": stdio_entry(),
        "stuck": stdio_entry("hang", session_init_timeout=1),
    })
    caplog.set_level(logging.WARNING, logger="deerflow.mcp")
    with DeerFlowClient(config_path=config) as client:
        first = client.chat("echo something")
        second = client.chat("and again", first.thread_id)
        servers = {s["name"]: s for s in client.mcp_servers()}

    assert first.status == "success", first.error
    (echo,) = results(first)
    assert echo.status == "success" and echo.text == "echo: still here"
    notices = {n.data["server"]: n.text for n in first.notices if n.kind == "mcp_server_unavailable"}
    assert "command not found: /nonexistent/deerflow-no-such-server" in notices["ghost"]
    assert "no answer to the handshake within 1s" in notices["stuck"]
    assert {n.data["server"] for n in second.notices if n.kind == "mcp_server_unavailable"} == {"ghost", "stuck"}
    assert (servers["test"]["status"], servers["ghost"]["status"], servers["stuck"]["status"]) == \
        ("ok", "failed", "failed")
    logged = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("MCP server ghost skipped: command not found") for line in logged)
    assert any(line.startswith("MCP server stuck skipped: no answer to the handshake") for line in logged)


def test_sessions_are_reused_per_thread_started_in_its_workspace_and_closed_on_shutdown(
        deerflow_home: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DEERFLOW_TEST_API_KEY", "sk-should-never-reach-a-server")
    config, _ = scripted_config(tmp_path, [
        {"tool_calls": [call("test_pid"), call("test_cwd"), call("test_env_has", name="DEERFLOW_TEST_API_KEY"),
                        call("test_env_has", name="SERVER_MODE")]},
        "first",
        {"tool_calls": [call("test_pid")]},
        "second",
    ])
    write_extensions(tmp_path / "extensions_config.json", {"test": stdio_entry(env={"SERVER_MODE": "demo"})})
    with DeerFlowClient(config_path=config) as client:
        first = client.chat("start")
        again = client.chat("continue", first.thread_id)
        other = client.chat("another thread")
        pids = [int(results(r)[0].text) for r in (first, again, other)]
        assert all(alive(pid) for pid in pids)

    assert pids[0] == pids[1] != pids[2]  # one session per (server, user, thread), reused across runs
    workspace = deerflow_home / "users" / "local" / "threads" / first.thread_id / "user-data" / "workspace"
    assert results(first)[1].text == str(workspace)
    assert results(other)[1].text.endswith(f"/threads/{other.thread_id}/user-data/workspace")
    assert results(first)[2].text == "DEERFLOW_TEST_API_KEY: absent"  # scrubbed environment
    assert results(first)[3].text == "SERVER_MODE: present (4 chars)"  # plus the configured env
    assert not any(alive(pid) for pid in pids)  # RunManager.close closed every session


def test_idle_sessions_are_closed(deerflow_home: Path, tmp_path: Path):
    config, _ = scripted_config(tmp_path, [{"tool_calls": [call("test_pid")]}, "done"],
                                extra={"mcp": {"session_idle_timeout": 0.3}})
    write_extensions(tmp_path / "extensions_config.json", {"test": stdio_entry()})
    with DeerFlowClient(config_path=config) as client:
        pid = int(results(client.chat("which process?"))[0].text)
        deadline = time.monotonic() + 20
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid), "an idle session should be closed while the host keeps running"


def test_an_edited_config_is_used_by_the_next_run_without_restart(deerflow_home: Path, tmp_path: Path):
    config, log = scripted_config(tmp_path, [
        {"tool_calls": [call("alpha_echo", text="one")]}, "first",
        {"tool_calls": [call("beta_echo", text="two")]}, "second",
    ])
    extensions = write_extensions(tmp_path / "extensions_config.json",
                                  {"alpha": stdio_entry(include_tools=["echo", "pid"])})
    with DeerFlowClient(config_path=config) as client:
        first = client.chat("run one")
        write_extensions(extensions, {"beta": stdio_entry(include_tools=["echo"])})
        second = client.chat("run two", first.thread_id)
        client.reset_mcp()
        after_reset = client.mcp_servers()

    assert [r.text for r in results(first)] == ["echo: one"]
    assert [(r.status, r.text) for r in results(second)] == [("success", "echo: two")]
    calls = read_log(log)
    assert {"alpha_echo", "alpha_pid"} <= set(calls[0]["tools"])
    assert "beta_echo" in calls[2]["tools"] and not any(t.startswith("alpha_") for t in calls[2]["tools"])
    assert "beta_pid" not in calls[2]["tools"]  # include_tools filtered the listing
    assert [(s["name"], s["status"]) for s in after_reset] == [("beta", "not_started")]

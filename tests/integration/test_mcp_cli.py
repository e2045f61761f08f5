"""``deerflow mcp list|tools|reset`` as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.cli_calls import assert_refused, run_cli
from fixtures.mcp_servers import scripted_config, stdio_entry, write_extensions

pytestmark = pytest.mark.integration


def deerflow(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG"}}
    env["DEERFLOW_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "deerflow.cli", "--config", "config.yaml", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_list_starts_nothing_tools_starts_and_reports_reset_says_so(deerflow_home: Path, tmp_path: Path):
    scripted_config(tmp_path, ["unused"])
    write_extensions(tmp_path / "extensions_config.json", {
        "test": stdio_entry(include_tools=["echo", "add"], description="the test server"),
        "ghost": {"type": "stdio", "command": "/nonexistent/deerflow-no-such-server"},
        "typo": {"type": "stdio", "comand": "x"},
    })
    listed = deerflow("mcp", "list", home=deerflow_home, cwd=tmp_path)
    tools = deerflow("mcp", "tools", home=deerflow_home, cwd=tmp_path)
    reset = deerflow("mcp", "reset", home=deerflow_home, cwd=tmp_path)

    assert listed.returncode == 1  # the invalid entry
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["test", "stdio", "not_started", "—", "the", "test", "server"]
    assert any("error: config error in" in line and "'mcpServers.typo.comand'" in line for line in lines)
    assert tools.returncode == 1, tools.stderr
    assert [line.split()[0] for line in tools.stdout.splitlines()[:2]] == ["test_echo", "test_add"]
    assert "! ghost: command not found: /nonexistent/deerflow-no-such-server" in tools.stdout
    assert reset.returncode == 0 and "MCP cache reset" in reset.stdout


def test_a_broken_extensions_file_is_said_and_json_stays_json(capsys, deerflow_home: Path, tmp_path: Path):
    """In this process (``main``): a malformed ``extensions_config.json`` was "no MCP servers
    configured", status 0; ``tools --json`` mixed "! server: error" lines into its JSON lines."""
    config, _ = scripted_config(tmp_path, ["unused"])
    extensions = tmp_path / "extensions_config.json"
    extensions.write_text("{not json")
    for action in ("list", "tools"):
        assert_refused(run_cli(capsys, "--config", str(config), "mcp", action),
                       "MCP servers skipped", "extensions_config.json: malformed JSON")
    assert extensions.read_text() == "{not json"

    write_extensions(extensions, {"ghost": {"type": "stdio", "command": "/nonexistent/deerflow-no-such-server"}})
    code, out, err = run_cli(capsys, "--config", str(config), "mcp", "tools", "--json")
    assert code == 1 and out == ""  # no tools: no line that is not JSON
    assert "! ghost: command not found: /nonexistent/deerflow-no-such-server" in err

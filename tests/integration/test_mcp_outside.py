"""An MCP server we did not write: ``mcp-server-time`` from PyPI, over stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log
from fixtures.mcp_notebook import TIME_TOOLS
from fixtures.mcp_servers import call, scripted_config, write_extensions

pytestmark = pytest.mark.integration

TIME_SERVER = {"type": "stdio", "command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
               "description": "current time and timezone conversion"}


def test_time_server_tools_are_discovered_and_called_in_a_run(deerflow_home: Path, tmp_path: Path):
    config, log = scripted_config(tmp_path, [
        {"tool_calls": [call("time_get_current_time", timezone="Asia/Tokyo"),
                        call("time_convert_time", source_timezone="UTC", time="12:00", target_timezone="Europe/Paris")]},
        "It is morning in Tokyo.",
    ])
    write_extensions(tmp_path / "extensions_config.json", {"time": TIME_SERVER})
    with DeerFlowClient(config_path=config) as client:
        tools = {t["name"]: t for t in client.mcp_tools()}
        result = client.chat("What time is it in Tokyo?")

    assert set(tools) == TIME_TOOLS  # what notebooks/04_mcp.ipynb's script relies on
    assert tools["time_get_current_time"]["server"] == "time"
    assert result.status == "success", result.error
    found = {e.name: e for e in result.events if isinstance(e, ev.ToolResult)}
    now, converted = found["time_get_current_time"], found["time_convert_time"]
    assert now.status == "success" and json.loads(now.text)["timezone"] == "Asia/Tokyo"
    assert converted.status == "success" and json.loads(converted.text)["target"]["timezone"] == "Europe/Paris"
    assert {"time_get_current_time", "time_convert_time"} <= set(read_log(log)[0]["tools"])

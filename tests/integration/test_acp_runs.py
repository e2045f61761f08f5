"""``invoke_acp_agent`` in a real run: the lead gets text only and reads the ACP workspace read-only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from deerflow import DeerFlowClient
from deerflow.acp.echo_agent import THOUGHT_PREFIX
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log

ECHO = Path(__file__).resolve().parents[1] / "fixtures" / "acp_echo_agent.py"
SCRIPT = """
turns:
  - tool_calls:
      - {name: invoke_acp_agent, args: {agent: echo, prompt: "summarise the repo"}}
  - tool_calls:
      - {name: read_file, args: {path: /mnt/acp-workspace/echo.md}}
  - tool_calls:
      - {name: write_file, args: {path: /mnt/acp-workspace/echo.md, content: "overwritten"}}
  - "The echo agent answered."
"""
MISSING = """
turns:
  - tool_calls:
      - {name: invoke_acp_agent, args: {agent: ghost, prompt: "hi"}}
  - "It is not installed."
"""


@pytest.fixture
def config(deerflow_home: Path, tmp_path: Path) -> Path:
    (tmp_path / "run.yaml").write_text(SCRIPT)
    (tmp_path / "missing.yaml").write_text(MISSING)
    data = {
        "models": [{"name": name, "use": "fixtures.logging_model:LoggingScriptedModel",
                    "log": str(tmp_path / f"{name}.jsonl"), "script": str(tmp_path / f"{name}.yaml")}
                   for name in ("run", "missing")],
        "acp_agents": {"echo": {"command": sys.executable, "args": [str(ECHO)], "description": "echoes prompts"},
                       "ghost": {"command": "ghost-acp-adapter"}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def tool_results(result) -> list[ev.ToolResult]:
    return [e for e in result.events if isinstance(e, ev.ToolResult)]


def test_acp_answer_is_text_only_and_its_workspace_is_read_only_to_the_lead(config, deerflow_home, tmp_path):
    with DeerFlowClient(config_path=config) as client:
        result = client.chat("Ask the echo agent", model_name="run")
    assert result.status == "success", result.error
    acp, read, write = tool_results(result)
    assert acp.status == "success"
    assert acp.text.startswith("Echo: summarise the repo\nI wrote echo.md.")
    assert "Files written by the agent: /mnt/acp-workspace/echo.md" in acp.text
    assert THOUGHT_PREFIX not in acp.text
    assert read.status == "success" and "summarise the repo" in read.text
    assert write.status == "error" and write.code == "read_only"  # /mnt/acp-workspace is read-only for the lead
    host = deerflow_home / "users" / "local" / "threads" / result.thread_id / "acp-workspace" / "echo.md"
    assert host.read_text() == "# Echo\n\nsummarise the repo\n"
    tools = read_log(tmp_path / "run.jsonl")[0]["tools"]
    assert "invoke_acp_agent" in tools


def test_scheduled_runs_deny_the_agents_permission_requests(config, deerflow_home):
    with DeerFlowClient(config_path=config) as client:
        result = client.chat("Ask the echo agent", model_name="run", interaction_mode="scheduled")
    acp = tool_results(result)[0]
    assert "I was not allowed to write echo.md." in acp.text
    workspace = deerflow_home / "users" / "local" / "threads" / result.thread_id / "acp-workspace"
    assert not (workspace / "echo.md").exists()


def test_missing_executable_reaches_the_model_as_an_actionable_error(config, deerflow_home):
    with DeerFlowClient(config_path=config) as client:
        result = client.chat("Ask the ghost", model_name="missing")
    (acp,) = tool_results(result)
    assert acp.status == "error" and acp.code == "acp_executable_missing"
    assert "acp_agents.ghost.command" in acp.text and "Errno" not in acp.text
    assert result.status == "success"  # the run went on

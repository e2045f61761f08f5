"""Custom agents end to end: bootstrap, a named agent's run, self-update, through the embedded client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from deerflow import DeerFlowClient
from deerflow.errors import NotFoundError, UserError
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log

BOOT = """
turns:
  - tool_calls:
      - name: setup_agent
        args:
          soul: "You are Ada, a terse data analyst. Always answer in three sentences or fewer."
          description: "A terse analyst for quick data questions"
  - "Ada is ready: run her with --agent ada."
"""
UPDATE = """
turns:
  - tool_calls:
      - name: update_agent
        args: {description: "A terse analyst who always draws a chart"}
  - "Noted: I will draw charts from now on."
"""
BAD_UPDATE = """
turns:
  - tool_calls:
      - name: update_agent
        args: {description: "changed", skills: ["no-such-skill"]}
  - "I could not change my skills."
"""


@pytest.fixture
def setup(deerflow_home: Path, tmp_path: Path) -> tuple[Path, Path]:
    logs = tmp_path / "logs"
    logs.mkdir()
    models = []
    for name, script in {"boot": BOOT, "agent": UPDATE, "bad": BAD_UPDATE}.items():
        (tmp_path / f"{name}.yaml").write_text(script)
        models.append({"name": name, "use": "fixtures.logging_model:LoggingScriptedModel",
                       "log": str(logs / f"{name}.jsonl"), "script": str(tmp_path / f"{name}.yaml")})
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"models": models}))
    return config, logs


def agent_files(home: Path, user: str = "local") -> dict[str, str]:
    folder = home / "users" / user / "agents" / "ada"
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_bootstrap_then_run_the_agent_which_updates_itself(setup, deerflow_home):
    config, logs = setup
    with DeerFlowClient(config_path=config) as client:
        boot = client.chat("/bootstrap ada a terse analyst for quick questions", model_name="boot")
        assert boot.status == "success", boot.error
        (call,) = read_log(logs / "boot.jsonl")[:1]
        assert "setup_agent" in call["tools"] and "update_agent" not in call["tools"]
        assert "creates the custom agent 'ada'" in call["messages"][0]["text"]
        assert call["messages"][-1]["text"] == "a terse analyst for quick questions"
        ada = client.agent_store().get("ada")
        assert ada.soul.startswith("You are Ada") and ada.config.description == "A terse analyst for quick data questions"

        client.update_agent("ada", model="agent", display_name="Ada")  # the owner picks her model
        before = agent_files(deerflow_home)
        run = client.chat("From now on, draw a chart with every answer", agent_name="ada")
        assert run.status == "interrupted", run.error  # the change waits for the owner's yes
        first = read_log(logs / "agent.jsonl")[0]
        system = first["messages"][0]["text"]
        assert "<agent_instructions>\nYou are Ada, a terse data analyst." in system
        assert "update_agent" in first["tools"] and "setup_agent" not in first["tools"]
        assert run.clarification["source"] == "persistence_approval"
        assert "New description: A terse analyst who always draws a chart" in run.clarification["context"]
        assert agent_files(deerflow_home) == before
        approved = client.reply(run.thread_id, "Approve", agent_name="ada")
        assert approved.status == "success", approved.error
        (result,) = [e for e in approved.events if isinstance(e, ev.ToolResult)]
        assert result.status == "success" and "The user approved" in result.text
        ada = client.agent_store().get("ada")
        assert ada.config.description == "A terse analyst who always draws a chart"
        assert ada.config.display_name == "Ada" and ada.soul.startswith("You are Ada")  # partial update


def test_a_denied_self_update_changes_nothing(setup, deerflow_home):
    config, _ = setup
    with DeerFlowClient(config_path=config) as client:
        client.chat("/bootstrap ada analyst", model_name="boot")
        client.update_agent("ada", model="agent")
        before = agent_files(deerflow_home)
        asked = client.chat("From now on, draw a chart with every answer", agent_name="ada")
        denied = client.reply(asked.thread_id, "Deny", agent_name="ada")
        assert denied.status == "success" and not [e for e in denied.events if isinstance(e, ev.ToolResult)]
        assert [n.data["approved"] for n in denied.notices if n.kind == "consent_decision"] == [False]
        assert agent_files(deerflow_home) == before


def test_a_scheduled_run_cannot_update_the_agent(setup, deerflow_home):
    config, _ = setup
    with DeerFlowClient(config_path=config) as client:
        client.chat("/bootstrap ada analyst", model_name="boot")
        client.update_agent("ada", model="agent")
        before = agent_files(deerflow_home)
        run = client.chat("From now on, draw a chart with every answer", agent_name="ada",
                          interaction_mode="scheduled")
        assert run.status == "success" and run.clarification is None
        (result,) = [e for e in run.events if isinstance(e, ev.ToolResult)]
        assert result.status == "error" and result.code == "consent_unattended"
        assert "this run is unattended (scheduled)" in result.text and "nothing was changed" in result.text
        assert agent_files(deerflow_home) == before


def test_invalid_self_update_is_an_error_the_model_sees_and_changes_nothing(setup, deerflow_home):
    config, _ = setup
    with DeerFlowClient(config_path=config) as client:
        client.chat("/bootstrap ada analyst", model_name="boot")
        client.update_agent("ada", model="bad")
        before = agent_files(deerflow_home)
        run = client.chat("Use the no-such-skill skill from now on", agent_name="ada")
        (result,) = [e for e in run.events if isinstance(e, ev.ToolResult)]
        assert result.status == "error" and "unknown skill 'no-such-skill'" in result.text
        assert "Nothing was changed" in result.text
        assert agent_files(deerflow_home) == before


def test_agent_tool_groups_narrow_the_run_and_webhook_runs_cannot_update(setup, deerflow_home):
    config, logs = setup
    with DeerFlowClient(config_path=config) as client:
        client.chat("/bootstrap ada analyst", model_name="boot")
        client.update_agent("ada", model="agent", tool_groups=["file:read"])
        before = agent_files(deerflow_home)
        run = client.chat("an outside event", agent_name="ada", interaction_mode="webhook")
        tools = read_log(logs / "agent.jsonl")[0]["tools"]
        assert "read_file" in tools and "write_file" not in tools  # file:write is not one of her groups
        assert "update_agent" not in tools and "setup_agent" not in tools
        (result,) = [e for e in run.events if isinstance(e, ev.ToolResult)]
        assert result.status == "error"  # the scripted call reached no tool
        assert agent_files(deerflow_home) == before
        with pytest.raises(UserError, match="unknown tool group 'browser'"):
            client.update_agent("ada", tool_groups=["browser"])
        assert agent_files(deerflow_home) == before


def test_another_user_cannot_run_list_or_change_the_agent(setup, deerflow_home):
    config, _ = setup
    with DeerFlowClient(config_path=config) as alice:
        alice.chat("/bootstrap ada analyst", model_name="boot")
    with DeerFlowClient(config_path=config, user_id="bob") as bob:
        assert bob.agent_store().list_agents() == []
        with pytest.raises(NotFoundError, match="unknown agent 'ada'"):
            bob.chat("hello", agent_name="ada", model_name="agent")
        with pytest.raises(NotFoundError):
            bob.update_agent("ada", description="mine now")
        assert bob.threads() == []  # the refused run wrote nothing
    assert "mine now" not in agent_files(deerflow_home)["config.yaml"]


def test_agents_cli_new_list_show_delete(setup, deerflow_home, capsys):
    from deerflow.cli import main

    config, _ = setup
    base = ["--config", str(config)]
    assert main([*base, "agents", "new", "ada", "a terse analyst", "--model", "boot", "--display-name", "Ada"]) == 0
    assert "→ setup_agent" in capsys.readouterr().out
    assert main([*base, "agents", "list"]) == 0
    listed = capsys.readouterr().out
    assert "ada" in listed and "Ada" in listed and "A terse analyst for quick data questions" in listed
    assert main([*base, "agents", "show", "ada"]) == 0
    assert "--- SOUL.md ---\nYou are Ada" in capsys.readouterr().out
    assert main([*base, "agents", "show", "ada", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["name"] == "ada" and shown["display_name"] == "Ada"
    assert main([*base, "agents", "delete", "ada"]) == 0
    assert main([*base, "agents", "show", "ada"]) == 1
    assert "unknown agent 'ada'" in capsys.readouterr().err

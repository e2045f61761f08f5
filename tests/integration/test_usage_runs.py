"""Token usage of runs against a real ChatOpenAI talking to the loopback OpenAI-compatible server.

The server reports fixed usage per answer (streamed as the ``include_usage`` chunk, as
real providers do), so the sums in events, ``RunResult.usage``, the run record and
``deerflow usage`` are exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deerflow.cli import main
from deerflow.client import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.openai_server import WAIT_TOOL, fixture_model_config, openai_server_fixture  # noqa: F401

pytestmark = pytest.mark.integration


def usage_config(tmp_path: Path, base_url: str, *, extra: str = "") -> Path:
    return fixture_model_config(tmp_path, base_url, extra=WAIT_TOOL + extra)


def tool_turn(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"tool_calls": [{"name": "wait", "args": {"seconds": 0}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


def text_turn(text: str, prompt_tokens: int, completion_tokens: int) -> dict:
    return {"text": text, "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


def test_usage_is_summed_per_run_and_shown_everywhere(deerflow_home, tmp_path, openai_server, monkeypatch, capsys):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    openai_server.add(tool_turn(100, 20), text_turn("Done waiting.", 150, 7), text_turn("Hi.", 10, 2))
    config = usage_config(tmp_path, openai_server.base_url)
    with DeerFlowClient(config_path=config, user_id="alice") as client:
        result = client.chat("Wait a moment")
        record = client._async._manager.run_record(result.run_id, "alice")
    assert result.status == "success", result.error
    assert all(r.body.get("stream_options", {}).get("include_usage") for r in openai_server.completions)
    expected = {"input_tokens": 250, "output_tokens": 27, "total_tokens": 277, "calls": 2, "unknown_calls": 0}
    assert {k: result.usage[k] for k in expected} == expected
    assert result.usage["by_model"]["fixture"]["total_tokens"] == 277
    assert result.usage["by_source"]["lead"]["calls"] == 2
    finished = result.events[-1]
    assert isinstance(finished, ev.RunFinished) and finished.usage == result.usage
    assert record.result["usage"]["total_tokens"] == 277

    # the CLI: --json carries it on run_finished, the terminal shows one line, `deerflow usage` sums it
    assert main(["--config", str(config), "--user", "alice", "run", "Say hi", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert lines[-1]["type"] == "run_finished" and lines[-1]["usage"]["total_tokens"] == 12
    assert main(["--config", str(config), "--user", "alice", "usage", "--by", "user", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [{"key": "alice", "runs": 2, "input_tokens": 260, "output_tokens": 29, "total_tokens": 289,
                     "calls": 3, "unknown_calls": 0}]
    assert main(["--config", str(config), "--user", "bob", "usage"]) == 0
    assert "no usage recorded" in capsys.readouterr().out  # bob sees his own figures only: none
    assert main(["--config", str(config), "--user", "alice", "usage", "--since", "yesterday"]) == 1
    assert "--since expects a date" in capsys.readouterr().err


def test_a_model_without_usage_data_is_unknown_not_zero(deerflow_home, tmp_path, openai_server, monkeypatch, capsys):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    openai_server.add({"text": "No numbers from me.", "usage": {}})
    config = usage_config(tmp_path, openai_server.base_url)
    assert main(["--config", str(config), "run", "Hello"]) == 0
    out = capsys.readouterr().out
    assert "tokens: unknown" in out
    assert main(["--config", str(config), "usage", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["total_tokens"] is None and row["unknown_calls"] == 1


def test_a_token_budget_stops_a_runaway_run_before_its_next_model_call(deerflow_home, tmp_path, openai_server,
                                                                       monkeypatch):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    openai_server.add(tool_turn(400, 200), tool_turn(400, 200), tool_turn(400, 200), text_turn("never", 1, 1))
    config = usage_config(tmp_path, openai_server.base_url, extra="limits:\n  max_tokens_per_run: 1000\n")
    with DeerFlowClient(config_path=config) as client:
        result = client.chat("Loop for ever")
    assert result.status == "stopped" and result.stopped_by == "token_budget"
    assert "max_tokens_per_run" in (result.error or "")
    assert len(openai_server.completions) == 2  # 600, then 1,200 >= 1,000: the third call never went out
    assert [e.name for e in result.events if isinstance(e, ev.ToolResult)] == ["wait", "wait"]  # no tool was cut
    assert result.usage["total_tokens"] == 1200


def test_a_subagents_model_calls_are_counted_and_attributed_to_it(deerflow_home, tmp_path):
    script = """
turns:
  - tool_calls: [{name: task, args: {prompt: "CHILD go", subagent_type: general-purpose}}]
  - "All delegated."
conversations:
  - {match: CHILD, turns: ["child done"]}
"""
    config = tmp_path / "config.yaml"
    config.write_text("models:\n  - name: scripted\n    use: deerflow.models.scripted:ScriptedChatModel\n"
                      "    script: |\n" + "".join(f"      {line}\n" for line in script.strip().splitlines())
                      + "subagents:\n  enabled: true\n")
    with DeerFlowClient(config_path=config) as client:
        result = client.chat("go")
    assert result.status == "success", result.error
    sources = result.usage["by_source"]
    assert sources["lead"]["calls"] == 2
    assert sources["subagent:general-purpose"]["calls"] == 1
    assert result.usage["calls"] == 3
    assert result.usage["total_tokens"] == sum(s["total_tokens"] for s in sources.values())


def test_a_spent_daily_budget_refuses_the_next_run_in_one_line(deerflow_home, tmp_path, openai_server, monkeypatch,
                                                                 capsys):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    openai_server.add(tool_turn(100, 20), text_turn("Done waiting.", 150, 7))
    config = usage_config(tmp_path, openai_server.base_url, extra="usage:\n  daily_token_budget: 1\n")
    # the run that spends the budget is not cut: its tool call and final answer both happen
    assert main(["--config", str(config), "--user", "alice", "run", "Wait a moment", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert lines[-1]["status"] == "success" and lines[-1]["usage"]["total_tokens"] == 277
    served = len(openai_server.completions)

    assert main(["--config", str(config), "--user", "alice", "run", "Again"]) == 4
    captured = capsys.readouterr()
    problem = captured.err.strip().splitlines()
    assert problem == ["deerflow: daily token budget spent: alice used 277 of 1 tokens today "
                       "(usage.daily_token_budget); new runs are accepted again after 00:00 UTC"], captured.err
    assert "Traceback" not in captured.out + captured.err
    assert len(openai_server.completions) == served  # refused before any model call
    # bob's budget is his own
    openai_server.add(text_turn("Hi bob.", 3, 2))
    assert main(["--config", str(config), "--user", "bob", "run", "Hello"]) == 0

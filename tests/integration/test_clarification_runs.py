"""Clarification and interaction modes end to end: embedded client, run manager, CLI, scripted model."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.client import AsyncDeerFlowClient
from deerflow.errors import ConfigError, UserError
from deerflow.run_options import RunOptions
from deerflow.runs.manager import RunRequest
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log

SCRIPT = """
      turns:
        - text: "I need a few details first."
          tool_calls:
            - name: ask_clarification
              id: ask_1
              args:
                question: "How should I analyse the sales data?"
                clarification_type: missing_info
                context: "There are two CSV files and no stated period."
                fields:
                  - {name: dataset, label: Dataset, type: text, required: true, placeholder: sales.csv}
                  - {name: notes, label: Notes, type: textarea}
                  - {name: top_n, label: Top N, type: number}
                  - {name: chart, label: Chart, type: select, options: [bar, line]}
                  - {name: metrics, label: Metrics, type: multi_select, options: [revenue, margin, cost], required: true}
                  - {name: include_raw, label: Include raw data, type: checkbox}
                  - {name: start, label: Start date, type: date, required: true}
        - "Analysis finished with the chosen settings."
"""


@pytest.fixture
def setup(deerflow_home: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A config whose model plays SCRIPT and logs every call; returns (config, log)."""
    log = tmp_path / "model-calls.jsonl"
    config = tmp_path / "config.yaml"
    config.write_text(f"""
models:
  - name: scripted
    use: fixtures.logging_model:LoggingScriptedModel
    log: {log}
    script: |
{SCRIPT}
""")
    return config, log


def events_of(result, kind):
    return [e for e in result.events if isinstance(e, kind)]


def test_interactive_form_round_trip(setup):
    config, log = setup
    with DeerFlowClient(config_path=config) as client:
        asked = client.chat("Analyse my sales")
        assert asked.status == "interrupted"
        (clarification,) = events_of(asked, ev.Clarification)
        request = clarification.request
        assert request["version"] == 2 and request["kind"] == "human_input_request"
        assert request["input_mode"] == "form" and request["request_id"] == "clarification:ask_1"
        assert [(f["name"], f["type"]) for f in request["fields"]] == [
            ("dataset", "text"), ("notes", "textarea"), ("top_n", "number"), ("chart", "select"),
            ("metrics", "multi_select"), ("include_raw", "checkbox"), ("start", "date")]
        assert "How should I analyse the sales data?" in clarification.text  # readable fallback
        assert asked.clarification == request
        assert client.pending_clarification(asked.thread_id) == request
        assert len(read_log(log)) == 1  # the run stopped at the question

        done = client.reply(asked.thread_id, {"dataset": "sales.csv", "metrics": ["revenue", "margin"],
                                              "start": "2025-01-31", "include_raw": True})
        assert done.status == "success" and done.text == "Analysis finished with the chosen settings."
        messages = client.thread(asked.thread_id).messages
        assert client.pending_clarification(asked.thread_id) is None
    summary = "Dataset: sales.csv\nMetrics: revenue, margin\nInclude raw data: yes\nStart date: 2025-01-31"
    assert [m.type for m in messages] == ["human", "ai", "tool", "human", "ai"]
    assert messages[3].text == summary
    shown = read_log(log)[-1]["messages"]
    assert shown[-1] == {"type": "human", "text": summary}  # what the model read in the next run
    assert shown[-2]["type"] == "tool" and "How should I analyse" in shown[-2]["text"]


@pytest.mark.parametrize(("answer", "needle"), [
    ({"dataset": "sales.csv", "start": "2025-01-31"}, "field 'metrics' (Metrics) is required"),
    ({"dataset": "sales.csv", "metrics": "revenue", "start": "31.01.2025"}, "field 'start' (Start date)"),
    ({"dataset": "sales.csv", "metrics": "profit", "start": "2025-01-31"}, "field 'metrics'"),
])
def test_a_bad_reply_is_refused_and_the_thread_is_unchanged(setup, answer, needle):
    config, log = setup
    with DeerFlowClient(config_path=config) as client:
        asked = client.chat("Analyse my sales")
        before = [m.id for m in client.thread(asked.thread_id).messages]
        with pytest.raises(UserError) as info:
            client.reply(asked.thread_id, answer)
        assert needle in str(info.value)
        assert [m.id for m in client.thread(asked.thread_id).messages] == before
        assert client.pending_clarification(asked.thread_id) is not None  # still waiting
    assert len(read_log(log)) == 1


@pytest.mark.parametrize("mode", ["scheduled", "webhook", "autonomous"])
def test_unattended_modes_never_offer_clarification_and_finish(setup, mode):
    config, log = setup
    with DeerFlowClient(config_path=config) as client:
        result = client.chat("Analyse my sales", interaction_mode=mode)
    assert result.status == "success" and result.clarification is None
    assert events_of(result, ev.RunStarted)[0].interaction_mode == mode
    (suppressed,) = [e for e in events_of(result, ev.ToolResult) if e.name == "ask_clarification"]
    assert suppressed.code == "clarification_unavailable" and "BLOCKED" in suppressed.text
    calls = read_log(log)
    assert len(calls) == 2 and all("ask_clarification" not in c["tools"] for c in calls)
    system = calls[0]["messages"][0]
    assert system["type"] == "system" and f"unattended ({mode})" in system["text"]


@pytest.mark.parametrize(("hint", "mode"), [
    ({"non_interactive": True}, "scheduled"),
    ({"channel_name": "github"}, "webhook"),
    ({"disable_clarification": True}, "autonomous"),
    ({"interaction_mode": "interactive", "non_interactive": True}, "interactive"),
])
def test_legacy_hints_pick_the_mode_and_are_never_persisted(setup, hint, mode):
    config, _ = setup

    async def scenario():
        async with AsyncDeerFlowClient(config_path=config) as client:
            result = await client.chat("Analyse my sales", **hint)
            manager = await client.manager()
            checkpoints = [c async for c in manager.checkpointer.alist({"configurable": {"thread_id": result.thread_id}})]
            record = await manager.store.aio.get_run(result.run_id, client.user_id)
            return result, checkpoints, record

    result, checkpoints, record = asyncio.run(scenario())
    assert events_of(result, ev.RunStarted)[0].interaction_mode == mode
    assert result.status == ("interrupted" if mode == "interactive" else "success")
    assert checkpoints
    for checkpoint in checkpoints:
        assert set(checkpoint.config["configurable"]) <= {"thread_id", "checkpoint_ns", "checkpoint_id"}
        assert not set(hint) & set(checkpoint.metadata)
    assert not set(hint) & set(record.options)


def test_an_unknown_mode_fails_before_the_run_starts(setup):
    config, log = setup
    with DeerFlowClient(config_path=config) as client:
        with pytest.raises(ConfigError, match="unknown interaction mode 'later'"):
            client.chat("Analyse my sales", interaction_mode="later")
        assert client.threads() == []
    assert read_log(log) == []


def test_a_public_request_with_internal_keys_is_refused(setup):
    config, _ = setup

    async def scenario():
        async with AsyncDeerFlowClient(config_path=config) as client:
            manager = await client.manager()
            with pytest.raises(UserError, match="disable_clarification"):
                await manager.start(RunRequest("hi", options=RunOptions(disable_clarification=True)))
            with pytest.raises(UserError, match="interaction_mode"):
                await manager.start(RunRequest("hi", options=RunOptions(interaction_mode="interactive"), trusted=False))
            public = await manager.start(RunRequest("hi", options=RunOptions(model_name="scripted")))
            return await public.wait(), await manager.store.aio.list_threads(client.user_id)

    finished, threads = asyncio.run(scenario())
    assert finished.status == "interrupted"  # a public request is interactive
    assert len(threads) == 1


def cli(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG"}}
    tests = str(Path(__file__).resolve().parents[1])
    env.update({"DEERFLOW_HOME": str(home), "PYTHONPATH": os.pathsep.join(filter(None, [tests, env.get("PYTHONPATH")]))})
    return subprocess.run([sys.executable, "-m", "deerflow.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_prints_the_form_and_replies_with_fields(setup, deerflow_home, tmp_path):
    config, _ = setup
    asked = cli("--config", str(config), "run", "Analyse my sales", home=deerflow_home, cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    out = asked.stdout
    assert "? How should I analyse the sales data?" in out
    assert "metrics      Metrics (required) — any of: revenue / margin / cost" in out
    assert "start        Start date (required) — a date, YYYY-MM-DD" in out
    thread = next(p.name for p in (deerflow_home / "users" / "local" / "threads").iterdir())
    assert f"reply with: deerflow reply {thread} --field dataset=... --field metrics=... --field start=..." in out
    assert "run finished: interrupted" in out

    bad = cli("--config", str(config), "reply", thread, "--field", "dataset=a.csv", "--field", "start=2025-01-31",
              home=deerflow_home, cwd=tmp_path)
    assert bad.returncode == 1 and "field 'metrics' (Metrics) is required" in bad.stderr
    assert "Traceback" not in bad.stderr

    good = cli("--config", str(config), "reply", thread, "--field", "dataset=a.csv", "--field", "metrics=revenue",
               "--field", "metrics=cost", "--field", "start=2025-01-31", home=deerflow_home, cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert "Analysis finished" in good.stdout and "run finished: success" in good.stdout

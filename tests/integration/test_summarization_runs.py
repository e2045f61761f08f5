"""Summarization keeps a thread usable past the model's context window.

The model is a scripted model with a hard window (``fixtures.windowed_model``):
a request larger than the window fails the way a provider's would.  Each step
writes a file with a long ``content`` argument, so the conversation outgrows the
window after a few steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from deerflow import DeerFlowClient
from deerflow.errors import UserError
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log

pytestmark = pytest.mark.integration

WINDOW = 800  # tokens of conversation the model accepts (one write step is ~185)
BODY = "The quarterly figures show steady growth across all regions. " * 8  # ~490 chars


def writing_turns(first: int, count: int, *, then: str) -> list[Any]:
    return [{"text": f"Writing part {i}.",
             "tool_calls": [{"name": "write_file",
                             "args": {"path": f"/mnt/user-data/workspace/part{i}.md", "content": f"{i}: {BODY}"}}]}
            for i in range(first, first + count)] + [then]


WRITING = [*writing_turns(0, 8, then="Wrote all eight parts."), *writing_turns(8, 3, then="Wrote three more.")]


def setup(tmp_path: Path, *, summarization: dict[str, Any] | None, turns: list[Any] = WRITING) -> tuple[Path, Path]:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"context_window": WINDOW, "turns": turns}))
    log = tmp_path / "calls.jsonl"
    config: dict[str, Any] = {"models": [{
        "name": "tiny", "use": "fixtures.windowed_model:WindowedScriptedModel",
        "script": str(script), "log": str(log),
    }]}
    if summarization is not None:
        config["summarization"] = summarization
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, log


def test_without_summarization_the_run_overflows(deerflow_home, tmp_path):
    config, _ = setup(tmp_path, summarization=None)
    with DeerFlowClient(config_path=config) as client:
        result = client.chat("Write the report in parts")
    assert result.status == "error"
    assert "context window" in (result.error or "")


def test_summarization_keeps_the_thread_usable(deerflow_home, tmp_path):
    config, log = setup(tmp_path, summarization={"enabled": True, "trigger_fraction": 0.5, "keep_messages": 2})
    with DeerFlowClient(config_path=config) as client:
        first = client.chat("Write the report in parts")
        second = client.chat("Now three more parts", first.thread_id)
        view = client.thread(first.thread_id)

    assert first.status == "success", first.error
    assert first.text == "Wrote all eight parts."
    assert second.status == "success", second.error and second.text == "Wrote three more."
    assert len(list(deerflow_home.glob("users/local/threads/*/user-data/workspace/part*.md"))) == 11

    summarized = [n for n in first.notices if n.kind == "context_summarized"]
    assert summarized and all(n.data["method"] == "extractive" for n in summarized)

    calls = read_log(log)
    late = calls[-1]["messages"]
    assert late[0]["type"] == "system" and "<conversation_summary>" in late[0]["text"]
    assert "Extractive summary" in late[0]["text"]
    sent = [m["text"] for m in late[1:]]
    assert "Write the report in parts" not in sent  # folded into the summary, not sent again
    assert len(sent) < 8

    # The stored history stays whole: every message is still in the thread.
    kinds = [m.type for m in view.messages]
    assert kinds.count("human") == 2 and kinds.count("ai") == 13 and kinds.count("tool") == 11
    assert view.values["summary_text"].startswith("[Extractive summary")


def test_compact_folds_a_thread_between_runs(deerflow_home, tmp_path):
    config, log = setup(tmp_path, summarization={"keep_messages": 2},
                        turns=["Planning.", "Chart added.", "You're welcome.", "Anything else?"])
    with DeerFlowClient(config_path=config) as client:
        thread = client.create_thread()
        nothing = client.compact(thread)
        for prompt in ("Plan the report", "Add a chart", "Thanks"):
            client.chat(prompt, thread)
        done = client.compact(thread)
        again = client.compact(thread)
        after = client.chat("Bye", thread)
        values = client.thread(thread).values

    assert (nothing.summarized, nothing.summary_text) == (0, None)
    assert done.summarized == 4 and done.kept == 2 and done.method == "extractive"
    assert "- user: Plan the report" in done.summary_text and "- assistant: Chart added." in done.summary_text
    assert (again.summarized, again.summary_text) == (0, done.summary_text)
    assert after.status == "success" and after.text == "Anything else?"

    last = read_log(log)[-1]["messages"]
    assert "- user: Plan the report" in last[0]["text"]  # the summary, in the system prompt
    assert [m["text"] for m in last[1:]] == ["Thanks", "You're welcome.", "Bye"]
    assert len(values["messages"]) == 8  # nothing removed from the thread
    assert values["summary_text"] == done.summary_text


def test_compacting_a_thread_with_an_active_run_is_refused(deerflow_home, tmp_path):
    turns = [{"text": "", "tool_calls": [{"name": "wait", "args": {"seconds": 60}}]}, "Done."]
    config, _ = setup(tmp_path, summarization=None, turns=turns)
    config.write_text(config.read_text() + "tools:\n- {name: wait, group: test, use: 'fixtures.slow_tools:wait'}\n")
    with DeerFlowClient(config_path=config) as client:
        stream = client.stream("Take your time")
        started = next(stream)
        assert isinstance(started, ev.RunStarted)
        next(e for e in stream if isinstance(e, ev.ToolCall))  # the run is now inside the slow tool
        with pytest.raises(UserError, match="active run"):
            client.compact(started.thread_id)
        assert client.cancel(started.run_id)
        list(stream)

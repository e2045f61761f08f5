"""The harness on a real OpenAI-compatible HTTP server: tool use, cancel, record and replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.openai_server import WAIT_TOOL, fixture_model_config, openai_server_fixture  # noqa: F401

pytestmark = pytest.mark.integration


def http_config(tmp_path: Path, base_url: str, *, extra: str = "") -> Path:
    return fixture_model_config(tmp_path, base_url, extra=extra)


WRITE_AND_PRESENT = [
    {"text": "Writing the report.", "tool_calls": [
        {"name": "write_file", "args": {"path": "/mnt/user-data/outputs/answer.md", "content": "# Answer\n42\n"}}]},
    {"tool_calls": [{"name": "read_file", "args": {"path": "/mnt/user-data/outputs/answer.md"}}]},
    {"tool_calls": [{"name": "present_files", "args": {"filepaths": ["/mnt/user-data/outputs/answer.md"]}}]},
    "The answer is 42; see answer.md.",
]


def test_multi_step_tool_run_through_chat_openai(deerflow_home, tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    openai_server.add(*WRITE_AND_PRESENT)
    with DeerFlowClient(config_path=http_config(tmp_path, openai_server.base_url)) as client:
        result = client.chat("What is the answer?")
        assert client.read_artifact(result.thread_id, "answer.md") == b"# Answer\n42\n"
    assert result.status == "success"
    assert result.text == "The answer is 42; see answer.md."
    assert result.artifacts == ["/mnt/user-data/outputs/answer.md"]
    first, last = openai_server.completions[0], openai_server.completions[-1]
    assert first.headers["authorization"] == "Bearer sk-fixture"
    assert {"write_file", "read_file", "present_files"} <= set(first.tool_names)
    tool_results = [m["content"] for m in last.messages if m["role"] == "tool"]
    assert any("42" in text for text in tool_results)  # the real file content went back to the model
    assert str(deerflow_home) not in str(last.body)  # host paths never reach the model


def test_cancel_mid_run_leaves_the_thread_usable(deerflow_home, tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    openai_server.add({"tool_calls": [{"name": "wait", "args": {"seconds": 60}}]}, "Recovered after the cancel.")
    tools = "tools:\n  - name: wait\n    group: test\n    use: fixtures.slow_tools:wait\n"
    with DeerFlowClient(config_path=http_config(tmp_path, openai_server.base_url, extra=tools)) as client:
        seen = []
        for event in client.stream("Do something slow"):
            seen.append(event)
            if isinstance(event, ev.ToolCall) and event.name == "wait":
                assert client.cancel(event.run_id) is True
        assert seen[-1].type == "run_finished" and seen[-1].status == "cancelled"
        second = client.chat("Carry on", seen[-1].thread_id)
    assert second.status == "success" and second.text == "Recovered after the cancel."
    messages = openai_server.completions[-1].messages
    call_ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    assert call_ids and set(call_ids) <= answered  # no dangling tool call reaches the provider
    patched = next(m for m in messages if m["role"] == "tool")
    assert "interrupted" in patched["content"]


def _signature(events: list) -> list[tuple]:
    keep = []
    for e in events:
        if isinstance(e, (ev.Message, ev.ToolCall, ev.ToolResult, ev.Artifact)):
            keep.append((e.type, getattr(e, "text", None), getattr(e, "name", None),
                         getattr(e, "args", None), getattr(e, "path", None)))
        elif isinstance(e, ev.RunFinished):
            keep.append((e.type, e.status, e.text, tuple(e.artifacts)))
    return keep


def test_record_then_replay_offline_gives_the_same_events(tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai_server.add(*WRITE_AND_PRESENT)
    cassette = tmp_path / "run.jsonl"
    (tmp_path / "a").mkdir()
    with DeerFlowClient(config_path=http_config(tmp_path / "a", openai_server.base_url),
                        home=tmp_path / "home-a") as client:
        recorded = client.chat("What is the answer?", record=str(cassette))
    served = len(openai_server.completions)
    with DeerFlowClient(config_path=http_config(tmp_path / "a", "http://127.0.0.1:9/v1"),
                        home=tmp_path / "home-b") as client:
        replayed = client.chat("What is the answer?", replay=str(cassette))
        assert client.read_artifact(replayed.thread_id, "answer.md") == b"# Answer\n42\n"
    assert len(openai_server.completions) == served  # the replay never touched the server
    assert recorded.status == replayed.status == "success"
    assert _signature(replayed.events) == _signature(recorded.events)
    assert len(cassette.read_text().splitlines()) == 4

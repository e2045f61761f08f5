"""A provider that numbers tool calls per response (``wait:0`` in every turn), then a cancelled run.

The OpenAI-compatible test server refuses (HTTP 400) any history with an unanswered tool
call, like real providers; the thread must stay usable after the cancel.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.openai_server import (  # noqa: F401
    WAIT_TOOL,
    fixture_model_config,
    openai_server_fixture,
    serve_openai,
)

pytestmark = pytest.mark.integration


def http_config(tmp_path: Path, base_url: str) -> Path:
    return fixture_model_config(tmp_path, base_url, extra=WAIT_TOOL)


def test_the_server_refuses_a_history_with_an_unanswered_tool_call():
    import httpx

    call = {"id": "wait:0", "type": "function", "function": {"name": "wait", "arguments": "{}"}}
    body = {"model": "fixture", "messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "", "tool_calls": [call]},
                                             {"role": "user", "content": "again"}]}
    with serve_openai(["unused"]) as server:
        refused = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=30)
        body["messages"].insert(2, {"role": "tool", "tool_call_id": "wait:0", "content": "ok"})
        accepted = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=30)
    assert refused.status_code == 400 and "wait:0" in refused.json()["error"]["message"]
    assert accepted.status_code == 200


def test_reused_call_ids_after_a_cancelled_run_keep_the_thread_usable(deerflow_home, tmp_path, openai_server,
                                                                      monkeypatch):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    openai_server.add(
        {"tool_calls": [{"name": "wait", "args": {"seconds": 0}, "id": "wait:0"}]}, "First turn done.",
        {"tool_calls": [{"name": "wait", "args": {"seconds": 60}, "id": "wait:0"}]},  # cancelled while waiting
        "Recovered after the cancel.",
    )
    config = http_config(tmp_path, openai_server.base_url)
    with DeerFlowClient(config_path=config) as client:
        first = client.chat("Wait a moment")
        assert first.status == "success", first.error
        seen = []
        for event in client.stream("Wait a long time", first.thread_id):
            seen.append(event)
            if isinstance(event, ev.ToolCall) and event.name == "wait":
                assert client.cancel(event.run_id) is True
        assert seen[-1].type == "run_finished" and seen[-1].status == "cancelled"
        third = client.chat("Carry on", first.thread_id)
    assert third.status == "success", third.error
    assert third.text == "Recovered after the cancel."
    last = openai_server.completions[-1].messages
    tool_answers = [m for m in last if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_answers] == ["wait:0", "wait:0"]
    assert "interrupted" in tool_answers[1]["content"]

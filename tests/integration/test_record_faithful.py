"""Recording changes nothing about the run, and a failure replays as the same failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.openai_server import OpenAIServer, RecordedRequest, openai_server_fixture  # noqa: F401

pytestmark = pytest.mark.integration

ANSWERS = [{"tool_calls": [{"name": "write_file", "args": {"path": "/mnt/user-data/outputs/a.md", "content": "A\n"}}]},
           "Wrote a.md."]


def config(folder: Path, base_url: str, *, entry: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(f"""
models:
  - name: fixture
    use: langchain_openai:ChatOpenAI
    model: fixture-model
    base_url: {base_url}
    api_key: sk-fixture
    max_retries: 0
{entry}""")
    return path


def request_shape(request: RecordedRequest) -> dict[str, Any]:
    """What the client asked for, without the conversation's volatile text (thread paths, dates)."""
    body = {k: v for k, v in request.body.items() if k != "messages"}
    body["roles"] = [m["role"] for m in request.messages]
    return body


@pytest.fixture(autouse=True)
def _no_key(monkeypatch, deerflow_home):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_recording_sends_the_same_requests_with_streaming_disabled(tmp_path, openai_server):
    entry = "    disable_streaming: true\n"
    openai_server.add(*ANSWERS, *ANSWERS)
    with DeerFlowClient(config_path=config(tmp_path / "plain", openai_server.base_url, entry=entry)) as client:
        plain = client.chat("Write a.md")
    with DeerFlowClient(config_path=config(tmp_path / "rec", openai_server.base_url, entry=entry)) as client:
        recorded = client.chat("Write a.md", record=str(tmp_path / "run.jsonl"))
    assert plain.status == recorded.status == "success"
    first, second = openai_server.completions[:2], openai_server.completions[2:]
    assert [request_shape(r) for r in second] == [request_shape(r) for r in first]
    assert all(r.body.get("stream") is False or "stream" not in r.body for r in openai_server.completions)


def test_a_failed_call_is_recorded_as_a_failure_and_replays_as_one(tmp_path, openai_server):
    cassette = tmp_path / "failed.jsonl"
    openai_server.add({"text": "unused", "fault": "empty"})
    with DeerFlowClient(config_path=config(tmp_path / "rec", openai_server.base_url)) as client:
        recorded = client.chat("Write a.md", record=str(cassette))
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert len(lines) == 1 and "response" not in lines[0]
    assert lines[0]["error"]["kind"] == "empty"

    served = len(openai_server.completions)
    with DeerFlowClient(config_path=config(tmp_path / "rep", "http://127.0.0.1:9/v1")) as client:
        replayed = client.chat("Write a.md", replay=str(cassette))
    assert len(openai_server.completions) == served  # the replay never touched the server
    assert recorded.status == replayed.status == "error"
    assert replayed.error == recorded.error and "the server sent no completion" in (replayed.error or "")
    assert [e.kind for e in replayed.events if isinstance(e, ev.Error)] == ["model"]

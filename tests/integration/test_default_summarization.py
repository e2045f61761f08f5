"""Summarization is on by default: a tool loop on a small-window model stays under the window.

The loopback server refuses (HTTP 400, like llama.cpp or vLLM) any request larger than its
context limit, counting the system prompt and tool schemas too.  The model entry says its
``context_window``; no ``summarization`` section is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.openai_server import OpenAIServer, openai_server_fixture, request_tokens  # noqa: F401

pytestmark = pytest.mark.integration

WINDOW = 8192
BODY = "Findings of the day, written out in full so that each part takes room. " * 28  # ~2,000 characters
TURNS = [{"tool_calls": [{"name": "write_file", "args": {"path": f"/mnt/user-data/workspace/part{i}.md",
                                                         "content": f"{i}: {BODY}"}}]} for i in range(14)]


def config(tmp_path: Path, server: OpenAIServer, *, summarization: str = "") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
default_model: local
models:
  - name: local
    use: langchain_openai:ChatOpenAI
    model: small-8k
    base_url: {server.base_url}
    api_key: sk-fixture
    max_retries: 0
    context_window: {WINDOW}
  - name: notes
    use: deerflow.models.scripted:ScriptedChatModel
    script: "turns: [never used]"
{summarization}""")
    return path


@pytest.fixture(autouse=True)
def _no_key(monkeypatch, deerflow_home):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_without_summarization_the_tool_loop_ends_in_a_provider_400(tmp_path, openai_server):
    openai_server.context_limit = WINDOW
    openai_server.add(*TURNS, "Wrote every part.")
    with DeerFlowClient(config_path=config(tmp_path, openai_server, summarization="summarization:\n  enabled: false\n")) as client:
        result = client.chat("Write the report in parts")
    assert result.status == "error"
    assert "longer than the model's context window" in (result.error or "")


def test_by_default_the_thread_is_summarized_before_the_window_is_reached(tmp_path, openai_server):
    openai_server.context_limit = WINDOW
    openai_server.add(*TURNS, "Wrote every part.")
    extractive = "summarization:\n  model_name: notes\n"  # summaries by the offline model: extractive, no HTTP
    with DeerFlowClient(config_path=config(tmp_path, openai_server, summarization=extractive)) as client:
        result = client.chat("Write the report in parts")
    assert result.status == "success", result.error
    assert result.text == "Wrote every part."
    notices = [e for e in result.events if isinstance(e, ev.Notice) and e.kind == "context_summarized"]
    assert notices
    assert max(request_tokens(r.body) for r in openai_server.completions) <= WINDOW

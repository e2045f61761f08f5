"""A real ChatOpenAI drives a real agent loop over HTTP against the loopback fixture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI

from fixtures.openai_server import (
    OpenAIServer,
    openai_server_fixture,  # noqa: F401  (registers the fixture)
    serve_openai,
)

pytestmark = pytest.mark.integration

REPLIES = [
    {
        "text": "Writing it down.",
        "tool_calls": [
            {"name": "save_note", "args": {"name": "todo.txt", "text": "buy milk"}},
        ],
    },
    {"tool_calls": [{"name": "read_note", "args": {"name": "todo.txt"}, "id": "call_read"}]},
    "Your note says: buy milk. It is saved as todo.txt.",
]


def note_tools(folder: Path) -> list[BaseTool]:
    """Two small real tools working on ``folder``."""

    @tool
    def save_note(name: str, text: str) -> str:
        """Save a note under a name."""
        (folder / name).write_text(text, encoding="utf-8")
        return f"saved {len(text)} characters to {name}"

    @tool
    def read_note(name: str) -> str:
        """Read a saved note."""
        return (folder / name).read_text(encoding="utf-8")

    return [save_note, read_note]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with serve_openai(REPLIES) as running:
        yield running


def make_agent(server: OpenAIServer, folder: Path, *, streaming: bool) -> Any:
    model = ChatOpenAI(
        base_url=server.base_url,
        api_key="test-key",
        model="fixture",
        streaming=streaming,
        max_retries=0,
    )
    return create_agent(model, note_tools(folder), system_prompt="You keep notes.")


def assert_tool_results_were_sent_back(server: OpenAIServer) -> None:
    sent = server.completions
    assert len(sent) == 3
    assert sent[0].headers["authorization"] == "Bearer test-key"
    assert sorted(sent[0].tool_names) == ["read_note", "save_note"]
    assert [m["role"] for m in sent[0].messages] == ["system", "user"]

    second = sent[1].messages
    assert second[-2]["role"] == "assistant"
    call = second[-2]["tool_calls"][0]
    assert call["function"]["name"] == "save_note"
    assert json.loads(call["function"]["arguments"]) == {"name": "todo.txt", "text": "buy milk"}
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": "saved 8 characters to todo.txt",
    }

    third = sent[2].messages
    assert third[-1]["role"] == "tool"
    assert third[-1]["tool_call_id"] == "call_read"
    assert third[-1]["content"] == "buy milk"


def test_non_streaming_run_uses_the_tools_and_answers(server: OpenAIServer, tmp_path: Path) -> None:
    agent = make_agent(server, tmp_path, streaming=False)

    result = agent.invoke({"messages": [HumanMessage("Remember to buy milk")]})

    assert (tmp_path / "todo.txt").read_text() == "buy milk"
    final = result["messages"][-1]
    assert isinstance(final, AIMessage)
    assert final.content == "Your note says: buy milk. It is saved as todo.txt."
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert all(not r.body.get("stream") for r in server.completions)
    assert_tool_results_were_sent_back(server)


def test_streaming_run_delivers_tokens_and_tool_calls(server: OpenAIServer, tmp_path: Path) -> None:
    agent = make_agent(server, tmp_path, streaming=True)

    chunks: list[AIMessageChunk] = []
    tool_outputs: list[str] = []
    for message, metadata in agent.stream(
        {"messages": [HumanMessage("Remember to buy milk")]}, stream_mode="messages"
    ):
        if isinstance(message, AIMessageChunk):
            assert metadata["langgraph_node"] == "model"
            chunks.append(message)
        elif message.type == "tool":
            tool_outputs.append(message.content)

    assert (tmp_path / "todo.txt").read_text() == "buy milk"
    assert tool_outputs == ["saved 8 characters to todo.txt", "buy milk"]
    final_chunks = [c for c in chunks if c.id == chunks[-1].id]
    assert len(final_chunks) > 2  # the answer arrived in pieces
    assert "".join(c.content for c in final_chunks) == REPLIES[2]
    streamed_calls = [tc["name"] for c in chunks for tc in c.tool_call_chunks if tc.get("name")]
    assert streamed_calls == ["save_note", "read_note"]
    assert all(r.body.get("stream") for r in server.completions)
    assert_tool_results_were_sent_back(server)


def test_the_pytest_fixture_serves_queued_replies_and_lists_models(
    openai_server: OpenAIServer,
) -> None:
    openai_server.add("Queued after start.")
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="test-key", max_retries=0)

    assert [m.id for m in client.models.list()] == ["fixture"]
    reply = client.chat.completions.create(
        model="fixture", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "Queued after start."
    with pytest.raises(openai.BadRequestError, match="no scripted reply left"):
        client.chat.completions.create(model="fixture", messages=[{"role": "user", "content": "?"}])
    assert [r.path for r in openai_server.requests] == ["/v1/models", *["/v1/chat/completions"] * 2]

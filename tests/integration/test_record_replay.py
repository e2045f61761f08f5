"""A run recorded against a real HTTP model replays offline, elsewhere, on another day."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI

from deerflow.models.cassette import CassetteError, CassetteMissError, ConversationNormalizer
from deerflow.models.replay import RecordingChatModel, ReplayChatModel
from fixtures.openai_server import serve_openai

pytestmark = pytest.mark.integration

REPLIES = [
    {
        "text": "Saving your note.",
        "tool_calls": [
            {"name": "save_note", "args": {"name": "todo.txt", "text": "buy milk"}},
        ],
    },
    {"tool_calls": [{"name": "read_note", "args": {"name": "todo.txt"}}]},
    "Done: todo.txt says buy milk.",
]
ASK = "Remember to buy milk"


def note_tools(folder: Path, *, saved: str) -> list[BaseTool]:
    """Real tools whose results mention the (per-run) folder."""

    @tool
    def save_note(name: str, text: str) -> str:
        """Save a note under a name."""
        (folder / name).write_text(text, encoding="utf-8")
        return f"{saved} {folder / name}"

    @tool
    def read_note(name: str) -> str:
        """Read a saved note."""
        return (folder / name).read_text(encoding="utf-8")

    return [save_note, read_note]


def run(
    model: Any,
    folder: Path,
    *,
    today: str,
    streaming: bool,
    ask: str = ASK,
    saved: str = "saved to",
) -> tuple[list[BaseMessage], list[AIMessageChunk]]:
    """One agent run; the system prompt holds the folder and the date, like the real one.

    Returns the final messages and, when streaming, the AI chunks that were streamed.
    """
    folder.mkdir(parents=True, exist_ok=True)
    prompt = f"You keep notes in {folder}. Today is {today}."
    agent = create_agent(model, note_tools(folder, saved=saved), system_prompt=prompt)
    state = {"messages": [HumanMessage(ask)]}
    if not streaming:
        return agent.invoke(state)["messages"], []
    chunks: list[AIMessageChunk] = []
    final: dict[str, Any] = {}
    for mode, data in agent.stream(state, stream_mode=["messages", "values"]):
        if mode == "values":
            final = data
        elif isinstance(data[0], AIMessageChunk):
            chunks.append(data[0])
    return final["messages"], chunks


def visible(messages: list[BaseMessage]) -> list[tuple[str, str, list[tuple[str, Any]]]]:
    """What a reader sees: roles, text (file name only for paths) and tool calls."""
    return [
        (
            m.type,
            m.text.rsplit("/", 1)[-1] if isinstance(m, ToolMessage) else m.text,
            [(c["name"], c["args"]) for c in m.tool_calls] if isinstance(m, AIMessage) else [],
        )
        for m in messages
    ]


def record(tmp_path: Path, *, streaming: bool) -> tuple[Path, list[BaseMessage]]:
    cassette = tmp_path / "cassettes" / "notes.jsonl"
    with serve_openai(REPLIES) as server:
        chat = ChatOpenAI(
            base_url=server.base_url, api_key="test-key", model="fixture", max_retries=0
        )
        model = RecordingChatModel(chat, cassette)
        messages, _ = run(model, tmp_path / "first-home", today="2025-01-06", streaming=streaming)
        assert len(server.completions) == 3
    return cassette, messages


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
def test_replay_repeats_the_recorded_run_in_another_folder_and_day(
    tmp_path: Path, streaming: bool
) -> None:
    cassette, recorded = record(tmp_path, streaming=streaming)
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2]
    assert lines[2]["response"]["data"]["content"] == REPLIES[2]
    # Digests carry placeholders, not this machine's paths or today's date.
    assert all(str(tmp_path) not in line["digest"] for line in lines)
    assert "You keep notes in <tmp>. Today is <date>." in lines[0]["digest"]

    second_home = tmp_path / "elsewhere" / "second-home"
    replayed, chunks = run(
        ReplayChatModel(cassette), second_home, today="2026-11-30", streaming=streaming
    )

    assert (second_home / "todo.txt").read_text() == "buy milk"  # the tools really ran
    assert visible(replayed) == visible(recorded)
    assert replayed[-1].text == "Done: todo.txt says buy milk."
    if streaming:
        final = [c for c in chunks if c.id == chunks[-1].id]
        assert len(final) > 1
        assert "".join(c.text for c in final) == "Done: todo.txt says buy milk."


def test_a_changed_prompt_misses_and_points_at_the_closest_recording(tmp_path: Path) -> None:
    cassette, _ = record(tmp_path, streaming=False)
    first_key = json.loads(cassette.read_text().splitlines()[0])["key"]

    with pytest.raises(CassetteMissError) as info:
        run(
            ReplayChatModel(cassette),
            tmp_path / "b",
            today="2025-01-06",
            streaming=False,
            ask="Remember to buy bread",
        )

    error = info.value
    assert error.step == 0
    assert error.closest_key == first_key
    assert "step 0" in str(error)
    assert first_key[:16] in str(error)
    assert "- human: Remember to buy milk" in str(error)
    assert "+ human: Remember to buy bread" in str(error)


def test_a_tool_answering_differently_misses_at_that_step(tmp_path: Path) -> None:
    cassette, _ = record(tmp_path, streaming=False)
    second_key = json.loads(cassette.read_text().splitlines()[1])["key"]

    with pytest.raises(CassetteMissError) as info:
        run(
            ReplayChatModel(cassette),
            tmp_path / "c",
            today="2025-01-06",
            streaming=False,
            saved="stored at",
        )

    assert info.value.step == 1
    assert info.value.closest_key == second_key
    assert "stored at" in str(info.value)


def test_volatile_parts_do_not_change_the_key() -> None:
    normalizer = ConversationNormalizer()

    def conversation(run_id: str, when: str, home: str) -> list[BaseMessage]:
        call = {"name": "save", "args": {"path": f"{home}/out/report.md"}, "id": f"call_{run_id}"}
        return [
            SystemMessage(f"Date: {when}. Thread 0b6f7c1e-4f7a-4c1e-9d2b-1a2b3c4d5e6f"),
            HumanMessage("write the report"),
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"wrote {home}/out/report.md at 1733140000", tool_call_id=f"call_{run_id}"),
        ]

    one = normalizer.key(conversation("a1b2", "2024-12-02T10:00:00Z", "/tmp/pytest-1/x"), ["save"])
    two = normalizer.key(conversation("z9y8", "2025-06-30 08:15", "/tmp/tmpq1w2e3"), ["save"])
    other_file = normalizer.key(
        [
            *conversation("a1b2", "2024-12-02", "/tmp/x")[:3],
            ToolMessage("wrote /tmp/x/data.csv", tool_call_id="c"),
        ],
        ["save"],
    )

    assert one == two
    assert "<tmp>/report.md" in one[1]
    assert other_file[0] != one[0]
    assert (
        normalizer.key(conversation("a1b2", "2024-12-02", "/tmp/y"), ["save", "extra"])[0] != one[0]
    )


def test_missing_and_corrupt_cassettes_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "none.jsonl"
    with pytest.raises(CassetteError, match=r"none\.jsonl does not exist"):
        ReplayChatModel(missing)

    corrupt = tmp_path / "bad.jsonl"
    good = {
        "key": "k",
        "step": 0,
        "digest": "d",
        "response": {"type": "ai", "data": {"content": "hi"}},
    }
    corrupt.write_text(json.dumps(good) + "\n\n" + '{"key": "k2", "step": 1,' + "\n")
    with pytest.raises(CassetteError, match=r"bad\.jsonl line 3: invalid JSON"):
        ReplayChatModel(corrupt)

    corrupt.write_text(json.dumps({"key": "k", "step": 0, "response": good["response"]}) + "\n")
    with pytest.raises(CassetteError, match=r"line 1: missing digest"):
        ReplayChatModel(corrupt)


async def test_async_runs_record_and_replay_too(tmp_path: Path) -> None:
    cassette = tmp_path / "async.jsonl"
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    state = {"messages": [HumanMessage(ASK)]}
    with serve_openai(REPLIES) as server:
        chat = ChatOpenAI(
            base_url=server.base_url, api_key="test-key", model="fixture", max_retries=0
        )
        recorder = create_agent(RecordingChatModel(chat, cassette), note_tools(first, saved="ok"))
        streamed = [
            data
            async for data in recorder.astream(state, stream_mode="messages")
            if isinstance(data[0], AIMessageChunk)
        ]

    replayer = create_agent(ReplayChatModel(cassette), note_tools(second, saved="ok"))
    replayed = (await replayer.ainvoke(state))["messages"]

    assert streamed  # the recording run streamed over HTTP
    assert len(cassette.read_text().splitlines()) == 3
    assert (second / "todo.txt").read_text() == "buy milk"
    assert replayed[-1].text == "Done: todo.txt says buy milk."

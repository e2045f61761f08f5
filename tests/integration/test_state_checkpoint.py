"""ThreadState through ``create_agent`` and the SQLite checkpointers.

What a user would notice: a thread keeps its messages and reduced fields when
the database is reopened, its history can be browsed, and its checkpoint file
grows with the conversation instead of with (steps x conversation).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Required

import aiosqlite
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import TodoListMiddleware
from langchain.agents.middleware.types import AgentState
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from deerflow.agents.message_reducer import merge_message_writes
from deerflow.agents.thread_state import ThreadState

pytestmark = pytest.mark.integration

CONFIG = {"configurable": {"thread_id": "thread-1"}, "recursion_limit": 2_000}


class LoopingToolModel(BaseChatModel):
    """Calls ``present`` ``rounds`` times per user turn, then answers ``done``.

    The reply depends only on the conversation, so a fresh instance continues a
    thread reloaded from disk exactly as the original would.
    """

    rounds: int = 3
    text_size: int = 0

    @property
    def _llm_type(self) -> str:
        return "looping-tool-model"

    def bind_tools(self, tools: Any, **kwargs: Any) -> LoopingToolModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        turn_start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        calls = sum(isinstance(m, AIMessage) for m in messages[turn_start:])
        if calls < self.rounds:
            message = AIMessage(
                content="a" * self.text_size,
                tool_calls=[
                    {
                        "name": "present",
                        "args": {"path": f"/mnt/user-data/outputs/r{calls % 2}.md"},
                        "id": f"call-{len(messages)}",
                    }
                ],
            )
        else:
            message = AIMessage(content="done")
        return ChatResult(generations=[ChatGeneration(message=message)])


def make_present(result_size: int = 0) -> Any:
    @tool
    def present(path: str, runtime: ToolRuntime) -> Command:
        """Present an output file to the user."""
        content = ("t" * result_size) or f"presented {path}"
        return Command(
            update={
                "artifacts": [path],
                "messages": [ToolMessage(content, tool_call_id=runtime.tool_call_id)],
            }
        )

    return present


def make_agent(
    checkpointer: Any, *, schema: type = ThreadState, plain: bool = False, **model: Any
) -> Any:
    """The agent under test; ``plain`` drops the middleware (fewer steps per round)."""
    return create_agent(
        LoopingToolModel(**model),
        [make_present(model.get("text_size", 0))],
        state_schema=schema,
        middleware=[] if plain else [TodoListMiddleware()],
        checkpointer=checkpointer,
    )


def summary(messages: list[BaseMessage]) -> list[tuple[str, str | None, Any]]:
    return [(m.type, m.id, m.content) for m in messages]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints.sqlite"


@pytest.fixture
def open_saver(db_path: Path) -> Iterator[Any]:
    """Open a SqliteSaver on ``db_path``; every connection is closed at teardown."""
    connections: list[sqlite3.Connection] = []

    def _open() -> SqliteSaver:
        connections.append(sqlite3.connect(db_path, check_same_thread=False))
        return SqliteSaver(connections[-1])

    yield _open
    for connection in connections:
        connection.close()


def test_thread_state_owns_the_messages_channel() -> None:
    # TodoListMiddleware declares its own AgentState (messages via add_messages);
    # the explicit state_schema is resolved last and must win.
    agent = make_agent(None)
    channel = agent.builder.channels["messages"]
    assert isinstance(channel, DeltaChannel)
    assert channel.reducer is merge_message_writes
    assert isinstance(agent.channels["messages"], DeltaChannel)
    assert "todos" in agent.builder.channels


def test_multi_step_run_survives_reopening_the_database(open_saver: Any) -> None:
    first = make_agent(open_saver())
    result = first.invoke({"messages": [HumanMessage("make a report", id="h1")]}, CONFIG)
    assert len(result["messages"]) == 8  # human, 3 x (call, result), answer

    reopened = make_agent(open_saver())
    state = reopened.get_state(CONFIG)
    assert summary(state.values["messages"]) == summary(result["messages"])
    assert state.values["artifacts"] == [
        "/mnt/user-data/outputs/r0.md",
        "/mnt/user-data/outputs/r1.md",
    ]
    history = list(reopened.get_state_history(CONFIG))
    lengths = [len(snapshot.values.get("messages", [])) for snapshot in history]
    assert lengths[0] == 8
    assert lengths == sorted(lengths, reverse=True)
    assert 1 in lengths

    follow_up = reopened.invoke({"messages": [HumanMessage("again", id="h2")]}, CONFIG)
    assert summary(follow_up["messages"][:8]) == summary(result["messages"])
    assert len(follow_up["messages"]) == 16


def test_message_ids_are_stable_across_reads(open_saver: Any) -> None:
    agent = make_agent(open_saver(), rounds=1)
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, CONFIG)
    first = [m.id for m in agent.get_state(CONFIG).values["messages"]]
    again = [m.id for m in make_agent(open_saver()).get_state(CONFIG).values["messages"]]
    assert all(first)
    assert again == first


class FrequentSnapshots(ThreadState):
    """ThreadState with a snapshot every 3 message writes, to cross several."""

    messages: Required[
        Annotated[list[AnyMessage], DeltaChannel(merge_message_writes, snapshot_frequency=3)]
    ]


def test_reload_across_snapshots_and_removals_matches_the_live_thread(
    open_saver: Any, db_path: Path
) -> None:
    agent = make_agent(open_saver(), schema=FrequentSnapshots)
    agent.invoke({"messages": [HumanMessage("first", id="h1")]}, CONFIG)
    second_turn = [RemoveMessage(id="h1"), HumanMessage("second", id="h2")]
    live = agent.invoke({"messages": second_turn}, CONFIG)["messages"]
    assert "h1" not in [m.id for m in live]

    reloaded = make_agent(open_saver(), schema=FrequentSnapshots).get_state(CONFIG)
    assert summary(reloaded.values["messages"]) == summary(live)
    with_snapshot = [
        "messages" in checkpoint["channel_values"] for checkpoint in stored_checkpoints(db_path)
    ]
    assert any(with_snapshot)
    assert not all(with_snapshot)


def stored_checkpoints(db_path: Path) -> list[dict[str, Any]]:
    serde = JsonPlusSerializer()
    with sqlite3.connect(db_path) as connection:
        rows = connection.execute("SELECT type, checkpoint FROM checkpoints").fetchall()
    return [serde.loads_typed((kind, blob)) for kind, blob in rows]


async def test_async_saver_persists_reloads_and_lists_history(db_path: Path) -> None:
    async with aiosqlite.connect(db_path) as connection:
        agent = make_agent(AsyncSqliteSaver(connection))
        result = await agent.ainvoke({"messages": [HumanMessage("go", id="h1")]}, CONFIG)

    async with aiosqlite.connect(db_path) as connection:
        reopened = make_agent(AsyncSqliteSaver(connection))
        state = await reopened.aget_state(CONFIG)
        history = [snapshot async for snapshot in reopened.aget_state_history(CONFIG)]
        follow_up = await reopened.ainvoke({"messages": [HumanMessage("more", id="h2")]}, CONFIG)

    assert summary(state.values["messages"]) == summary(result["messages"])
    assert len(state.values["artifacts"]) == 2
    assert len(history[0].values["messages"]) == 8
    assert history[-1].values.get("messages", []) == []
    assert len(follow_up["messages"]) == 16


def stored_bytes(db_path: Path) -> int:
    """Bytes the saver wrote: checkpoint blobs, metadata and pending writes."""
    with sqlite3.connect(db_path) as connection:
        checkpoints = connection.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints"
        ).fetchone()[0]
        writes = connection.execute(
            "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes"
        ).fetchone()[0]
    return checkpoints + writes


def grow_thread(db_path: Path, schema: type, *, messages: int) -> tuple[int, int]:
    """Grow one thread to ``messages`` messages; return (stored bytes, message bytes)."""
    connection = sqlite3.connect(db_path, check_same_thread=False)
    try:
        agent = make_agent(
            SqliteSaver(connection),
            schema=schema,
            plain=True,
            rounds=(messages - 2) // 2,
            text_size=200,
        )
        config = {**CONFIG, "recursion_limit": 4 * messages}
        result = agent.invoke({"messages": [HumanMessage("go", id="h")]}, config)
    finally:
        connection.close()
    assert len(result["messages"]) == messages
    serde = JsonPlusSerializer()
    raw = sum(len(serde.dumps_typed(m)[1]) for m in result["messages"])
    return stored_bytes(db_path), raw


def test_checkpoint_storage_grows_linearly_with_messages(tmp_path: Path) -> None:
    # Threads of 200-character messages, once per message channel.
    delta, raw = grow_thread(tmp_path / "delta.sqlite", ThreadState, messages=400)
    full, _ = grow_thread(tmp_path / "full.sqlite", AgentState, messages=400)
    # ThreadState stores each message about once, plus ~1 KB of per-step
    # bookkeeping (channel versions); add_messages re-stores the history per step.
    assert delta < 6 * raw
    assert full > 6 * raw

    # Doubling the thread doubles ThreadState's storage, but ~quadruples add_messages'.
    delta_half, _ = grow_thread(tmp_path / "delta-half.sqlite", ThreadState, messages=200)
    full_half, _ = grow_thread(tmp_path / "full-half.sqlite", AgentState, messages=200)
    assert delta / delta_half < 2.5
    assert full / full_half > 3.5

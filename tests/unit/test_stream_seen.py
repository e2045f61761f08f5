"""The messages stream's "seen" bookkeeping: incremental on a growing thread, the same ids as LangGraph's walk."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.pregel._messages import StreamMessagesHandler

from deerflow.agents.message_reducer import merge_message_writes
from deerflow.runs import stream_seen

META = {"langgraph_node": "model", "langgraph_checkpoint_ns": "model:1"}


def node_start(handler: StreamMessagesHandler, state: Any, *, original: bool = False) -> None:
    hook = StreamMessagesHandler.on_chain_start
    hook = getattr(hook, "__wrapped__", hook) if original else hook
    hook(handler, {}, {"messages": state, "todos": None}, run_id=uuid.uuid4(), name="model", metadata=dict(META))


def grown(steps: int) -> list[Any]:
    """The channel values of a thread growing by two messages a step, then a fork and a replacement."""
    state: Any = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(50)]
    states = []
    for i in range(steps):
        state = merge_message_writes(state, [[AIMessage(f"a{i}", id=f"a{i}")], [HumanMessage(f"n{i}", id=f"n{i}")]])
        states.append(state)
    fork = merge_message_writes(states[-2], [[AIMessage("fork", id="fork")]])  # same lineage, another tail
    return [*states, fork, merge_message_writes(state, [[AIMessage("a0-again", id="a0")]])]


def test_the_incremental_walk_marks_exactly_what_langgraph_marks() -> None:
    stream_seen.install()
    states = grown(30)
    ours, theirs = StreamMessagesHandler(lambda c: None, subgraphs=False), StreamMessagesHandler(lambda c: None,
                                                                                                 subgraphs=False)
    for state in states:
        node_start(ours, state)
        node_start(theirs, state, original=True)
        assert ours.seen == theirs.seen
    assert "fork" in ours.seen  # a list that does not continue the remembered prefix is walked whole


def test_a_growing_thread_walks_only_its_new_messages() -> None:
    states = grown(30)
    handler = StreamMessagesHandler(lambda c: None, subgraphs=False)
    walked = [stream_seen.mark_seen(handler, state) for state in states[:30]]
    assert walked == [52] + [2] * 29  # the first list whole, then each step's two new messages
    assert stream_seen.mark_seen(handler, list(states[29])) == 110  # a plain list: LangGraph's whole walk

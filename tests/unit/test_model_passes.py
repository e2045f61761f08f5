"""BaseChatModel's per-call walks during a DeerFlow model call: the same results as LangChain's, reading only new messages."""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.language_models import chat_models
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from deerflow.agents import model_passes
from deerflow.agents.message_reducer import merge_message_writes
from deerflow.agents.model_passes import history_for_model

model_passes.install()
TRACE, NORMALIZE = chat_models._format_for_tracing, chat_models._normalize_messages
CONVERT = chat_models.BaseChatModel._convert_input
assert isinstance(TRACE, model_passes.PerMessageWalk) and isinstance(NORMALIZE, model_passes.PerMessageWalk)
WALKS = {"trace": TRACE, "normalize": NORMALIZE}
PIXEL = "iVBORw0KGgo="


def image_v1(i: int) -> HumanMessage:  # a v1 data block: the tracing walk rewrites it
    return HumanMessage([{"type": "text", "text": f"look {i}"}, {"type": "image", "base64": PIXEL, "mime_type": "image/png"}],
                        id=f"img{i}")


def image_v0(i: int) -> HumanMessage:  # a v0 block: the normalizing walk rewrites it
    return HumanMessage([{"type": "image", "source_type": "base64", "data": PIXEL, "mime_type": "image/png"}],
                        id=f"old{i}")


def thread() -> list[Any]:
    """Channel values of a growing thread with images of both kinds among plain messages."""
    state: Any = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(30)]
    out = []
    for i in range(12):
        extra = [image_v1(i)] if i % 4 == 1 else [image_v0(i)] if i % 4 == 3 else []
        state = merge_message_writes(state, [[AIMessage(f"a{i}", id=f"a{i}"), ToolMessage("r", tool_call_id=f"c{i}",
                                                                                              id=f"t{i}"), *extra]])
        out.append(state)
    return out


def requests(history: Any) -> list[list[Any]]:
    """What a model call may be asked with: the history with and without a system message and notes,
    an equal copy of one of its messages, a changed one, and an unrelated list."""
    system = SystemMessage("you are a bench")
    changed = list(history)  # a middle message edited into one the walks rewrite, and the reverse
    changed[3] = image_v1(3).model_copy(update={"id": changed[3].id})
    changed[-2] = HumanMessage("edited", id=changed[-2].id)
    equal = list(history)
    equal[5] = equal[5].model_copy()
    return [[system, *history], list(history), [system, *history, HumanMessage("note", id="note"), image_v1(99)],
            [system, *equal], [system, *changed], [system, *history[:-1]], [image_v0(7), HumanMessage("x")]]


def same(ours: list[Any], theirs: list[Any]) -> None:
    """Equal results, and each item the very input object exactly where LangChain's is."""
    assert ours == theirs
    assert [a is b for a, b in zip(ours, theirs, strict=True)] == [a is b for a, b in zip(theirs, theirs, strict=True)]


def test_each_walk_returns_what_langchain_returns() -> None:
    for history in thread():
        with history_for_model(history):
            for walk in WALKS.values():
                for request in requests(history):
                    ours, theirs = walk(request), walk.original(request)
                    assert ours == theirs
                    assert [o is r for o, r in zip(ours, request, strict=True)] == \
                        [t is r for t, r in zip(theirs, request, strict=True)]
    images = thread()[-1]
    assert sum(a is not b for a, b in zip(TRACE.original(images), images, strict=True)) == 6  # not vacuous: both kinds
    assert sum(a is not b for a, b in zip(NORMALIZE.original(images), images, strict=True)) == 3  # the v0 ones


def test_the_prompt_value_is_what_langchain_builds() -> None:
    for history in thread():
        with history_for_model(history):
            for request in requests(history):
                ours, theirs = CONVERT(None, request), CONVERT.__wrapped__(None, request)
                assert ours == theirs
                assert all(a is b for a, b in zip(ours.to_messages(), theirs.to_messages(), strict=True))
    tuples = [("user", "hi"), {"role": "assistant", "content": "yo"}]
    with history_for_model(thread()[0]):
        assert CONVERT(None, tuples) == CONVERT.__wrapped__(None, tuples)


def test_a_growing_thread_is_read_once() -> None:
    walk = model_passes.PerMessageWalk(TRACE.original)
    reads, states = [], thread()
    for history in states:
        before = walk.memo.walked
        with history_for_model(history):
            walk([SystemMessage("s"), *history])
        reads.append(walk.memo.walked - before)
    assert reads == [len(states[0])] + [len(b) - len(a) for a, b in itertools.pairwise(states)]


def test_outside_a_deerflow_model_call_langchain_walks_everything() -> None:
    history = thread()[-1]
    walk = model_passes.PerMessageWalk(TRACE.original)
    assert walk([SystemMessage("s"), *history]) == TRACE.original([SystemMessage("s"), *history])
    assert walk.memo.walked == 0
    with history_for_model(list(history)):  # a plain list has no lineage: nothing is remembered
        walk([SystemMessage("s"), *history])
    assert walk.memo.walked == 0
    with history_for_model(history):
        walk([SystemMessage("s"), *history])
    assert walk.memo.walked == len(history)

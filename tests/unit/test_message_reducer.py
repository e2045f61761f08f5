"""``merge_message_writes`` must behave exactly like folding ``add_messages``.

A thread rebuilt from its checkpoint replays stored writes through the batch
reducer; any divergence from ``add_messages`` would show up as a conversation
that reloads differently from how it was built.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from deerflow.agents.message_reducer import IndexedMessages, merge_message_writes

# --- Specs: plain data that builds fresh message objects for each side -------
# Both reducers stamp ids on message objects in place, so each side of a
# comparison must get its own objects.

IDS = st.sampled_from(["a", "b", "c"])
TEXT = st.sampled_from(["x", "y", "z"])
Spec = tuple[str, str | None, str]

MESSAGE_KINDS = ("human", "ai", "system", "chunk", "dict")
NO_ID_KINDS = ("tuple", "str")
# Weighted by repetition: removals of unknown ids fail the whole batch, so they
# must not dominate; "readd" (remove then re-add one id inside a single write)
# is the corner where deferred tombstones matter and only exists in list writes.
SINGLE_KINDS = (*MESSAGE_KINDS * 3, *NO_ID_KINDS, "remove", "remove_all")
LIST_KINDS = (*SINGLE_KINDS, "readd")


@st.composite
def op_specs(draw: st.DrawFn, *, kinds: tuple[str, ...] = SINGLE_KINDS) -> Spec:
    kind = draw(st.sampled_from(kinds))
    if kind in NO_ID_KINDS or kind == "remove_all":
        message_id = None
    elif kind in ("remove", "readd"):
        message_id = draw(IDS)
    else:
        message_id = draw(st.none() | IDS | IDS)
    return (kind, message_id, draw(TEXT))


WRITE = st.one_of(
    st.lists(op_specs(kinds=LIST_KINDS), max_size=5).map(lambda ops: ("list", ops)),
    op_specs().map(lambda op: ("single", op)),
)
STATE = st.lists(op_specs(kinds=MESSAGE_KINDS), max_size=5)


@st.composite
def write_batches(draw: st.DrawFn, *, min_size: int = 1) -> list[Any]:
    """A batch of writes; one in ten batches also carries a ``None`` write.

    ``None`` is kept rare because it fails the whole batch, and batches that
    fail early compare little else.
    """
    writes = draw(st.lists(WRITE, min_size=min_size, max_size=6))
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        writes.insert(draw(st.integers(min_value=0, max_value=len(writes))), ("none", None))
    return writes


def build_op(spec: Spec) -> Any:
    """Turn one op spec into the message-like a node would write."""
    kind, message_id, text = spec
    factories = {
        "human": lambda: HumanMessage(text, id=message_id),
        "ai": lambda: AIMessage(text, id=message_id),
        "system": lambda: SystemMessage(text, id=message_id),
        "chunk": lambda: AIMessageChunk(content=text, id=message_id),
        "dict": lambda: (
            {"role": "user", "content": text} | ({"id": message_id} if message_id else {})
        ),
        "tuple": lambda: ("ai", text),
        "str": lambda: text,
        "remove": lambda: RemoveMessage(id=message_id),
        "remove_all": lambda: RemoveMessage(id=REMOVE_ALL_MESSAGES),
    }
    return factories[kind]()


def build_write(write: tuple[str, Any]) -> Any:
    shape, payload = write
    if shape == "list":
        items: list[Any] = []
        for kind, message_id, text in payload:
            if kind == "readd":
                items += [RemoveMessage(id=message_id), HumanMessage(text, id=message_id)]
            else:
                items.append(build_op((kind, message_id, text)))
        return items
    if shape == "single":
        return build_op(payload)
    return None


@contextmanager
def deterministic_uuids() -> Iterator[None]:
    """Make both reducers draw missing ids from the same counter."""
    ids = (uuid.UUID(int=n) for n in itertools.count())
    with mock.patch.object(uuid, "uuid4", side_effect=lambda: next(ids)):
        yield


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """Run under fresh deterministic ids; return a comparable result or error type."""
    with deterministic_uuids():
        try:
            result = fn(*args)
        except (ValueError, NotImplementedError) as error:
            return ("error", type(error))
    return ("ok", [(type(m).__name__, m.model_dump()) for m in result])


def sequential(state: list[Any], writes: list[Any]) -> list[Any]:
    """The reference: one ``add_messages`` call per write, as a plain channel does."""
    for write in writes:
        state = add_messages(state, write)
    return state


@settings(max_examples=400, deadline=None)
@given(state=STATE, writes=write_batches())
def test_matches_sequential_add_messages(state: list[Spec], writes: list[Any]) -> None:
    expected = outcome(sequential, [build_op(s) for s in state], [build_write(w) for w in writes])
    actual = outcome(
        merge_message_writes, [build_op(s) for s in state], [build_write(w) for w in writes]
    )
    assert actual == expected


@settings(max_examples=300, deadline=None)
@given(state=STATE, writes=write_batches(min_size=2), data=st.data())
def test_batching_invariant(state: list[Spec], writes: list[Any], data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=1, max_value=len(writes) - 1))

    def in_two_batches(s: list[Any], ws: list[Any]) -> list[Any]:
        return merge_message_writes(merge_message_writes(s, ws[:cut]), ws[cut:])

    once = outcome(
        merge_message_writes, [build_op(s) for s in state], [build_write(w) for w in writes]
    )
    twice = outcome(in_two_batches, [build_op(s) for s in state], [build_write(w) for w in writes])
    assert twice == once


@settings(max_examples=300, deadline=None)
@given(state=STATE, writes=write_batches(min_size=2))
def test_one_write_per_merge_reusing_each_result_index_matches_add_messages(
        state: list[Spec], writes: list[Any]) -> None:
    """The per-step path: each merge starts from the previous result and reuses its index."""

    def step_by_step(s: list[Any], ws: list[Any]) -> list[Any]:
        for w in ws:
            s = merge_message_writes(s, [w])
        return s

    expected = outcome(sequential, [build_op(s) for s in state], [build_write(w) for w in writes])
    assert outcome(step_by_step, [build_op(s) for s in state], [build_write(w) for w in writes]) == expected


def test_a_result_changed_in_place_is_indexed_afresh() -> None:
    """The remembered index is trusted only while the list is as its merge left it."""
    first = merge_message_writes([], [[HumanMessage("a", id="a"), HumanMessage("b", id="b")]])
    assert isinstance(first, IndexedMessages) and first._fold_index is not None
    first.insert(0, HumanMessage("z", id="z"))  # someone edited the state list: positions moved
    merged = merge_message_writes(first, [[HumanMessage("b2", id="b")]])
    assert texts(merged) == [("z", "z"), ("a", "a"), ("b", "b2")]
    assert texts(first) == [("z", "z"), ("a", "a"), ("b", "b")]  # the input list is not modified


def test_a_copied_result_keeps_its_index_and_stays_a_plain_list_of_messages() -> None:
    import copy

    merged = merge_message_writes([], [[HumanMessage("a", id="a")]])
    clone = copy.copy(merged)
    assert clone == merged and clone is not merged and isinstance(clone, list)
    assert texts(merge_message_writes(clone, [[HumanMessage("b", id="b")]])) == [("a", "a"), ("b", "b")]
    assert texts(merged) == [("a", "a")]


# --- The corners spelled out, so a failure reads as a behaviour --------------


def texts(messages: list[Any]) -> list[tuple[str | None, str]]:
    return [(m.id, m.content) for m in messages]


def test_duplicate_id_replaces_in_place() -> None:
    state = [HumanMessage("q", id="1"), AIMessage("draft", id="2"), HumanMessage("q2", id="3")]
    merged = merge_message_writes(state, [[AIMessage("final", id="2")]])
    assert texts(merged) == [("1", "q"), ("2", "final"), ("3", "q2")]


def test_remove_then_readd_keeps_slot_only_within_one_write() -> None:
    state = [HumanMessage("a", id="1"), HumanMessage("b", id="2"), HumanMessage("c", id="3")]
    same_write = [[RemoveMessage(id="1"), HumanMessage("a2", id="1")]]
    next_write = [[RemoveMessage(id="1")], [HumanMessage("a2", id="1")]]
    assert texts(merge_message_writes(state, same_write))[0] == ("1", "a2")
    assert texts(merge_message_writes(state, next_write))[-1] == ("1", "a2")


def test_remove_all_keeps_only_what_follows_the_last_marker() -> None:
    state = [HumanMessage("old", id="1")]
    write = [
        RemoveMessage(id=REMOVE_ALL_MESSAGES),
        HumanMessage("lost", id="2"),
        RemoveMessage(id=REMOVE_ALL_MESSAGES),
        SystemMessage("summary", id="s"),
        HumanMessage("recent", id="r"),
    ]
    assert texts(merge_message_writes(state, [write])) == [("s", "summary"), ("r", "recent")]


def test_removing_an_unknown_id_raises() -> None:
    with pytest.raises(ValueError, match="doesn't exist"):
        merge_message_writes([HumanMessage("a", id="1")], [[RemoveMessage(id="nope")]])


def test_removing_twice_across_writes_raises() -> None:
    state = [HumanMessage("a", id="1")]
    with pytest.raises(ValueError, match="doesn't exist"):
        merge_message_writes(state, [[RemoveMessage(id="1")], [RemoveMessage(id="1")]])


def test_none_write_raises() -> None:
    with pytest.raises(ValueError, match="None"):
        merge_message_writes([], [[HumanMessage("a")], None])


def test_input_list_is_not_modified() -> None:
    state = [HumanMessage("a", id="1")]
    merge_message_writes(state, [[RemoveMessage(id="1")], [HumanMessage("b", id="2")]])
    assert texts(state) == [("1", "a")]


def test_raw_inputs_are_coerced_and_given_ids() -> None:
    merged = merge_message_writes([], [("user", "hi"), {"role": "assistant", "content": "yo"}])
    assert [(type(m), m.content) for m in merged] == [(HumanMessage, "hi"), (AIMessage, "yo")]
    assert all(m.id for m in merged)

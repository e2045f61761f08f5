"""create_agent's invalid-tool-call patch: incremental on a growing thread, the same list as LangChain's walk."""

from __future__ import annotations

from typing import Any

from langchain.agents import factory
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage

from deerflow.agents import invalid_calls
from deerflow.agents.message_reducer import merge_message_writes

ORIGINAL = invalid_calls.install().original


def bad_call(call_id: str | None) -> AIMessage:
    return AIMessage("", id=f"ai-{call_id}", invalid_tool_calls=[
        {"type": "invalid_tool_call", "id": call_id, "name": "echo", "args": "{oops", "error": "bad json"}])


def same(ours: list[Any], theirs: list[Any]) -> bool:
    """The same messages in the same order; the patch's own ToolMessages compared by content."""
    return len(ours) == len(theirs) and all(
        a is b or (isinstance(a, ToolMessage) and a.model_dump(exclude={"id"}) == b.model_dump(exclude={"id"}))
        for a, b in zip(ours, theirs, strict=True))


def states() -> list[Any]:
    """Channel values of a thread: growth, an invalid call, its answer, a fork, a replacement, a removal."""
    state: Any = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(40)]
    out = []
    for i in range(20):
        state = merge_message_writes(state, [[AIMessage(f"a{i}", id=f"a{i}")], [HumanMessage(f"n{i}", id=f"n{i}")]])
        out.append(state)
    base = state
    state = merge_message_writes(state, [[bad_call("c1")]])  # unanswered: LangChain inserts an error reply
    out.append(state)
    state = merge_message_writes(state, [[HumanMessage("later", id="later")]])
    out.append(state)
    state = merge_message_writes(state, [[ToolMessage("done", tool_call_id="c1", id="t1")]])  # answered later on
    out.append(state)
    out.append(merge_message_writes(state, [[HumanMessage("more", id="more")]]))
    out.append(merge_message_writes(base, [[bad_call(None)]]))  # a fork of the same lineage; an id-less call
    replaced = merge_message_writes(base, [[bad_call("c2").model_copy(update={"id": "a3"})]])  # in place
    out.append(replaced)
    out.append(merge_message_writes(replaced, [[HumanMessage("x", id="x")]]))
    out.append(merge_message_writes(state, [[RemoveMessage(id="t1")]]))  # the answer removed again
    return out


def test_the_incremental_patch_returns_exactly_what_langchain_returns() -> None:
    patch = invalid_calls.InvalidCallPatch(ORIGINAL)
    for state in states():
        ours, theirs = patch(state), ORIGINAL(state)
        assert same(ours, theirs), [getattr(m, "id", None) for m in theirs]
        assert type(ours) is list and ours is not state
    unanswered = states()[20]
    assert len(ORIGINAL(unanswered)) == len(unanswered) + 1  # the case above is not vacuous: LangChain did patch one


def test_a_growing_thread_reads_only_its_new_messages() -> None:
    patch = invalid_calls.InvalidCallPatch(ORIGINAL)
    read, grown = [], states()
    for state in grown[:20]:
        before = patch.memo.walked
        patch(state)
        read.append(patch.memo.walked - before)
    assert read == [42] + [2] * 19  # the first list whole, then each step's two new messages
    before = patch.memo.walked
    assert same(patch(list(grown[19])), ORIGINAL(grown[19]))
    assert patch.memo.walked == before  # a plain list goes to LangChain's own walk


def test_a_replacement_in_place_is_read_afresh() -> None:
    patch = invalid_calls.InvalidCallPatch(ORIGINAL)
    grown = states()
    base, replaced = grown[19], grown[-3]
    patch(base)
    assert any(m.id == "a3" for m in base) and len(replaced) == len(base)
    assert len(patch(replaced)) == len(base) + 1  # the replaced message's invalid call is patched


def test_installed_in_the_model_node_once() -> None:
    first = invalid_calls.install()
    assert factory._patch_invalid_tool_calls is first and invalid_calls.install() is first

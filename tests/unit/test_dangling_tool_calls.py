"""Dangling tool calls are answered per response, even when a provider reuses ids across turns."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from deerflow.agents.middlewares.dangling_tool_calls import (
    INTERRUPTED,
    apply_patches,
    patch_dangling_tool_calls,
    scan,
)


def ai(*ids: str, n: int) -> AIMessage:
    return AIMessage(content="", id=f"ai{n}", tool_calls=[{"name": "bash", "args": {}, "id": i} for i in ids])


def tool(call_id: str, n: int) -> ToolMessage:
    return ToolMessage(content="ok", tool_call_id=call_id, name="bash", id=f"t{n}")


def human(n: int) -> HumanMessage:
    return HumanMessage(content="go", id=f"h{n}")


def unanswered(messages: list[AnyMessage]) -> list[str]:
    """What a provider would reject: calls not answered by the tool messages right after them."""
    missing = []
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage):
            answered = set()
            for later in messages[i + 1:]:
                if not isinstance(later, ToolMessage):
                    break
                answered.add(later.tool_call_id)
            missing += [c["id"] for c in m.tool_calls if c["id"] not in answered]
    return missing


def test_a_reused_id_answered_in_an_earlier_turn_still_gets_a_placeholder():
    history = [human(0), ai("bash:0", n=1), tool("bash:0", 1), AIMessage(content="done", id="ai2"),
               human(3), ai("bash:0", n=4),  # cancelled here: no answer
               human(5)]
    patched = patch_dangling_tool_calls(history)
    assert unanswered(history) == ["bash:0"]
    assert unanswered(patched) == []
    placeholder = patched[6]
    assert isinstance(placeholder, ToolMessage) and placeholder.content == INTERRUPTED
    assert placeholder.tool_call_id == "bash:0" and patched[7] is history[6]


def test_partly_answered_response_gets_placeholders_after_its_answers():
    history = [human(0), ai("a:0", "a:1", n=1), tool("a:0", 1), human(2)]
    patched = patch_dangling_tool_calls(history)
    assert [type(m).__name__ for m in patched] == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage",
                                                   "HumanMessage"]
    assert patched[3].tool_call_id == "a:1" and unanswered(patched) == []


def test_a_complete_history_is_returned_as_is():
    history = [human(0), ai("x:0", n=1), tool("x:0", 1), ai("x:0", n=2), tool("x:0", 2)]
    assert patch_dangling_tool_calls(history) is history


def test_incremental_scan_matches_a_full_scan_and_only_rescans_the_open_block():
    history: list[AnyMessage] = [human(0), ai("bash:0", n=1), human(2)]  # an old cancelled run
    memo, patches = scan(history)
    for step in range(3, 12):  # a run growing one response and its answer at a time
        history += [ai("bash:0", n=step), tool("bash:0", step)]
        memo, patches = scan(history, memo)
        assert apply_patches(history, patches) == patch_dangling_tool_calls(history)
        assert memo.settled == len(history) - 2  # settled up to the last response
    assert unanswered(apply_patches(history, patches)) == []


def test_a_rewritten_history_is_rescanned_from_the_start():
    history: list[AnyMessage] = [human(0), ai("a", n=1), tool("a", 1), ai("b", n=2), tool("b", 2)]
    memo, _ = scan(history)
    rewritten = [HumanMessage(content="summary", id="s"), ai("c", n=9), human(10)]  # summarization
    _, patches = scan(rewritten, memo)
    assert unanswered(apply_patches(rewritten, patches)) == []
    assert unanswered(rewritten) == ["c"]

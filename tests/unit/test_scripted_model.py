"""The embedded scripted model behaves like a provider model and plays its script."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from deerflow.models.scripted import (
    ModelError,
    ScriptedChatModel,
    ScriptError,
    ScriptExhaustedError,
    ScriptMismatchError,
)

HELLO = Path(__file__).resolve().parents[2] / "harness/deerflow/models/scripts/hello.yaml"

TWO_TURNS = """
name: two
context_window: 4096
turns:
  - text: I will look that up for you right away.
    tool_calls:
      - name: lookup
        args: {query: weather, days: 2}
      - name: lookup
        args: {query: news}
        id: my_id
  - The weather is fine and nothing much happened today.
"""


@tool
def lookup(query: str, days: int = 1) -> str:
    """Look something up."""
    return f"{query} for {days} days"


@tool
def other(x: int) -> int:
    """Another tool."""
    return x


def test_tool_calls_come_back_with_default_and_explicit_ids() -> None:
    model = ScriptedChatModel(script=TWO_TURNS).bind_tools([lookup])

    answer = model.invoke([HumanMessage("weather?")])

    assert answer.content == "I will look that up for you right away."
    assert [(c["name"], c["args"], c["id"]) for c in answer.tool_calls] == [
        ("lookup", {"query": "weather", "days": 2}, "call_0_0"),
        ("lookup", {"query": "news"}, "my_id"),
    ]
    assert answer.response_metadata["finish_reason"] == "tool_calls"


def test_streamed_chunks_add_up_to_the_invoked_message() -> None:
    model = ScriptedChatModel(script=TWO_TURNS, words_per_chunk=2).bind_tools([lookup])
    conversation = [HumanMessage("weather?")]

    invoked = model.invoke(conversation)
    chunks = list(model.stream(conversation))
    total = chunks[0]
    for chunk in chunks[1:]:
        total += chunk

    assert len(chunks) >= 4  # text arrives a few words at a time
    assert chunks[0].content == "I will"
    assert total.content == invoked.content
    assert total.tool_calls == invoked.tool_calls
    assert total.usage_metadata == invoked.usage_metadata


def test_an_async_stream_reads_the_conversation_once_off_the_loop_and_hops_once() -> None:
    """BaseChatModel's default ``_astream`` made one executor hop per chunk (six a tool-calling step)."""
    model = ScriptedChatModel(script=TWO_TURNS, words_per_chunk=1)
    conversation = [HumanMessage("weather?")]
    answered_in: list[int] = []
    real = model._answer

    def answer(*args, **kwargs):
        answered_in.append(threading.get_ident())
        return real(*args, **kwargs)

    object.__setattr__(model, "_answer", answer)

    async def stream() -> tuple[list, int]:
        hops = 0
        loop = asyncio.get_running_loop()
        plain = loop.run_in_executor

        def counted(*args, **kwargs):
            nonlocal hops
            hops += 1
            return plain(*args, **kwargs)

        loop.run_in_executor = counted  # type: ignore[method-assign]
        return [c async for c in model.astream(conversation)], hops

    chunks, hops = asyncio.run(stream())
    assert len(chunks) >= 4 and "".join(str(c.content) for c in chunks) == "I will look that up for you right away."
    assert hops == 1 and len(answered_in) == 1 and answered_in[0] != threading.get_ident()


def test_turn_is_chosen_from_the_conversation_not_from_the_instance() -> None:
    first = ScriptedChatModel(script=TWO_TURNS)
    answer = first.invoke([HumanMessage("weather?")])
    followup = [
        HumanMessage("weather?"),
        answer,
        ToolMessage("sunny", tool_call_id="call_0_0"),
        ToolMessage("quiet", tool_call_id="my_id"),
    ]

    rebuilt = ScriptedChatModel(script=TWO_TURNS)
    assert rebuilt.invoke(followup).content.startswith("The weather is fine")
    # A new thread starts over at turn 0, even on a model that already answered.
    assert rebuilt.invoke([HumanMessage("again")]).tool_calls[0]["id"] == "call_0_0"


def test_a_summarized_conversation_continues_after_the_latest_played_turn() -> None:
    model = ScriptedChatModel(script="- one\n- two\n- three\n")
    second = model.invoke([HumanMessage("a"), AIMessage("one"), HumanMessage("b")])
    # Older turns were replaced by a summary: only the latest answer is still there.
    summarized = [HumanMessage("summary of earlier talk"), second, HumanMessage("c")]

    assert second.content == "two"
    assert model.invoke(summarized).content == "three"


def test_running_out_of_script_says_how_long_it_is_and_what_was_asked() -> None:
    model = ScriptedChatModel(script="- only answer\n")

    with pytest.raises(ScriptExhaustedError) as info:
        model.invoke([HumanMessage("a"), AIMessage("x"), HumanMessage("b")])

    assert isinstance(info.value, ModelError)
    assert "has 1 turns" in str(info.value)
    assert "asks for turn 1" in str(info.value)


def test_expect_rejects_a_conversation_that_went_elsewhere() -> None:
    model = ScriptedChatModel(script=[{"text": "ok", "expect": "invoice"}])

    assert model.invoke([HumanMessage("summarize the invoice")]).content == "ok"
    with pytest.raises(ScriptMismatchError, match=r"turn 0 expects .*'invoice'.*'hello'"):
        model.invoke([HumanMessage("hello")])


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        ("turns: [ok\n  bad: : :", "invalid YAML"),
        ("- text: fine\n- {}\n", "turn 1: a turn needs 'text' and/or 'tool_calls'"),
        ("- fine\n- tool_calls: [{args: {a: 1}}]\n", "turn 1 tool call 0: missing tool 'name'"),
        (
            "- tool_calls: [{name: x, args: [1, 2]}]\n",
            "turn 0 tool call 0 (x): 'args' must be a mapping",
        ),
        ("- fine\n- fine\n- tool_call: [{name: x}]\n", "turn 2: unknown keys ['tool_call']"),
        ("[]", "non-empty list of turns"),
        ("context_window: -1\nturns: [hi]\n", "context_window must be a positive integer"),
    ],
)
def test_invalid_scripts_are_rejected_naming_the_turn(script: str, fragment: str) -> None:
    with pytest.raises(ScriptError) as info:
        ScriptedChatModel(script=script)
    assert fragment in str(info.value)


def test_missing_script_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ScriptError, match=r"nope\.yaml"):
        ScriptedChatModel.from_file(missing)


def test_calls_record_what_each_bound_copy_was_shown() -> None:
    model = ScriptedChatModel(script=TWO_TURNS)
    with_lookup = model.bind_tools([lookup], tool_choice="auto")
    with_both = model.bind_tools([lookup, other])

    with_lookup.invoke([SystemMessage("be brief"), HumanMessage("weather?")])
    with_both.invoke([HumanMessage("again")])

    assert [call.tools for call in model.calls] == [["lookup"], ["lookup", "other"]]
    assert model.calls[0].kwargs == {"tool_choice": "auto"}
    assert [m.text for m in model.calls[0].messages] == ["be brief", "weather?"]
    assert [call.turn for call in model.calls] == [0, 0]


def test_context_window_is_advertised_in_the_profile() -> None:
    assert ScriptedChatModel(script=TWO_TURNS).profile["max_input_tokens"] == 4096
    plain = ScriptedChatModel(script="- hi\n")
    assert plain.context_window is None
    assert "max_input_tokens" not in plain.profile
    assert ScriptedChatModel(script="- hi\n", context_window=100).profile["max_input_tokens"] == 100


def test_shipped_hello_script_writes_presents_and_answers() -> None:
    model = ScriptedChatModel.from_file(HELLO)

    write, present, final = model.turns
    assert write.tool_calls[0].name == "write_file"
    assert write.tool_calls[0].args["path"] == "/mnt/user-data/outputs/hello.md"
    assert write.tool_calls[0].args["content"]
    assert present.tool_calls[0].args == {"filepaths": ["/mnt/user-data/outputs/hello.md"]}
    assert final.text
    assert not final.tool_calls

"""The kept turn scan answers what the backward walk answers, for every prefix and every edit."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from deerflow.runtime.notes import NOTE_KEY
from deerflow.skills.activation import skill_manifest_name
from deerflow.skills.turn_scan import Turn, TurnScans


def reference(messages: Sequence[BaseMessage]) -> Turn:
    """The turn as the scan replaced it: walked back from the end to the latest user message whose
    predecessor is not a clarification answer (notes are not user messages), then read forward."""
    start = None
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if not isinstance(msg, HumanMessage) or msg.additional_kwargs.get(NOTE_KEY):
            continue
        start = i
        before = messages[i - 1] if i > 0 else None
        if not (isinstance(before, ToolMessage) and before.name == "ask_clarification"):
            break
    opener = messages[start] if start is not None else None
    turn = list(messages[start + 1:]) if start is not None else list(messages)
    wanted: dict[str, str] = {}
    read: list[str] = []
    for msg in turn:
        if isinstance(msg, AIMessage):
            for call in msg.tool_calls:
                name = skill_manifest_name(call["args"].get("path")) if call["name"] == "read_file" else None
                if name and call.get("id"):
                    wanted[call["id"]] = name
        elif (isinstance(msg, ToolMessage) and msg.tool_call_id in wanted and msg.status != "error"
              and wanted[msg.tool_call_id] not in read):
            read.append(wanted[msg.tool_call_id])
    return Turn(opener if isinstance(opener, HumanMessage) else None, tuple(read),
                any(isinstance(m, AIMessage) for m in turn))


def random_message(rng: random.Random, i: int) -> BaseMessage:
    kind = rng.choice(["human", "note", "ai_read", "ai_other", "tool_ok", "tool_error", "clarification"])
    if kind == "human":
        return HumanMessage(rng.choice(["hi", "/alpha go", "/beta", "plain"]))
    if kind == "note":
        return HumanMessage("<reminder/>", additional_kwargs={NOTE_KEY: "uploads"})
    if kind == "ai_read":
        name = rng.choice(["alpha", "beta", "gamma"])
        return AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": f"/mnt/skills/{name}/SKILL.md"},
                                          "id": f"c{rng.randrange(6)}"}])
    if kind == "ai_other":
        return AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "ls"}, "id": f"c{rng.randrange(6)}"}])
    if kind == "clarification":
        return ToolMessage("answer me", tool_call_id=f"c{rng.randrange(6)}", name="ask_clarification")
    return ToolMessage("ok", tool_call_id=f"c{rng.randrange(6)}", name="read_file",
                       status="error" if kind == "tool_error" else "success")


@pytest.mark.parametrize("seed", range(40))
def test_a_growing_conversation_reads_as_the_backward_walk_at_every_step(seed: int) -> None:
    rng = random.Random(seed)
    scans = TurnScans()
    messages: list[BaseMessage] = []
    for i in range(40):
        messages = [*messages, random_message(rng, i)]  # a new list each step, as graph state is
        assert scans.turn(messages) == reference(messages), (seed, i)


@pytest.mark.parametrize("seed", range(40))
def test_an_edited_history_is_scanned_afresh(seed: int) -> None:
    rng = random.Random(1000 + seed)
    scans = TurnScans()
    messages = [random_message(rng, i) for i in range(30)]
    scans.turn(messages)
    edited = list(messages)
    where = rng.randrange(len(edited))
    action = rng.choice(["replace", "remove", "insert", "truncate"])
    if action == "replace":
        edited[where] = random_message(rng, where)
    elif action == "remove":
        del edited[where]
    elif action == "insert":
        edited.insert(where, random_message(rng, where))
    else:
        edited = edited[:where + 1]
    assert scans.turn(edited) == reference(edited), (seed, action, where)
    assert scans.turn(messages) == reference(messages)


def test_a_user_message_put_before_an_answered_clarification_opens_the_turn() -> None:
    """[.., ask, answer, reply] opens at the reply only while no user message comes earlier."""
    scans = TurnScans()
    start = AIMessage("resumed")
    ask = AIMessage("", tool_calls=[{"name": "ask_clarification", "args": {}, "id": "q"}])
    answer = ToolMessage("which?", tool_call_id="q", name="ask_clarification")
    reply = HumanMessage("this one")
    assert scans.turn([start, ask, answer, reply]).opener is reply
    edited = [start, HumanMessage("/alpha go"), answer, reply]  # same first, same opener, same before
    assert scans.turn(edited) == reference(edited) and scans.turn(edited).opener is edited[1]


def test_only_the_least_recently_asked_conversations_are_dropped() -> None:
    scans = TurnScans(kept=2)
    conversations = [[HumanMessage(f"c{i}")] for i in range(3)]
    for c in conversations:
        scans.turn(c)
    assert len(scans._scans) == 2 and id(conversations[0][0]) not in scans._scans

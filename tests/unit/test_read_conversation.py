"""``read_conversation`` pages and refusals, without a run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from deerflow.errors import NotFoundError, UserError
from deerflow.run_options import RunOptions
from deerflow.tools.builtins.conversation import (
    GrantedConversations,
    grant_conversation_reader,
    paginate,
    read_conversation_tool,
    visible_history,
)
from deerflow.tools.errors import ToolFailure

LONG = "".join(f"<{i:04d}>" for i in range(600))  # 3,600 characters, every cut is visible


class Threads:
    """A host with two users' threads."""

    def __init__(self) -> None:
        self.owners = {"t-alice": "alice", "t-alice-2": "alice", "t-bob": "bob"}
        self.messages = {"t-alice-2": [HumanMessage("write it"), AIMessage("", tool_calls=[
            {"name": "write_file", "args": {}, "id": "c1"}]), ToolMessage("ok", tool_call_id="c1"),
            AIMessage(LONG), HumanMessage("note", additional_kwargs={"deerflow_note": "uploads"})]}

    async def athread(self, thread_id: str, user_id: str) -> Any:
        if self.owners.get(thread_id) != user_id:
            raise NotFoundError(f"unknown thread {thread_id!r}")
        return SimpleNamespace(title="Long report")

    async def thread_values(self, thread_id: str, user_id: str) -> dict[str, Any]:
        return {"messages": self.messages.get(thread_id, [])}


async def grant(referenced: list[str], user: str = "alice", page_chars: int = 1000) -> GrantedConversations | None:
    return await grant_conversation_reader(Threads(), RunOptions(referenced_threads=referenced), user_id=user,
                                           current_thread="t-alice", page_chars=page_chars)


def test_visible_history_is_what_the_person_saw():
    visible = visible_history(Threads().messages["t-alice-2"])
    assert [(m.seq, m.role, m.text[:6]) for m in visible] == [(0, "user", "write "), (1, "assistant", "<0000>")]


async def test_pages_continue_across_a_long_message_and_fit_the_budget():
    reader = await grant(["t-alice-2"])
    page = await reader.read("t-alice-2")
    assert page.text.startswith("Conversation t-alice-2 ('Long report'), 2 visible messages:")
    assert "[#0 user]\nwrite it" in page.text and "write_file" not in page.text and "note" not in page.text
    pages = 1
    while page.next_seq is not None:
        assert len(page.text) <= reader.page_chars
        assert page.text.endswith(f"message_seq=1, offset={page.next_offset})]")
        offset = page.next_offset
        page = await reader.read("t-alice-2", message_seq=page.next_seq, offset=offset)
        assert f"[#1 assistant, from character {offset}]\n" in page.text
        pages += 1
    assert page.text.endswith("<0599>\n\n[end of conversation]")
    assert pages >= 4


def test_paging_reassembles_the_message_exactly():
    visible = visible_history(Threads().messages["t-alice-2"])
    seq, offset, pieces = 1, 0, []
    while seq is not None:
        page = paginate("t", None, visible, message_seq=seq, offset=offset, budget=900)
        body = page.text.split("\n\n", 1)[1].rsplit("\n\n[", 1)[0]
        pieces.append(body.split("\n", 1)[1])
        seq, offset = page.next_seq, page.next_offset
    assert "".join(pieces) == LONG


async def test_unreferenced_and_foreign_threads_are_refused():
    reader = await grant(["t-alice-2"])
    with pytest.raises(ToolFailure, match="not referenced"):
        await reader.read("t-alice")
    with pytest.raises(NotFoundError):
        await grant(["t-bob"])  # bob's thread cannot even be referenced by alice
    assert await grant([]) is None and await grant(["t-alice"]) is None  # nothing (else) referenced: no grant
    with pytest.raises(UserError, match="bootstrap"):
        await grant_conversation_reader(Threads(), RunOptions(referenced_threads=["t-alice-2"]), user_id="alice",
                                        current_thread=None, page_chars=1000, bootstrap=True)


async def test_the_tool_refuses_subagents():
    tool = read_conversation_tool(await grant(["t-alice-2"]))
    child = SimpleNamespace(context=SimpleNamespace(options=RunOptions(is_subagent=True)))
    with pytest.raises(ToolFailure, match="subagents"):
        await tool.coroutine(thread_id="t-alice-2", runtime=child)
    lead = SimpleNamespace(context=SimpleNamespace(options=RunOptions()))
    assert (await tool.coroutine(thread_id="t-alice-2", runtime=lead)).startswith("Conversation t-alice-2")

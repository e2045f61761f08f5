"""``create_agent``'s invalid-tool-call patch, incremental on DeerFlow's message lists.

Before every model call, ``create_agent``'s model node runs ``_patch_invalid_tool_calls``
over the whole history: it collects the ``tool_call_id`` of every ``ToolMessage`` and,
after each ``AIMessage`` whose ``invalid_tool_calls`` are not answered, inserts an error
``ToolMessage`` so the provider is never sent a call without a reply.  On a long thread
that walk (two ``isinstance`` checks and an attribute read per message, a set and a new
list) was the largest per-step cost that grew with the thread.

:class:`InvalidCallPatch` keeps, per lineage (``agents.lineage``), the tool-call ids
answered so far and the invalid calls still unanswered, reading only the messages a
thread added since.  When nothing is left unanswered the result is a copy of the list,
which is what LangChain's walk returns in that case; anything else (a plain list, a
pending invalid call) goes to LangChain's own function, so the output is always what it
computes.  Installed once per process into ``langchain.agents.factory``; tests compare
it with the original.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from deerflow.agents.lineage import LineageMemo


class _Calls:
    __slots__ = ("answered", "unanswered")

    def __init__(self) -> None:
        self.answered: set[str] = set()
        self.unanswered: set[str | None] = set()


def _read(calls: _Calls, messages: Sequence[Any], start: int) -> None:
    answered, unanswered = calls.answered, calls.unanswered
    for index in range(start, len(messages)):
        message = messages[index]
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
            unanswered.discard(message.tool_call_id)
        elif isinstance(message, AIMessage) and message.invalid_tool_calls:
            unanswered.update(call.get("id") for call in message.invalid_tool_calls
                              if call.get("id") not in answered)


class InvalidCallPatch:
    """LangChain's patch over ``messages``, reading only what a lineage added since the last call."""

    def __init__(self, original: Callable[[Sequence[AnyMessage]], list[AnyMessage]]) -> None:
        self.original = original
        self.memo = LineageMemo(_Calls, _read)

    def __call__(self, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        known, pending = self.memo.advance(messages, lambda calls: bool(calls.unanswered))
        return list(messages) if known and not pending else self.original(messages)


_installed: InvalidCallPatch | None = None


def install() -> InvalidCallPatch:
    """Put the incremental patch in ``create_agent``'s model node (idempotent)."""
    global _installed
    if _installed is None:
        from langchain.agents import factory

        _installed = InvalidCallPatch(factory._patch_invalid_tool_calls)
        factory._patch_invalid_tool_calls = _installed
    return _installed

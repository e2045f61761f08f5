"""Approximate token counts of a conversation, each message counted once.

Every model call on a long thread asks how many tokens the conversation holds: the
summarization trigger before the call, the offline model's usage estimate after it.
LangChain's ``count_tokens_approximately`` re-reads every message's text each time,
which on a 2,000-message thread is ~1.8 ms a call, most of a step's growth.  It rounds
per message, so a list's count is exactly the sum of its messages' counts; this module
remembers each message's count and sums.

A count is remembered against the message object (a weak reference: nothing is kept
alive; entries of dead messages are swept whenever the table has doubled) and the
lengths it was counted from, so a message edited in place (its text or its tool calls)
is counted again.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

__all__ = ["approximate_tokens"]

Shape = tuple[int, int]
SWEEP_FLOOR = 10_000  # entries before the first sweep of dead messages
_Entry = tuple["weakref.ref[BaseMessage]", Shape, int]


def _shape(message: BaseMessage) -> Shape:
    # isinstance, not getattr(..., "tool_calls", None): a missing attribute goes through pydantic's
    # __getattr__ and an AttributeError, which made this sum slower than re-reading the text
    return len(message.content), len(message.tool_calls) if isinstance(message, AIMessage) else 0


class _Tally:
    """Per-message counts, keyed by the message's identity while it lives."""

    def __init__(self) -> None:
        # No lock: model calls run on the event loop and in executor threads. Each dict operation
        # is atomic; the worst a race does is drop an entry, which is counted again.
        self._counts: dict[int, _Entry] = {}
        self._sweep_at = SWEEP_FLOOR

    def count(self, messages: Iterable[BaseMessage]) -> int:
        total = 0
        counts = self._counts
        for message in messages:
            entry = counts.get(id(message))
            shape = _shape(message)
            if entry is None or entry[0]() is not message or entry[1] != shape:
                entry = self._remember(message, shape)
            total += entry[2]
        return total

    def _remember(self, message: BaseMessage, shape: Shape) -> _Entry:
        # a plain weak reference (no callback, no closure): two objects per message for the
        # collector to trace, and entries of dead messages are swept when the table doubles
        entry = (weakref.ref(message), shape, count_tokens_approximately([message]))
        self._counts[id(message)] = entry
        if len(self._counts) > self._sweep_at:
            self._sweep()
        return entry

    def _sweep(self) -> None:
        for key, entry in list(self._counts.items()):
            if entry[0]() is None:
                self._counts.pop(key, None)
        self._sweep_at = max(SWEEP_FLOOR, 2 * len(self._counts))

    def __len__(self) -> int:
        return len(self._counts)


_TALLY = _Tally()


def approximate_tokens(messages: Iterable[BaseMessage]) -> int:
    """``count_tokens_approximately(messages)`` with its defaults, each message's share remembered."""
    return _TALLY.count(messages)

"""Approximate token counts of a conversation, each message counted once.

Every model call on a long thread asks how many tokens the conversation holds: the
summarization trigger before the call, the offline model's usage estimate after it.
LangChain's ``count_tokens_approximately`` re-reads every message's text each time,
which on a 2,000-message thread is ~1.8 ms a call, most of a step's growth.  It rounds
per message, so a list's count is exactly the sum of its messages' counts; this module
remembers each message's count and sums.

A count is remembered against the message object (a weak reference: nothing is kept
alive, an entry goes with its message) and the lengths it was counted from, so a
message edited in place (its text or its tool calls) is counted again.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

__all__ = ["approximate_tokens"]

Shape = tuple[int, int]
_Entry = tuple["weakref.ref[BaseMessage]", Shape, int]


def _shape(message: BaseMessage) -> Shape:
    return len(message.content), len(getattr(message, "tool_calls", None) or ())


class _Tally:
    """Per-message counts, keyed by the message's identity while it lives."""

    def __init__(self) -> None:
        # No lock: model calls run on the event loop and in executor threads, and a weak reference's
        # callback runs wherever the collector does (a lock held there could deadlock). Each dict
        # operation is atomic; the worst a race does is drop an entry, which is counted again.
        self._counts: dict[int, _Entry] = {}

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
        key = id(message)
        ref = weakref.ref(message, lambda dead, key=key: self._forget(key, dead))
        entry = (ref, shape, count_tokens_approximately([message]))
        self._counts[key] = entry
        return entry

    def _forget(self, key: int, dead: weakref.ref[BaseMessage]) -> None:
        if (entry := self._counts.get(key)) is not None and entry[0] is dead:
            self._counts.pop(key, None)

    def __len__(self) -> int:
        return len(self._counts)


_TALLY = _Tally()


def approximate_tokens(messages: Iterable[BaseMessage]) -> int:
    """``count_tokens_approximately(messages)`` with its defaults, each message's share remembered."""
    return _TALLY.count(messages)

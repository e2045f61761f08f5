"""Approximate token counts of a conversation, each message counted once.

Every model call on a long thread asks how many tokens the conversation holds: the
summarization trigger before the call, the offline model's usage estimate after it.
LangChain's ``count_tokens_approximately`` re-reads every message's text each time,
which on a 2,000-message thread is ~1.8 ms a call, most of a step's growth.  It rounds
per message, so a list's count is exactly the sum of its messages' counts; this module
remembers each message's count and sums.

Two levels of memory:

- **Per message**: a count is remembered against the message object (a weak
  reference: nothing is kept alive; entries of dead messages are swept whenever the
  table has doubled) and the lengths it was counted from, so a message edited in place
  (its text or its tool calls) is counted again.
- **Per conversation**: a model call's messages are the previous call's plus the new
  ones, the same objects in the same order.  The last few conversations are kept as
  their messages' identities and total, so the next call compares identities (one C
  loop) and counts only the new messages, instead of looking up 2,000 entries (~0.6 ms).
  An identity stands for the same message only while that message lives: each
  remembered message's weak reference notes its death, and a death since a
  conversation was kept retires it.  The last message of a kept conversation is
  counted again (a message is most often edited in place just after it was added: an
  answer's name, a streamed text); an older message edited in place while its
  conversation grows keeps its count until a death retires the conversation (counts
  are approximate; the harness does not edit history in place).
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

__all__ = ["approximate_tokens"]

Shape = tuple[int, int]
SWEEP_FLOOR = 10_000  # entries before the first sweep of dead messages
RECENT_CONVERSATIONS = 8  # kept conversations (one per thread being served, roughly)
SHORTEST_KEPT = 16  # shorter lists are summed message by message, not kept
_Entry = tuple["weakref.ref[BaseMessage]", Shape, int]


def _shape(message: BaseMessage) -> Shape:
    # isinstance, not getattr(..., "tool_calls", None): a missing attribute goes through pydantic's
    # __getattr__ and an AttributeError, which made this sum slower than re-reading the text
    return len(message.content), len(message.tool_calls) if isinstance(message, AIMessage) else 0


class _Conversation:
    """A counted conversation: its messages' identities, its total and the deaths seen when kept."""

    __slots__ = ("deaths", "ids", "last", "total")

    def __init__(self, ids: list[int], total: int, last: int, deaths: int) -> None:
        self.ids, self.total, self.last, self.deaths = ids, total, last, deaths


class _Tally:
    """Per-message counts, keyed by the message's identity while it lives; recent conversations."""

    def __init__(self) -> None:
        # No lock: model calls run on the event loop and in executor threads. Each dict and deque
        # operation is atomic; the worst a race does is drop an entry (counted again) or a kept
        # conversation (the next call reads every message's entry).
        self._counts: dict[int, _Entry] = {}
        self._sweep_at = SWEEP_FLOOR
        self._recent: deque[_Conversation] = deque(maxlen=RECENT_CONVERSATIONS)
        self._deaths = 0
        self._on_death = self._died  # one bound method shared by every weak reference

    def _died(self, _ref: Any) -> None:
        self._deaths += 1  # a lost increment under a race still changes the number

    def count(self, messages: Iterable[BaseMessage]) -> int:
        seq = messages if isinstance(messages, list | tuple) else list(messages)
        if len(seq) < SHORTEST_KEPT:
            return self._sum(seq)
        ids = list(map(id, seq))
        deaths = self._deaths
        found = self._kept(ids, deaths)
        if found is None:
            total = self._sum(seq)
        else:  # the kept conversation's total, its last message counted again, then the new ones
            total = found.total - found.last + self._sum(seq[len(found.ids) - 1:])
        self._recent.appendleft(_Conversation(ids, total, self._sum(seq[-1:]), deaths))
        return total

    def _kept(self, ids: list[int], deaths: int) -> _Conversation | None:
        for kept in tuple(self._recent):
            n = len(kept.ids)
            if kept.deaths == deaths and 0 < n <= len(ids) and ids[n - 1] == kept.ids[-1] and ids[:n] == kept.ids:
                return kept
        return None

    def _sum(self, messages: Sequence[BaseMessage]) -> int:
        """The messages' counts, each from its entry (a message whose lengths changed is read again)."""
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
        # one weak reference per message and one callback shared by all (no closure): two objects per
        # message for the collector to trace; entries of dead messages are swept when the table doubles
        entry = (weakref.ref(message, self._on_death), shape, count_tokens_approximately([message]))
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

"""Batch reducer for the ``messages`` channel of a thread.

Why a batch reducer: the thread's ``messages`` live in a LangGraph
``DeltaChannel``, which checkpoints only the writes of each step and rebuilds
the list by replaying them through ``reducer(state, [write, ...])``. Storage
then grows with the number of writes instead of with (steps x history), but the
reducer must accept many writes at once and give the same answer however the
writes are batched::

    merge_message_writes(merge_message_writes(s, xs), ys)
        == merge_message_writes(s, xs + ys)

Contract: the result equals folding the writes one by one through LangGraph's
public ``add_messages``. That includes its less obvious corners, because a
thread replayed from a checkpoint must come back exactly as it was built:

* a duplicate id replaces the message in place (it keeps its position);
* ``RemoveMessage(id)`` deletes; an unknown id raises ``ValueError``;
* removals take effect at the end of the write that carries them, so a message
  removed and re-added within one write keeps its slot, while one re-added by a
  later write goes to the end;
* ``RemoveMessage(REMOVE_ALL_MESSAGES)`` resets the list to what follows the
  last such marker of that write, taken verbatim (duplicates included);
* a ``None`` write raises ``ValueError``;
* messages without an id get ``uuid4`` ids in the same order ``add_messages``
  allocates them (state first, then each write in order);
* dicts, ``(role, content)`` tuples and strings are coerced to messages, and
  message chunks to full messages.

LangGraph ships a private ``_messages_delta_reducer`` that is also linear but
skips several of these rules, so it is not used here.

Cost: the current state is normalised and indexed once per call (id -> last
position, plus earlier positions of the rare repeated id); each write is then
folded in time proportional to its own length. Removed slots are marked as
tombstones and compacted once, at the end of the call, so the accumulated list
is never rescanned per write: one call is O(len(state) + total write size).

Across calls: the list a merge returns (:class:`IndexedMessages`, a ``list``)
carries the id index it was built with, and the next merge into that same list
copies the index instead of rebuilding it from every message (the Python-level
walk over a 2,000-message history was a per-step cost that grew with the thread).
The index is trusted only while the list is as the merge left it (same length,
its first and last message at the positions the index says); anything else is
indexed afresh.  Plain lists (a state read back from a checkpoint) take the full
path once.  The index also carries a *lineage* token: two lists of one lineage
differ only by messages appended to the later one (a replacement in place, a
removal or a reset starts a new lineage), which is what the incremental walks of
``runs.stream_seen`` and ``agents.invalid_calls`` rely on.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

__all__ = ["IndexedMessages", "merge_message_writes"]


def merge_message_writes(state: Any, writes: Sequence[Any]) -> list[AnyMessage]:
    """Fold a batch of ``messages`` writes into the current message list.

    Args:
        state: The current messages (a list of message-likes, or one message-like,
            as ``add_messages`` accepts for its left side).
        writes: The writes to apply, oldest first. Each is a list of message-likes
            or a single message-like, exactly what a node returns under
            ``messages``.

    Returns:
        A new list; the input list is not modified (message objects without an
        id are given one in place, as ``add_messages`` does).

    Raises:
        ValueError: ``state`` or a write is ``None``, or a ``RemoveMessage``
            names an id that is not present.
    """
    if state is None:
        raise ValueError("Cannot merge message writes into a None state.")
    if not writes:
        return list(state) if isinstance(state, list) else [state]
    fold = _MessageFold.resume(state) or _MessageFold(_coerce(state))
    for write in writes:
        if write is None:
            raise ValueError("A write to 'messages' must not be None.")
        fold.apply(_with_ids(_coerce(write)))
    return fold.result()


class IndexedMessages(list[Any]):  # messages; None tombstones too while a fold runs on it
    """A merge result: a plain list of messages that remembers its id index (see the module doc)."""

    __slots__ = ("_fold_index",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._fold_index: tuple[dict[str | None, int], dict[str | None, list[int]], int, object] | None = None

    def __copy__(self) -> IndexedMessages:
        """A shallow copy at list speed (LangGraph copies channel values; a subclass would go item by item)."""
        new = IndexedMessages(self)
        new._fold_index = getattr(self, "_fold_index", None)  # never mutated: a resumed fold copies it
        return new


class _MessageFold:
    """Mutable fold state: messages with tombstones and an id -> position index.

    ``_index`` maps each id to its last position, which is the one
    ``add_messages`` replaces. An id occurs more than once only after a
    ``REMOVE_ALL_MESSAGES`` write whose tail repeats it (or when the initial
    state does); its earlier positions wait in ``_earlier`` so that a removal
    can delete every occurrence, as ``add_messages`` does.
    """

    __slots__ = ("_earlier", "_index", "_items", "_lineage", "_tombstones")

    def __init__(self, messages: list[BaseMessage]) -> None:
        self._items: list[BaseMessage | None] = IndexedMessages()
        self._index: dict[str | None, int] = {}
        self._earlier: dict[str | None, list[int]] = {}
        self._tombstones = 0
        self._reset(messages)

    @classmethod
    def resume(cls, state: Any) -> _MessageFold | None:
        """A fold over ``state`` reusing the index its own merge left on it; None when it cannot."""
        memo = getattr(state, "_fold_index", None) if type(state) is IndexedMessages else None
        if memo is None:
            return None
        index, earlier, length, lineage = memo
        if length != len(state) or (length and (index.get(state[0].id) is None
                                                or index.get(state[-1].id) != length - 1)):
            return None  # changed since its merge: index afresh
        fold = cls.__new__(cls)
        fold._items = IndexedMessages(state)
        fold._index = dict(index)
        fold._earlier = {k: list(v) for k, v in earlier.items()}
        fold._tombstones = 0
        fold._lineage = lineage
        return fold

    def _reset(self, messages: list[BaseMessage]) -> None:
        """Start from ``messages``, giving id-less ones an id first.

        The index doubles as the missing-id check, so a long history is walked
        once per call, not twice.
        """
        self._items = IndexedMessages(messages)
        self._lineage = object()  # a new history: lists grown from it only by appends share this token
        self._tombstones = 0
        self._index = {message.id: i for i, message in enumerate(messages)}
        if None in self._index:
            _with_ids(messages)
            self._index = {message.id: i for i, message in enumerate(messages)}
        self._earlier = {}
        if len(self._index) != len(messages):
            for position, message in enumerate(messages):
                if self._index[message.id] != position:
                    self._earlier.setdefault(message.id, []).append(position)

    def apply(self, messages: list[BaseMessage]) -> None:
        """Apply one write, with ``add_messages`` semantics."""
        cut = _last_remove_all(messages)
        if cut is not None:
            self._reset(messages[cut + 1 :])
            return
        index, items = self._index, self._items
        removed: set[str | None] = set()
        for message in messages:
            position = index.get(message.id)
            if position is None:
                if isinstance(message, RemoveMessage):
                    raise ValueError(
                        "Attempting to delete a message with an ID that doesn't exist "
                        f"('{message.id}')"
                    )
                index[message.id] = len(items)
                items.append(message)
            elif isinstance(message, RemoveMessage):
                removed.add(message.id)
            else:
                removed.discard(message.id)
                items[position] = message
                self._lineage = object()  # no longer the earlier lists plus appends
        for message_id in removed:
            self._tombstone(message_id)

    def _tombstone(self, message_id: str | None) -> None:
        for position in [self._index.pop(message_id), *self._earlier.pop(message_id, ())]:
            self._items[position] = None
            self._tombstones += 1

    def result(self) -> list[AnyMessage]:
        """Return the live messages in order (tombstones compacted once, here)."""
        if not self._tombstones:
            items = self._items
            assert isinstance(items, IndexedMessages)
            items._fold_index = (self._index, self._earlier, len(items), self._lineage)  # the next merge starts here
            return cast("list[AnyMessage]", items)  # no tombstone: no None
        return cast("list[AnyMessage]", [message for message in self._items if message is not None])


def _last_remove_all(messages: list[BaseMessage]) -> int | None:
    """Index of the last ``REMOVE_ALL_MESSAGES`` marker in a write, if any."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, RemoveMessage) and message.id == REMOVE_ALL_MESSAGES:
            return index
    return None


def _coerce(value: Any) -> list[BaseMessage]:
    """Coerce one side of a merge to full messages, as ``add_messages`` does.

    A long history is all plain messages, so the common case returns the list
    itself after a type check instead of converting every item.
    """
    items = value if isinstance(value, list) else [value]
    if all(
        issubclass(kind, BaseMessage) and not issubclass(kind, BaseMessageChunk)
        for kind in set(map(type, items))
    ):
        return items
    return [message_chunk_to_message(m) for m in convert_to_messages(items)]


def _with_ids(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Give id-less messages a ``uuid4`` id, in list order (in place)."""
    for message in messages:
        if message.id is None:
            message.id = str(uuid.uuid4())
    return messages

"""What a walk over a thread's history learned, kept per *lineage* so the next walk reads only new messages.

The thread's ``messages`` channel holds
:class:`~deerflow.agents.message_reducer.IndexedMessages` lists, and two lists of one
lineage differ only by messages appended to the later one (a replacement in place, a
removal or a reset starts a new lineage).  A :class:`LineageMemo` keeps, per lineage, a
state built by reading the messages in order, the length read and the last message read
(the object itself); a later list of that lineage holding that same object at that
position is read from there on.  Anything else (a plain list, a fork that does not
continue the remembered list) starts the state afresh from the first message, so a
state always describes exactly the list it was last advanced with.

Used by the incremental stand-ins for LangChain's per-model-call walks over the history
(``agents.invalid_calls``, ``agents.model_passes``) and for the ``messages`` stream's
"already seen" walk (``runs.stream_seen``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from deerflow.agents.message_reducer import IndexedMessages

S = TypeVar("S")
R = TypeVar("R")

MEMO_SIZE = 64
"""Lineages remembered per memo (the least recently used is forgotten first)."""


def lineage_of(messages: Any) -> object | None:
    """The lineage token of a merge result; None for anything else (plain lists included)."""
    memo = getattr(messages, "_fold_index", None) if type(messages) is IndexedMessages else None
    return memo[3] if memo is not None else None


class _Entry(Generic[S]):
    __slots__ = ("last", "length", "lineage", "state")

    def __init__(self, lineage: object, state: S) -> None:
        self.lineage, self.state, self.length, self.last = lineage, state, 0, None


class LineageMemo(Generic[S]):
    """Per lineage, a state advanced over the messages not read yet.

    ``read(state, messages, start)`` folds ``messages[start:]`` into ``state``; ``view``
    (given to :meth:`advance`) reads the result while no other thread can advance it.
    """

    def __init__(self, new_state: Callable[[], S], read: Callable[[S, Sequence[Any], int], None]) -> None:
        self._new_state, self._read = new_state, read
        self._entries: OrderedDict[int, _Entry[S]] = OrderedDict()
        self._lock = threading.Lock()  # a sync model node runs in worker threads
        self.walked = 0  # messages read (tests count them)

    def advance(self, messages: Sequence[Any], view: Callable[[S], R]) -> tuple[bool, R | None]:
        """``(True, view(state))`` with the state brought up to ``messages``; ``(False, None)`` without a lineage."""
        lineage = lineage_of(messages)
        if lineage is None:
            return False, None
        with self._lock:
            entry = self._entries.get(id(lineage))
            if entry is None or entry.lineage is not lineage or not 0 < entry.length <= len(messages) \
                    or messages[entry.length - 1] is not entry.last:
                entry = _Entry(lineage, self._new_state())
            start = entry.length
            self._read(entry.state, messages, start)
            entry.length, entry.last = len(messages), messages[-1] if messages else None
            self.walked += len(messages) - start
            self._entries[id(lineage)] = entry
            self._entries.move_to_end(id(lineage))
            while len(self._entries) > MEMO_SIZE:
                self._entries.popitem(last=False)
            return True, view(entry.state)

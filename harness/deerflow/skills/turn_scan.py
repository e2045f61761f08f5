"""The current turn's opener and the skills read in it, scanned once per message.

:func:`~deerflow.skills.activation.active_skills` is asked before every model call and every tool
call (the skill context, the tool policy's two stages), and each time it walked the turn back to its
opener and forward again: a turn of a ten-step run was walked some thirty times.  A
:class:`TurnScan` is that walk done forward and kept: asked again about the same conversation grown
by a few messages, it reads only the new ones.

It is kept only while exact.  A scan remembers the opener, the message before it (which decides
whether a reply to a clarification continues the turn) and every message after it, by identity; a
conversation that does not hold those same objects at those same places (a summary rewrote the
history, a message was replaced by id) is scanned afresh.  What comes before the opener never
changes the turn (unless the opener answers a clarification with no user message before it: such a
scan is never reused), so a long history is not compared.  At most :data:`KEPT` conversations are kept,
the least recently asked dropped first.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

KEPT = 32
"""Conversations whose scan is kept (one per run in flight is what is asked about)."""

CLARIFICATION = "ask_clarification"
SKILL_READER = "read_file"


@dataclass(frozen=True)
class Turn:
    """A conversation's current turn, as far as it was asked about."""

    opener: HumanMessage | None
    """The turn's user message; None when the conversation has none (every message is in the turn)."""
    read: tuple[str, ...]
    """Skills whose ``SKILL.md`` was read successfully in the turn, in order."""
    answered: bool
    """Whether the model has spoken in the turn."""


@dataclass
class TurnScan:
    """The turn of a conversation as far as :attr:`scanned` messages (kept by :class:`TurnScans`)."""

    opener_index: int | None = None
    before: BaseMessage | None = None
    turn: list[BaseMessage] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    answered: bool = False
    _wanted: dict[str, str] = field(default_factory=dict)

    def result(self) -> Turn:
        opener = self.turn[0] if self.opener_index is not None else None
        return Turn(opener if isinstance(opener, HumanMessage) else None, tuple(self.read), self.answered)

    @property
    def scanned(self) -> int:
        return (self.opener_index or 0) + len(self.turn)

    def extend(self, messages: Sequence[BaseMessage], start: int) -> None:
        """Scan ``messages[start:]`` (``start`` is :attr:`scanned`)."""
        # Imported here: the activation module imports this one.
        from deerflow.runtime.notes import note_kind
        from deerflow.skills.activation import skill_manifest_name

        for i in range(start, len(messages)):
            msg = messages[i]
            if isinstance(msg, HumanMessage) and not note_kind(msg):
                prev = messages[i - 1] if i > 0 else None
                if self.opener_index is None or not (isinstance(prev, ToolMessage) and prev.name == CLARIFICATION):
                    self.opener_index, self.before, self.turn = i, prev, [msg]
                    self.read, self.answered, self._wanted = [], False, {}
                    continue
            self.turn.append(msg)
            if isinstance(msg, AIMessage):
                self.answered = True
                for call in msg.tool_calls:
                    name = skill_manifest_name(call["args"].get("path")) if call["name"] == SKILL_READER else None
                    if name and (call_id := call.get("id")):
                        self._wanted[call_id] = name
            elif isinstance(msg, ToolMessage) and msg.tool_call_id in self._wanted and msg.status != "error":
                name = self._wanted[msg.tool_call_id]
                if name not in self.read:
                    self.read.append(name)

    def holds(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether ``messages`` still has this scan's messages where it saw them."""
        start = self.opener_index
        if start is None:
            return len(messages) >= len(self.turn) and all(map(operator.is_, messages, self.turn))
        if isinstance(self.before, ToolMessage) and self.before.name == CLARIFICATION:
            return False  # an opener only because no user message came earlier: one may be there now
        end = start + len(self.turn)
        return (len(messages) >= end and (messages[start - 1] if start > 0 else None) is self.before
                and all(map(operator.is_, messages[start:end], self.turn)))


class TurnScans:
    """The kept scans, by the identity of their conversation's first message (thread-safe)."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._scans: OrderedDict[int, tuple[BaseMessage, TurnScan]] = OrderedDict()

    def turn(self, messages: Sequence[BaseMessage]) -> Turn:
        """The turn of ``messages``, reading only what was not scanned before."""
        if not messages:
            return TurnScan().result()
        first = messages[0]
        with self._lock:
            kept = self._scans.get(id(first))
            if kept is not None and kept[0] is first and kept[1].holds(messages):
                self._scans.move_to_end(id(first))
                scan = kept[1]
                if scan.scanned < len(messages):
                    scan.extend(messages, scan.scanned)
                return scan.result()
            scan = TurnScan()
            scan.extend(messages, 0)
            self._scans[id(first)] = (first, scan)
            while len(self._scans) > self.kept:
                self._scans.popitem(last=False)
            return scan.result()


TURN_SCANS = TurnScans()


__all__ = ["CLARIFICATION", "KEPT", "SKILL_READER", "TURN_SCANS", "Turn", "TurnScan", "TurnScans"]

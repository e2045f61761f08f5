"""``read_conversation``: read another of the user's threads, when the host grants it.

The tool is optional and never part of the default tool set.  It is bound only
when the host (the run manager) grants a :class:`ConversationReader` for the run,
which it does only when the request explicitly references other threads
(``referenced_threads``): not in bootstrap runs, not for subagents, not by
default in the embedded client.  Permission and reading guidance are kept apart:

* **the host enforces** — every referenced thread must belong to the run's user
  (checked when the run starts and again at each read) and a read may only
  target a thread referenced in *this* run;
* **the tool reads** — the live visible history (user and assistant text; tool
  traffic and harness notes left out), in pages sized to the tool-output budget
  (``tool_output.max_chars``) so results stay inline.  A message cut by the page
  end carries a ``message_seq``/``offset`` continuation the same reader serves.

The capability lives in the tool's closure, bound when the run is built: it is
never recovered from persisted messages or state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain.tools import ToolRuntime, tool
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool

from deerflow.config.paths import check_id
from deerflow.errors import ToolFailure, UserError
from deerflow.run_options import RunOptions
from deerflow.runtime.context import RunContext

CONVERSATION_TOOL_NAME = "read_conversation"
MAX_REFERENCED_THREADS = 10
_FRAME_CHARS = 400  # page header + continuation footer
_MIN_CUT_CHARS = 200  # do not start a message with less room than this; continue on the next page


@dataclass(frozen=True)
class VisibleMessage:
    seq: int
    role: str
    text: str


@dataclass(frozen=True)
class ConversationPage:
    """One page of a thread's visible history.

    ``next_seq``/``next_offset`` say where the next page starts (None at the end).
    """

    thread_id: str
    title: str | None
    total: int
    text: str
    next_seq: int | None = None
    next_offset: int = 0


class ConversationReader(Protocol):
    """The host capability behind ``read_conversation``."""

    @property
    def referenced(self) -> frozenset[str]: ...

    async def read(self, thread_id: str, *, message_seq: int = 0, offset: int = 0) -> ConversationPage: ...


class ThreadSource(Protocol):
    """What the reader needs from the host (the run manager has both)."""

    async def athread(self, thread_id: str, user_id: str) -> Any: ...

    async def thread_values(self, thread_id: str, user_id: str) -> dict[str, Any]: ...


class GrantedConversations:
    """The reader a host grants one run: the user's referenced threads, nothing else.

    Args:
        source: The host's threads (ownership is re-checked at every read).
        user_id: Whose threads.
        referenced: Thread ids the request referenced.
        page_chars: The tool-output budget a page must fit in.
    """

    def __init__(self, source: ThreadSource, *, user_id: str, referenced: Iterable[str], page_chars: int) -> None:
        self._source = source
        self._user_id = user_id
        self._referenced = frozenset(referenced)
        self.page_chars = page_chars

    @property
    def referenced(self) -> frozenset[str]:
        return self._referenced

    async def read(self, thread_id: str, *, message_seq: int = 0, offset: int = 0) -> ConversationPage:
        if thread_id not in self._referenced:
            allowed = ", ".join(sorted(self._referenced))
            raise ToolFailure(f"thread {thread_id!r} was not referenced by the user in this run; "
                              f"you may read: {allowed}", code="not_referenced")
        record = await self._source.athread(thread_id, self._user_id)  # NotFoundError if it is gone or not theirs
        values = await self._source.thread_values(thread_id, self._user_id)
        visible = visible_history(values.get("messages", []))
        return paginate(thread_id, getattr(record, "title", None), visible, message_seq=message_seq,
                        offset=offset, budget=self.page_chars)


async def grant_conversation_reader(
    source: ThreadSource, options: RunOptions, *, user_id: str, current_thread: str | None,
    page_chars: int, bootstrap: bool = False,
) -> GrantedConversations | None:
    """The reader for a run whose request references other threads (else None).

    Raises:
        UserError: ``referenced_threads`` is not a list of thread ids, lists too many,
            or is given to a bootstrap run.
        NotFoundError: a referenced thread does not exist or is another user's.
    """
    raw = options.referenced_threads
    if not raw:
        return None
    if bootstrap:
        raise UserError("a bootstrap run cannot read other conversations: drop referenced_threads")
    if not isinstance(raw, (list, tuple)) or not all(isinstance(t, str) for t in raw):
        raise UserError("referenced_threads must be a list of thread ids")
    ids = [check_id(t, kind="thread") for t in dict.fromkeys(raw) if t != current_thread]
    if len(ids) > MAX_REFERENCED_THREADS:
        raise UserError(f"at most {MAX_REFERENCED_THREADS} threads can be referenced in one run")
    for thread_id in ids:
        await source.athread(thread_id, user_id)
    if not ids:
        return None
    return GrantedConversations(source, user_id=user_id, referenced=ids, page_chars=page_chars)


def visible_history(messages: Sequence[BaseMessage]) -> list[VisibleMessage]:
    """User and assistant text as the person saw it (tool traffic and harness notes left out)."""
    out: list[VisibleMessage] = []
    for message in messages:
        if message.type not in {"human", "ai"} or message.additional_kwargs.get("deerflow_note"):
            continue
        text = message.text.strip()
        if not text:
            continue
        out.append(VisibleMessage(len(out), "user" if message.type == "human" else "assistant", text))
    return out


def paginate(thread_id: str, title: str | None, messages: Sequence[VisibleMessage], *, message_seq: int,
             offset: int, budget: int) -> ConversationPage:
    """The page starting at ``message_seq``/``offset`` that fits ``budget`` characters."""
    if message_seq < 0 or offset < 0 or (messages and message_seq >= len(messages)) \
            or (message_seq < len(messages) and offset >= len(messages[message_seq].text)):
        if not messages and message_seq == 0 and offset == 0:
            return ConversationPage(thread_id, title, 0, f"Thread {thread_id} has no visible messages yet.")
        raise ToolFailure(f"no message at message_seq={message_seq} offset={offset} "
                          f"(the thread has {len(messages)} visible messages)", code="bad_arguments")
    room = max(budget - _FRAME_CHARS, _MIN_CUT_CHARS)
    parts: list[str] = []
    next_seq: int | None = None
    next_offset = 0
    for message in messages[message_seq:]:
        start = offset if message.seq == message_seq else 0
        header = f"[#{message.seq} {message.role}" + (f", from character {start}]" if start else "]")
        body = message.text[start:]
        if len(header) + len(body) + 1 <= room:
            parts.append(f"{header}\n{body}")
            room -= len(header) + len(body) + 2
            continue
        if parts and room < _MIN_CUT_CHARS + len(header):
            next_seq, next_offset = message.seq, start
            break
        cut = max(room - len(header) - 1, 1)
        parts.append(f"{header}\n{body[:cut]}")
        next_seq, next_offset = message.seq, start + cut
        break
    head = f"Conversation {thread_id}" + (f" ({title!r})" if title else "") + f", {len(messages)} visible messages:"
    tail = (f"\n\n[page ends: continue with read_conversation(thread_id={thread_id!r}, message_seq={next_seq}, "
            f"offset={next_offset})]" if next_seq is not None else "\n\n[end of conversation]")
    return ConversationPage(thread_id, title, len(messages), head + "\n\n" + "\n\n".join(parts) + tail,
                            next_seq, next_offset)


def read_conversation_tool(reader: ConversationReader) -> BaseTool:
    """``read_conversation`` bound to the reader the host granted this run."""
    allowed = ", ".join(sorted(reader.referenced))

    @tool(CONVERSATION_TOOL_NAME)
    async def read_conversation(thread_id: str, runtime: ToolRuntime[RunContext], message_seq: int = 0,
                                offset: int = 0) -> str:
        """Read another of the user's conversations that they referenced in this request.

        Returns a page of its visible messages; a long conversation or message is
        cut, and the page ends with the exact call that continues it.

        Args:
            thread_id: The referenced thread's id.
            message_seq: Message number to start from (from a previous page's continuation).
            offset: Character offset inside that message (from a previous page's continuation).
        """
        if _is_subagent(runtime.context):
            raise ToolFailure("subagents cannot read other conversations", code="not_allowed")
        page = await reader.read(thread_id, message_seq=message_seq, offset=offset)
        return page.text

    read_conversation.description += f"\nThreads the user referenced: {allowed}."
    return read_conversation


def _is_subagent(context: RunContext | None) -> bool:
    if context is None:
        return True  # no run context: not a lead-agent run of this host
    return bool(context.options.is_subagent)


__all__ = ["CONVERSATION_TOOL_NAME", "ConversationPage", "ConversationReader", "GrantedConversations",
           "grant_conversation_reader", "paginate", "read_conversation_tool", "visible_history"]

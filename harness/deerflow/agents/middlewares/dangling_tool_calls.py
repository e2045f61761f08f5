"""No tool call without a result, answered per response.

A run cancelled between the model's tool call and the tool's answer leaves an
AIMessage whose ``tool_calls`` have no ToolMessage.  Providers reject such a
history, so before every model call the request (not the stored thread) gets a
placeholder ToolMessage for each unanswered call, right after the tool results
that follow that AIMessage.

A call is answered only by a ToolMessage between *its* AIMessage and the next
AIMessage: some providers number tool calls per response (``bash:0``), so one
id recurs across turns and an answer in an earlier turn says nothing about a
later call with the same id.

The scan is incremental: a response's block is settled once the next
AIMessage arrives, so the middleware remembers the settled part of the
history (per thread) and each model call only scans the messages since the
last AIMessage.  A rewritten history (summarization, a different thread)
fails the memo's check and is scanned from the start.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage

INTERRUPTED = "Error: this tool call was interrupted (the run was cancelled) and produced no result."
MEMO_THREADS = 64  # threads remembered by one middleware instance (shared by the runs of a cached graph)


@dataclass(frozen=True)
class Patch:
    """Placeholders to insert before ``position`` of the original messages."""

    position: int
    placeholders: tuple[ToolMessage, ...]


@dataclass
class Scan:
    """The settled part of a history: everything before ``settled`` (an AIMessage's index)."""

    settled: int = 0
    anchor: str | None = None  # id of messages[settled - 1]: detects a rewritten history
    patches: list[Patch] = field(default_factory=list)


def _placeholder(call: ToolCall) -> ToolMessage:
    return ToolMessage(content=INTERRUPTED, tool_call_id=call["id"] or "", name=call["name"], status="error")


def _block_patch(messages: Sequence[AnyMessage], start: int, end: int) -> Patch | None:
    """The placeholders of the AIMessage at ``start`` whose block ends before ``end``."""
    message = messages[start]
    assert isinstance(message, AIMessage)
    if not message.tool_calls:
        return None
    answered = {m.tool_call_id for m in messages[start + 1:end] if isinstance(m, ToolMessage)}
    missing = [c for c in message.tool_calls if c["id"] not in answered]
    if not missing:
        return None
    position = start + 1  # after the ToolMessages right behind the AIMessage (providers want them adjacent)
    while position < end and isinstance(messages[position], ToolMessage):
        position += 1
    return Patch(position, tuple(_placeholder(c) for c in missing))


def scan(messages: Sequence[AnyMessage], memo: Scan | None = None) -> tuple[Scan, list[Patch]]:
    """Settle the history from ``memo`` on; the new memo and every patch (settled and open block)."""
    if memo is None or not _memo_holds(messages, memo):
        memo = Scan()
    patches = list(memo.patches)
    last_ai: int | None = None
    for index in range(memo.settled, len(messages)):
        if not isinstance(messages[index], AIMessage):
            continue
        if last_ai is not None and (patch := _block_patch(messages, last_ai, index)) is not None:
            patches.append(patch)
        last_ai = index
    settled = Scan(memo.settled, memo.anchor, list(patches))
    if last_ai is not None:
        settled = Scan(last_ai, messages[last_ai - 1].id if last_ai else None, list(patches))
        if (patch := _block_patch(messages, last_ai, len(messages))) is not None:
            patches.append(patch)
    return settled, patches


def _memo_holds(messages: Sequence[AnyMessage], memo: Scan) -> bool:
    if memo.settled == 0:
        return True
    if memo.settled >= len(messages) or memo.anchor is None:
        return False
    return messages[memo.settled - 1].id == memo.anchor and isinstance(messages[memo.settled], AIMessage)


def apply_patches(messages: Sequence[AnyMessage], patches: Sequence[Patch]) -> list[AnyMessage]:
    """``messages`` with each patch's placeholders inserted at its position."""
    patched: list[AnyMessage] = []
    start = 0
    for patch in patches:
        patched.extend(messages[start:patch.position])
        patched.extend(patch.placeholders)
        start = patch.position
    patched.extend(messages[start:])
    return patched


def patch_dangling_tool_calls(messages: list[AnyMessage]) -> list[AnyMessage]:
    """Return ``messages`` with a placeholder result for every unanswered tool call (a full scan)."""
    _, patches = scan(messages)
    return apply_patches(messages, patches) if patches else messages


class DanglingToolCallsMiddleware(AgentMiddleware):
    """Patches unanswered tool calls in every model request, scanning only what is new."""

    def __init__(self) -> None:
        super().__init__()
        self._memos: OrderedDict[str, Scan] = OrderedDict()

    def _patched(self, request: ModelRequest) -> ModelRequest:
        key = _thread_key(request)
        memo, patches = scan(request.messages, self._memos.get(key))
        self._memos[key] = memo
        self._memos.move_to_end(key)
        while len(self._memos) > MEMO_THREADS:
            self._memos.popitem(last=False)
        if not patches:
            return request
        return request.override(messages=apply_patches(request.messages, patches))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(self._patched(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(self._patched(request))


def _thread_key(request: ModelRequest) -> str:
    context = getattr(request.runtime, "context", None)
    thread_id = getattr(context, "thread_id", None)
    return thread_id if isinstance(thread_id, str) else ""

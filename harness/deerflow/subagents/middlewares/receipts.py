"""Records every tool call a subagent makes as a receipt ``rN``.

Outermost of the child's tool wrappers, so it sees each call exactly as the
child made it — including calls the guard refuses and failures the error
middleware turned into messages.  The receipt is opened (``running``)
before the call and closed with its status (``ok``, ``error``, ``refused``;
``interrupted`` if the call never returned), the paths it touched, and
whether it wrote a file.  With receipts enabled the tool result shown to
the child starts with ``[rN]`` so the report can cite it.  Each start and
end is also reported to the parent as ``tool_progress``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from deerflow.subagents.child_run import ChildRun, child_run_of
from deerflow.subagents.receipts import Receipt, ReceiptStatus

Result = ToolMessage | Command[Any]


def outcome(message: ToolMessage | None) -> tuple[ReceiptStatus, str | None, Any]:
    """Receipt status, error code and artifact of a tool's answer."""
    if message is None:
        return "ok", None, None
    artifact = message.artifact if isinstance(message.artifact, dict) else {}
    if artifact.get("status") == "refused" or artifact.get("code") == "not_authorized":
        return "refused", artifact.get("code"), artifact
    if message.status == "error" or artifact.get("status") == "error":
        return "error", artifact.get("code"), artifact
    return "ok", None, artifact


def stamp(result: Result, call_id: str, receipt_id: str) -> Result:
    """Prefix the call's ToolMessage with ``[rN]`` (direct, or inside a Command's messages)."""
    if isinstance(result, ToolMessage):
        return _stamped(result, receipt_id)
    if isinstance(result, Command) and isinstance(result.update, dict):
        messages = result.update.get("messages")
        if isinstance(messages, list):
            update = dict(result.update)
            update["messages"] = [_stamped(m, receipt_id) if isinstance(m, ToolMessage)
                                  and m.tool_call_id == call_id else m for m in messages]
            return Command(graph=result.graph, update=update, resume=result.resume, goto=result.goto)
    return result


def _stamped(message: ToolMessage, receipt_id: str) -> ToolMessage:
    tag = f"[{receipt_id}] "
    if isinstance(message.content, str):
        return message.model_copy(update={"content": tag + message.content})
    return message.model_copy(update={"content": [{"type": "text", "text": tag}, *message.content]})


def _message_of(result: Result, call_id: str) -> ToolMessage | None:
    if isinstance(result, ToolMessage):
        return result
    if isinstance(result, Command) and isinstance(result.update, dict):
        for message in result.update.get("messages") or []:
            if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
                return message
    return None


class ReceiptMiddleware(AgentMiddleware):
    """Opens and closes a receipt around every tool call of a subagent."""

    def _open(self, child: ChildRun, request: ToolCallRequest) -> Receipt:
        call = request.tool_call
        receipt = child.receipts.open(call["name"], call.get("args") or {})
        child.emit("tool_progress", {"event": "tool_started", "receipt": receipt.to_dict()})
        return receipt

    def _close(self, child: ChildRun, request: ToolCallRequest, receipt: Receipt, result: Result) -> Result:
        call_id = request.tool_call["id"] or ""
        status, code, artifact = outcome(_message_of(result, call_id))
        closed = child.receipts.close(receipt.id, status, code=code, artifact=artifact)
        child.emit("tool_progress", {"event": "tool_finished", "receipt": closed.to_dict()})
        return stamp(result, call_id, receipt.id) if child.receipts_enabled else result

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        child = child_run_of(request.runtime)
        if child is None:
            return handler(request)
        receipt = self._open(child, request)
        finished = False
        try:
            result = handler(request)
            finished = True
        finally:
            if not finished:
                child.receipts.close(receipt.id, "interrupted")
        return self._close(child, request, receipt, result)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        child = child_run_of(request.runtime)
        if child is None:
            return await handler(request)
        receipt = self._open(child, request)
        finished = False
        try:
            result = await handler(request)
            finished = True
        finally:
            if not finished:
                child.receipts.close(receipt.id, "interrupted")
        return self._close(child, request, receipt, result)

"""No tool call without a result.

A run cancelled between the model's tool call and the tool's answer leaves an
AIMessage whose ``tool_calls`` have no ToolMessage.  Providers reject such a
history, so before every model call the request (not the stored thread) gets a
placeholder ToolMessage right after the AIMessage for each unanswered call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

INTERRUPTED = "Error: this tool call was interrupted (the run was cancelled) and produced no result."


def patch_dangling_tool_calls(messages: list[AnyMessage]) -> list[AnyMessage]:
    """Return ``messages`` with a placeholder result for every unanswered tool call."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    if all(tc["id"] in answered for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls):
        return messages
    patched: list[AnyMessage] = []
    for message in messages:
        patched.append(message)
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            if call["id"] not in answered:
                patched.append(
                    ToolMessage(content=INTERRUPTED, tool_call_id=call["id"], name=call["name"], status="error")
                )
    return patched


class DanglingToolCallsMiddleware(AgentMiddleware):
    """Patches unanswered tool calls in every model request."""

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(request.override(messages=patch_dangling_tool_calls(request.messages)))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(request.override(messages=patch_dangling_tool_calls(request.messages)))

"""Tool calls whose arguments were cut off are answered with an error, never run.

When a model's answer ends mid-arguments (the stream closed, or the token limit
hit), :class:`deerflow.models.guard.GuardedChatModel` replaces the call's
arguments with a marker instead of letting LangChain "repair" the partial JSON
(``{"content": "hi`` would become ``{"content": "hi"}`` and a truncated file
would be written).  This middleware answers such a call with an error tool
result the model can act on, so the tool never sees the partial arguments.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from deerflow.models.guard import cut_off_reason

Result = ToolMessage | Command[Any]


def cut_off_message(request: ToolCallRequest, reason: str) -> ToolMessage:
    """The error result for a call whose arguments did not arrive whole."""
    name = request.tool_call["name"]
    text = (f"Error: your arguments for {name} were cut off before they were complete ({reason}). "
            "Nothing was run. Call the tool again with complete arguments; for long content, "
            "write it in smaller parts.")
    return ToolMessage(content=text, tool_call_id=request.tool_call["id"], name=name, status="error",
                       artifact={"status": "error", "code": "arguments_cut_off"})


class CutOffToolCallsMiddleware(AgentMiddleware):
    """Refuses tool calls carrying the guard's cut-off marker; every other call passes through."""

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        reason = cut_off_reason(request.tool_call.get("args"))
        return cut_off_message(request, reason) if reason else handler(request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        reason = cut_off_reason(request.tool_call.get("args"))
        return cut_off_message(request, reason) if reason else await handler(request)

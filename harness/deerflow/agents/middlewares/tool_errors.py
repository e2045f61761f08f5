"""Tool exceptions become error ToolMessages with a structured status.

A tool that raises must not end the run, and the model must never see a raw
traceback (it leaks host paths and internals).  A :class:`ToolFailure` is the
model's own mistake and is returned verbatim; anything else is a runtime
failure: logged with context for the operator, summarised for the model.
The status travels as ``ToolMessage.status == "error"`` plus
``artifact={"status": "error", "code": ...}`` so consumers need not parse text.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from deerflow.errors import ToolFailure

logger = logging.getLogger(__name__)

Result = ToolMessage | Command[Any]


def error_tool_message(request: ToolCallRequest, exc: Exception) -> ToolMessage:
    """The ToolMessage the model sees for a failed call."""
    name = request.tool_call["name"]
    if isinstance(exc, ToolFailure):
        text, code = exc.message, exc.code
    else:
        logger.error("tool %s failed (call %s)", name, request.tool_call.get("id"), exc_info=exc)
        text = f"the tool failed unexpectedly ({type(exc).__name__}). Try different arguments or another approach."
        code = "tool_crashed"
    return ToolMessage(
        content=f"Error: {text}",
        tool_call_id=request.tool_call["id"],
        name=name,
        status="error",
        artifact={"status": "error", "code": code},
    )


class ToolErrorHandlingMiddleware(AgentMiddleware):
    """Turns tool exceptions into error ToolMessages; control flow still propagates."""

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        try:
            return handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - every tool failure becomes a message; logged above
            return error_tool_message(request, exc)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - every tool failure becomes a message; logged above
            return error_tool_message(request, exc)

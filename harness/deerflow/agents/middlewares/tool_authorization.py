"""Stage two of tool authorization: refuse a denied tool at execution."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from deerflow.tools.authorization import ToolPolicy

Result = ToolMessage | Command[Any]


class ToolAuthorizationMiddleware(AgentMiddleware):
    """Refuses calls to tools the user's policy does not permit."""

    def __init__(self, policy: ToolPolicy) -> None:
        super().__init__()
        self.policy = policy

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        name = request.tool_call["name"]
        if self.policy.permits(name):
            return None
        return ToolMessage(
            content=f"Error: you are not authorized to use the tool '{name}'. Continue without it.",
            tool_call_id=request.tool_call["id"], name=name, status="error",
            artifact={"status": "error", "code": "not_authorized"},
        )

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        return self._refusal(request) or handler(request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        return self._refusal(request) or await handler(request)

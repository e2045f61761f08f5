"""Refuses, inside a subagent, every tool it must not run.

The child is never *offered* ``task``, the batch tools, ``ask_clarification``
or ``present_files``, nor tools outside its type's and skills' allowlist —
but a model can still name them.  This guard answers such a call with an
error the child can act on (do the work yourself; assume instead of asking;
list paths in the report) instead of running it.  A child that calls
``task`` is refused: subagents never nest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from deerflow.subagents.child_run import child_run_of

Result = ToolMessage | Command[Any]

_DELEGATION_TOOLS = frozenset({"task", "batch_task", "batch_status", "cancel_batch"})


def refusal_text(name: str) -> tuple[str, str]:
    """What the child reads for a refused call, and the refusal code."""
    if name in _DELEGATION_TOOLS:
        return (f"Error: subagents cannot delegate: `{name}` is only available to the lead agent. Do the work "
                "yourself with your own tools, or say in your report what is left for the lead.", "nesting_refused")
    if name == "ask_clarification":
        return ("Error: a subagent cannot ask the user questions: nobody will answer. Make the smallest "
                "reversible assumption, note it in your report, and continue.", "clarification_unavailable")
    if name == "present_files":
        return ("Error: the lead agent presents files to the user. List the paths of your deliverables in "
                "your report instead.", "not_available_to_subagents")
    return (f"Error: the tool `{name}` is not available to this subagent. Continue with the tools you have.",
            "not_available_to_subagents")


class SubagentToolGuard(AgentMiddleware):
    """Answers calls to tools a subagent may not run with an error ToolMessage."""

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        child = child_run_of(request.runtime)
        name = request.tool_call["name"]
        if child is None or child.permits(name):
            return None
        text, code = refusal_text(name)
        return ToolMessage(content=text, tool_call_id=request.tool_call["id"] or "", name=name, status="error",
                           artifact={"status": "refused", "code": code})

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        return self._refusal(request) or handler(request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        return self._refusal(request) or await handler(request)

"""Turn and token limits of a subagent, with a stated stop reason.

Before each model call the child's counters are compared with its limits;
at a limit the graph jumps to its end (after the previous tool results, so
the conversation stays well formed) and the :class:`ChildRun` records why:
``turn_limit`` or ``token_limit``.  After each model call the answer's
token usage is added and reported to the parent as progress.  Time is
limited by the supervisor (:mod:`deerflow.subagents.executor`), which can
stop a child that is stuck inside a tool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse, hook_config
from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from deerflow.subagents.child_run import child_run_of


class SubagentLimitsMiddleware(AgentMiddleware):
    """Ends a subagent at its turn or token limit; counts its usage."""

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        child = child_run_of(runtime)
        if child is None:
            return None
        turns, usage = child.progress()
        if turns >= child.limits.max_turns:
            child.stop("turn_limit")
            return {"jump_to": "end"}
        if child.limits.max_tokens is not None and usage["total_tokens"] >= child.limits.max_tokens:
            child.stop("token_limit")
            return {"jump_to": "end"}
        return None

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        return self._count(request, handler(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return self._count(request, await handler(request))

    def _count(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        child = child_run_of(request.runtime)
        if child is None:
            return response
        answer = next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)
        child.add_turn(dict(answer.usage_metadata or {}) if answer is not None else None)
        turns, usage = child.progress()
        child.emit("tool_progress", {"event": "model_turn", "turns": turns, "usage": usage})
        return response

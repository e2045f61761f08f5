"""The active skill's ``allowed-tools``, enforced twice.

Same two stages as user authorization (:mod:`deerflow.tools.authorization`):

1. **visibility** — ``wrap_model_call`` removes the schemas of tools outside
   the scope from the request, so the model is not offered them;
2. **execution** — ``wrap_tool_call`` refuses a call outside the scope with an
   error ToolMessage (``code: skill_tool_not_allowed``), because a tool can
   still be named: hallucinated calls, calls made before the skill was read,
   promoted deferred tools.

The scope comes from :meth:`deerflow.skills.activation.ActiveSkills.scope`
(slash activation wins; otherwise the union over active skills that declare
``allowed-tools``; framework tools always allowed; ``read_file`` kept for
skill files).  This is behavioural scoping, not a security boundary: the
sandbox is.  The middleware sits after user authorization and before tool
search promotion could matter, so promotions never widen an active scope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from deerflow.skills.activation import ToolScope, active_skills
from deerflow.skills.run import run_skills_of

Result = ToolMessage | Command[Any]


def _scope(state: Any, context: Any) -> ToolScope | None:
    skills = run_skills_of(context)
    if skills is None or not isinstance(state, dict):
        return None
    scope = active_skills(state.get("messages", []), skills.by_name).scope()
    return scope if scope.restricted else None


def _tool_name(tool: Any) -> str | None:
    name = tool.get("name") if isinstance(tool, dict) else getattr(tool, "name", None)
    return name if isinstance(name, str) else None


def refusal(call: dict[str, Any], scope: ToolScope) -> ToolMessage:
    """The error result of a call the active skill does not allow."""
    name = call["name"]
    skills = ", ".join(scope.skills)
    allowed = ", ".join(scope.allowed or ())
    hint = (" read_file may only read skill files under /mnt/skills here." if name == "read_file" else "")
    return ToolMessage(
        content=(f"Error: the active skill ({skills}) does not allow the tool '{name}'; it allows: "
                 f"{allowed}.{hint} Continue with the allowed tools, or tell the user what is missing."),
        tool_call_id=call["id"], name=name, status="error",
        artifact={"status": "error", "code": "skill_tool_not_allowed", "skills": list(scope.skills)},
    )


class SkillToolPolicyMiddleware(AgentMiddleware):
    """Hides and refuses tools outside the active skill's ``allowed-tools``."""

    def _filtered(self, request: ModelRequest) -> ModelRequest:
        scope = _scope(request.state, request.runtime.context)
        if scope is None:
            return request
        tools = [t for t in request.tools if (_tool_name(t) is None or scope.visible(_tool_name(t) or ""))]
        return request.override(tools=tools)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        return handler(self._filtered(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(self._filtered(request))

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        scope = _scope(request.state, request.runtime.context if request.runtime else None)
        call = request.tool_call
        if scope is None or scope.permits(call["name"], call.get("args") or {}):
            return None
        return refusal(dict(call), scope)

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        return self._refusal(request) or handler(request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        return self._refusal(request) or await handler(request)

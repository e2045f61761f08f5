"""Turns an ``ask_clarification`` call into a pause for a human (always the last middleware).

In an attended run the call is answered — without running the tool — by a
ToolMessage whose text is the readable question and whose
``artifact={"human_input": {...}}`` is the normalized request; the
projection reports it as a ``clarification`` event and the run ends
``interrupted``.  The turn must end there, even when the model batched other
calls with the question: the ``before_model`` hook sees the request among the
latest tool results and jumps to the end instead of calling the model again.
(The tool is not ``return_direct``: a call the model must fix — no question —
goes back to the model as an error.)  The person's answer is the next run's
input.

In an unattended run nobody can answer, so the call (the tool is not even
offered, but a model may still produce it) gets a normal tool result telling
the model to continue with reversible assumptions or stop with a ``BLOCKED``
result.  Both behaviours come from the run's
:class:`~deerflow.runtime.interaction_policy.RunInteractionPolicy`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import AnyMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Command

from deerflow.agents.middlewares.tool_errors import error_tool_message
from deerflow.errors import ToolFailure
from deerflow.runtime.clarification_form import build_clarification
from deerflow.runtime.interaction_policy import CLARIFICATION_TOOL, RunInteractionPolicy

logger = logging.getLogger(__name__)

Result = ToolMessage | Command[Any]


def awaiting_human(messages: Sequence[AnyMessage]) -> bool:
    """Whether the latest tool results include a clarification request."""
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            return False
        if isinstance(message.artifact, dict) and isinstance(message.artifact.get("human_input"), dict):
            return True
    return False


class ClarificationMiddleware(AgentMiddleware):
    """Intercepts ``ask_clarification`` according to the run's interaction policy.

    Args:
        policy: The run's interaction policy (resolved once per run).
    """

    folds_into_model_call = True  # its check only jumps to the end (pre_model_call.py)

    def __init__(self, policy: RunInteractionPolicy) -> None:
        super().__init__()
        self.policy = policy

    def answer(self, request: ToolCallRequest) -> ToolMessage:
        """The ToolMessage that stands in for running ``ask_clarification``."""
        call = request.tool_call
        call_id = call.get("id") or ""
        args = call.get("args") if isinstance(call.get("args"), dict) else {}
        if not self.policy.allows_clarification:
            logger.info("clarification suppressed in %s mode (call %s)", self.policy.mode, call_id)
            question = args.get("question")
            return ToolMessage(
                content=self.policy.suppressed_clarification(question if isinstance(question, str) else ""),
                tool_call_id=call_id, name=CLARIFICATION_TOOL,
                artifact={"status": "suppressed", "code": "clarification_unavailable", "mode": self.policy.mode},
            )
        try:
            built = build_clarification(args, tool_call_id=call_id)
        except ToolFailure as exc:
            return error_tool_message(request, exc)
        if built.form.dropped or built.form.degraded:
            logger.info("clarification form normalized: dropped=%s degraded=%s",
                        list(built.form.dropped), built.form.degraded)
        return ToolMessage(
            id=built.payload["request_id"], content=built.text, tool_call_id=call_id, name=CLARIFICATION_TOOL,
            artifact={"human_input": built.payload},
        )

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        if request.tool_call["name"] != CLARIFICATION_TOOL:
            return handler(request)
        return self.answer(request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        if request.tool_call["name"] != CLARIFICATION_TOOL:
            return await handler(request)
        return self.answer(request)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        del runtime
        return {"jump_to": "end"} if awaiting_human(state.get("messages", [])) else None

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)


__all__ = ["ClarificationMiddleware", "awaiting_human"]

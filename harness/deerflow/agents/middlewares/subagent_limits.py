"""Subagent limits of the lead: ``task`` calls per response and per run.

Every model response is reviewed before any tool runs (``wrap_model_call``):

* at most ``max_concurrent_subagents`` ``task`` calls of one response run
  (run option, else ``subagents.max_concurrent``; clamped to 1-16);
* at most ``max_total_subagents`` delegations per run (run option, else
  ``subagents.max_total_per_run``; clamped to 1-50), counted from the
  delegation ledger (``delegations`` in state) entries of the current
  ``run_id``.  Without a run id (a custom graph integration that passes no
  :class:`RunContext`) the thread's whole ledger counts — fail-restrictive —
  and a warning is logged.

Calls over either limit are answered with an error ToolMessage saying which
limit refused them (the agent loop does not execute an answered call), and
a ``notice`` (``subagent_limit``) tells the user.  The response itself is
kept, so the conversation stays truthful about what the model asked for.
Refusing calls does not end the run (the model sees the refusals and goes on),
so the run's status is not ``stopped`` because of these limits.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langgraph.types import Command

from deerflow.agents.middlewares._review import ResponseReviewMiddleware

logger = logging.getLogger(__name__)

TASK_TOOL = "task"
CONCURRENT_RANGE = (1, 16)
TOTAL_RANGE = (1, 50)


def clamp(value: Any, bounds: tuple[int, int], default: int) -> int:
    """``value`` as an int within ``bounds`` (``default`` when it is not a number)."""
    try:
        number = int(value) if value is not None else default
    except (TypeError, ValueError):
        number = default
    return max(bounds[0], min(bounds[1], number))


def delegations_in_run(ledger: Iterable[Mapping[str, Any]] | None, run_id: str | None) -> int:
    """Ledger entries that count against the run's total (all of them without a run id)."""
    entries = list(ledger or [])
    if run_id is None:
        return len(entries)
    return sum(1 for entry in entries if entry.get("run_id") == run_id)


def _run_id(request: ModelRequest) -> str | None:
    context = getattr(request.runtime, "context", None)
    run_id = getattr(context, "run_id", None)
    return run_id if isinstance(run_id, str) and run_id else None


def refusal(call: ToolCall, *, reason: str, limit: int, used: int = 0) -> ToolMessage:
    """The answer to a ``task`` call over a limit."""
    if reason == "concurrency":
        text = (f"Refused: at most {limit} task calls run per response, and this one was over that limit, so no "
                "subagent was started. If it is still needed, call task again in a later response.")
    else:
        text = (f"Refused: this run has used all {limit} subagent delegations it may make ({used} so far). "
                "Do the remaining work yourself, or finish with what you have.")
    return ToolMessage(content=text, tool_call_id=call["id"] or "", name=TASK_TOOL, status="error",
                       artifact={"status": "error", "code": f"subagent_{reason}_limit"})


class SubagentLimitMiddleware(ResponseReviewMiddleware):
    """Refuses ``task`` calls over the per-response or per-run limit.

    Args:
        max_concurrent: ``task`` calls run per response (clamped 1-16).
        max_total: Delegations per run (clamped 1-50).
    """

    guard_name = "subagent_limits"

    def __init__(self, *, max_concurrent: int, max_total: int) -> None:
        super().__init__()
        self.max_concurrent = clamp(max_concurrent, CONCURRENT_RANGE, 3)
        self.max_total = clamp(max_total, TOTAL_RANGE, 10)

    def review(self, request: ModelRequest, response: ModelResponse) -> ModelResponse | ExtendedModelResponse:
        answer = next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)
        calls = [c for c in (answer.tool_calls if answer is not None else []) if c["name"] == TASK_TOOL]
        if not calls:
            return response
        run_id = _run_id(request)
        if run_id is None:
            logger.warning("no run_id in the run context: counting the thread's whole delegation ledger "
                           "against max_total_subagents (fail-restrictive); pass a RunContext with run_id")
        used = delegations_in_run(request.state.get("delegations"), run_id)
        room = max(0, self.max_total - used)
        allowed = min(self.max_concurrent, room)
        if allowed >= len(calls):
            return response
        messages = [refusal(c, reason="total" if i >= room else "concurrency",
                            limit=self.max_total if i >= room else self.max_concurrent, used=used)
                    for i, c in enumerate(calls) if i >= allowed]
        self.notify(request, kind="subagent_limit",
                    text=f"{len(messages)} task call(s) refused: {allowed} started in this response; "
                         f"{used} of {self.max_total} delegations already used in this run.",
                    data={"refused": len(messages), "started": allowed, "used": used, "max_total": self.max_total})
        return ExtendedModelResponse(model_response=response, command=Command(update={"messages": messages}))


__all__ = ["SubagentLimitMiddleware", "clamp", "delegations_in_run", "refusal"]

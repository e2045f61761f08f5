"""Applies the user's answer to a persistence-consent request when the next run starts.

A tool that changes what later runs see (``install_skill``, ``update_agent``)
ends its turn with a ``human_input`` request (``source:
"persistence_approval"``, see :mod:`deerflow.runtime.consent`).  The answer is
the next run's input.  This middleware's ``before_agent`` hook sees it right
after the pending request and:

* on a *yes* in an attended run: grants the exact recorded change to a fresh
  tool-call id (in the run's memory only) and jumps to the tools node with a
  harness-written AI message calling the tool with the recorded arguments, so
  the real tool makes the change through every tool middleware and the model
  reads the result;
* on anything else (a no, an unclear answer, or any answer in a run nobody
  attends): changes nothing.

Each decision is a ``consent_decision`` notice.  The middleware must be the
last one with a ``before_agent`` hook: jumping to the tools node skips the
``before_agent`` hooks after it.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from deerflow.agents.clarification_reply import pending_request
from deerflow.runtime.consent import (
    REPLAY_NOTE,
    ConsentGrants,
    decision_notice,
    is_consent_request,
    is_subagent,
    parse_answer,
)
from deerflow.runtime.notes import NOTE_KEY
from deerflow.runtime.services import HostServices

logger = logging.getLogger(__name__)


def _grants(context: Any) -> ConsentGrants | None:
    services = getattr(context, "services", None)
    if not isinstance(services, HostServices):
        return None
    if services.consent_grants is None:
        services.consent_grants = ConsentGrants()
    return services.consent_grants


class ConsentMiddleware(AgentMiddleware):
    """Turns the user's yes to a persistent change into exactly that change, made by its tool."""

    @hook_config(can_jump_to=["tools"])
    def before_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages = state.get("messages") or []
        if len(messages) < 2 or not isinstance(messages[-1], HumanMessage):
            return None
        request = pending_request(messages[:-1])
        if request is None or not is_consent_request(request):
            return None
        change = request["change"]
        request_id = str(request.get("request_id", ""))
        context = runtime.context
        policy = getattr(context, "interaction", None)
        attended = policy is not None and policy.may_request_consent(subagent=is_subagent(context))
        approved = attended and parse_answer(messages[-1].text)
        reason = "user_approved" if approved else ("user_denied" if attended else "unattended_answer")
        grants = _grants(context) if approved else None
        if approved and grants is None:
            logger.warning("consent for %s approved, but the run has no services to hold the grant", change["tool"])
            approved, reason = False, "no_run_context"
        runtime.stream_writer(decision_notice(change, approved=approved, reason=reason, request_id=request_id))
        if not approved or grants is None:
            return None
        call_id = grants.grant(change)
        replay = AIMessage(content="", tool_calls=[{"name": change["tool"], "args": dict(change["args"]),
                                                    "id": call_id, "type": "tool_call"}],
                           additional_kwargs={NOTE_KEY: REPLAY_NOTE})
        return {"messages": [replay], "jump_to": "tools"}

    @hook_config(can_jump_to=["tools"])
    async def abefore_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)


__all__ = ["ConsentMiddleware"]

"""Applies a person's answer to a sandbox network approval request when the next run starts.

In ``allowlist`` mode, a tool call that hit a host needing approval ends its
turn with a human-input request (``source: "network_approval"``, see
:mod:`deerflow.tools.builtins.network_access`).  The answer arrives as the
next run's input, through any entry point (``client.reply``, the CLI, the
HTTP API).  This middleware's ``before_agent`` hook sees that input right
after the pending request, reads it (:func:`~deerflow.sandbox.network.approval.parse_answer`:
anything unclear is a denial) and records it on the provider's network gate:

* *allow once* — the targets are reachable for this run only;
* *always allow for this thread* — persisted for the thread;
* *deny* — refused for this run without asking again.

Each decision is reported as a ``network_decision`` notice.  Nothing is
written to the conversation: the answer itself is already the user message.

Only a person can grant access: an answer that arrives in an unattended run
(a schedule or webhook continuing a thread that was waiting) or in a subagent
is read as a denial, the same rule as for consent to persistent changes.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from deerflow.agents.clarification_reply import pending_request
from deerflow.runtime.consent import is_subagent
from deerflow.runtime.services import services_of
from deerflow.sandbox.network.approval import answer_notices, is_approval_request, parse_answer

logger = logging.getLogger(__name__)


class NetworkApprovalMiddleware(AgentMiddleware):
    """Turns the reply to a network approval request into grants on the sandbox's gate."""

    def before_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages = state.get("messages") or []
        if len(messages) < 2 or not isinstance(messages[-1], HumanMessage):
            return None
        request = pending_request(messages[:-1])
        if request is None or not is_approval_request(request):
            return None
        context = runtime.context
        policy = getattr(context, "interaction", None)
        attended = policy is not None and policy.may_request_consent(subagent=is_subagent(context))
        answer = parse_answer(messages[-1].text) if attended else "deny"
        targets = [t for t in request["targets"] if isinstance(t, str)]
        sandbox = services_of(context).sandbox
        egress = sandbox.egress if sandbox is not None else None
        if egress is None:
            logger.warning("network approval answered, but the sandbox has no egress proxy")
            return None
        egress.gate.apply_answer(context.paths.root, run_id=context.run_id, targets=targets, answer=answer)
        for notice in answer_notices(targets, answer, request_id=str(request.get("request_id", ""))):
            runtime.stream_writer(notice)
        return None

    async def abefore_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)


__all__ = ["NetworkApprovalMiddleware"]

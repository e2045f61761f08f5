"""Network decisions around one ``bash``/``python`` call in ``allowlist`` mode.

The exec tools open a scope on the provider's egress proxy for the duration
of a call (:func:`network_scope`), so the proxy knows which run is executing
and whether it may ask a person.  When the call ends, :func:`settle`:

* streams a ``notice`` (``network_request`` / ``network_decision``) for each
  distinct decision, so the run's events record host and outcome;
* tells the model, in the tool result, which targets were refused and why;
* if some target awaits approval, attaches a ``human_input`` request (source
  ``network_approval``) to the result.  The clarification middleware then
  ends the turn as it does for ``ask_clarification``; the person's answer
  starts the next run, which applies it
  (:class:`~deerflow.agents.middlewares.network_approval.NetworkApprovalMiddleware`).

Who may ask comes from the run's interaction policy
(:meth:`~deerflow.runtime.interaction_policy.RunInteractionPolicy.may_request_network_approval`):
unattended runs and subagents are denied without asking.  A subagent's run
context says so with the ``is_subagent`` option.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain.tools import ToolRuntime

from deerflow.runtime.context import RunContext
from deerflow.sandbox.network.approval import (
    approval_request,
    reason_text,
    record_notices,
    request_text,
)
from deerflow.sandbox.network.policy import CallScope, OpenScope, ScopeReport

Reply = tuple[str, dict[str, Any]]


def call_scope(context: RunContext) -> CallScope:
    """The scope of a tool call made in ``context`` (its run, and whether it may ask)."""
    subagent = bool(context.options.is_subagent)
    may_ask = context.interaction.may_request_network_approval(subagent=subagent)
    reason = "" if may_ask else ("subagent" if subagent else "unattended")
    return CallScope(context.run_id, may_ask, reason)


@contextmanager
def network_scope(runtime: ToolRuntime[RunContext], provider: Any) -> Iterator[OpenScope | None]:
    """Open a scope on the provider's egress proxy, if it has one (``None`` otherwise)."""
    egress = getattr(provider, "egress", None)
    if egress is None:
        yield None
        return
    with egress.scope(runtime.context.paths.root, call_scope(runtime.context)) as handle:
        yield handle


def _refusals(report: ScopeReport) -> list[str]:
    lines = []
    for record in report.records:
        if record.decision == "denied":
            line = f"[network: {record.target} was refused: {reason_text(record.reason)}]"
            if line not in lines:
                lines.append(line)
    return lines


def settle(
    runtime: ToolRuntime[RunContext], handle: OpenScope | None, reply: Reply, *, tool: str
) -> Reply:
    """Report the call's network decisions and raise an approval request if one is due."""
    if handle is None or not handle.report.records:
        return reply
    report = handle.report
    for notice in record_notices(report):
        runtime.stream_writer(notice)
    text, artifact = reply
    lines = [text, *_refusals(report)]
    artifact = {**artifact, "network": {d: report.targets(d) for d in ("allowed", "pending", "denied")}}
    pending = report.targets("pending")
    if pending:
        request = approval_request(pending, tool_call_id=runtime.tool_call_id or "", tool=tool)
        lines.append(
            f"[network: {', '.join(pending)} is not on the allowlist, so the connection was refused. "
            "The user has been asked to approve it and this turn ends here; once they answer, "
            "retry if it was allowed.]"
        )
        lines += ["", request_text(request)]
        artifact["human_input"] = request
    return "\n".join(lines), artifact


__all__ = ["call_scope", "network_scope", "settle"]

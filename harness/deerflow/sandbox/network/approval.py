"""Words and payloads of network approval: notices, the human-input request, the answer.

Pure functions shared by the exec tools (which raise a request when the
sandbox hit a host that needs a person's approval) and the approval
middleware (which applies the person's answer when the next run starts).

The request uses the same human-input protocol as ``ask_clarification``
(version 1, ``choice_with_other``), with ``source: "network_approval"`` and
the ``targets`` it is about, so every front end that can answer a
clarification can answer it, and ``client.reply`` validates the answer the
same way.  Anything that is not recognisably an approval is a denial: the
safe reading of an unclear answer is "no".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deerflow.runtime.clarification_form import format_request_text, option_items
from deerflow.sandbox.network.policy import Approval, NetworkRecord, ScopeReport

APPROVAL_SOURCE = "network_approval"
ALLOW_ONCE = "Allow once (this run only)"
ALLOW_ALWAYS = "Always allow for this thread"
DENY = "Deny"
OPTIONS = (ALLOW_ONCE, ALLOW_ALWAYS, DENY)

_ONCE_WORDS = frozenset({"1", "once", "allow once", "approve once", "allow", "approve", "yes", "y"})
_ALWAYS_WORDS = frozenset({"2", "always", "allow always", "approve always", "always allow"})

_REASON_TEXT = {
    "allowlist": "it is on the sandbox allowlist",
    "approved_once": "approved for this run",
    "approved_always": "approved for this thread",
    "awaiting_approval": "not on the allowlist; the user is asked to approve it",
    "unattended": "not on the allowlist, and nobody can approve it in an unattended run",
    "subagent": "not on the allowlist, and a subagent cannot ask for approval",
    "outside_tool_call": "not on the allowlist, and no tool call was running to ask for it",
    "user_denied": "the user denied it",
    "private_address": "it resolves to a private or loopback address",
    "unresolvable": "the name does not resolve",
    "upstream_unreachable": "the host did not accept the connection",
}


def reason_text(reason: str) -> str:
    """A short human explanation of a decision reason."""
    return _REASON_TEXT.get(reason, reason)


def record_notices(report: ScopeReport) -> list[dict[str, Any]]:
    """``notice`` events for a tool call's decisions: each distinct one once.

    A connection that needed a decision beyond the operator's allowlist is a
    ``network_request`` followed by its ``network_decision``; a connection the
    allowlist (or an earlier grant) let through is just a ``network_decision``.
    """
    notices: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for record in report.records:
        marker = (record.target, record.decision, record.reason)
        if marker in seen:
            continue
        seen.add(marker)
        data = {"host": record.host, "port": record.port, "target": record.target, "method": record.method}
        if record.reason != "allowlist":
            notices.append(_notice("network_request", f"The sandbox asked to reach {record.target}.", data))
        notices.append(_decision_notice(record, data))
    return notices


def _decision_notice(record: NetworkRecord, data: dict[str, Any]) -> dict[str, Any]:
    verb = {"allowed": "allowed", "pending": "held for approval", "denied": "refused"}[record.decision]
    text = f"Network access to {record.target} {verb}: {reason_text(record.reason)}."
    return _notice("network_decision", text,
                   {**data, "decision": record.decision, "reason": record.reason, "by": "policy"})


def answer_notices(targets: Sequence[str], answer: Approval, *, request_id: str) -> list[dict[str, Any]]:
    """``network_decision`` notices for a person's answer to an approval request."""
    reason = {"once": "approved_once", "always": "approved_always", "deny": "user_denied"}[answer]
    decision = "denied" if answer == "deny" else "allowed"
    return [
        _notice("network_decision", f"Network access to {t}: {reason_text(reason)}.",
                {"target": t, "decision": decision, "reason": reason, "by": "user", "request_id": request_id})
        for t in targets
    ]


def _notice(kind: str, text: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "notice", "kind": kind, "text": text, "data": data}


def approval_request(targets: Sequence[str], *, tool_call_id: str, tool: str) -> dict[str, Any]:
    """The human-input request asking a person to approve ``targets``."""
    hosts = ", ".join(targets)
    payload: dict[str, Any] = {
        "version": 1,
        "kind": "human_input_request",
        "source": APPROVAL_SOURCE,
        "request_id": f"network:{tool_call_id}" if tool_call_id else f"network:{hosts}",
        "clarification_type": "risk_confirmation",
        "question": f"The sandbox tried to reach {hosts}, which is not on the allowlist. Allow it?",
        "context": (f"Requested by the {tool} tool. The connection was refused for now; "
                    "if you allow it, the agent can retry after your answer."),
        "input_mode": "choice_with_other",
        "options": option_items("option", OPTIONS),
        "targets": list(targets),
    }
    if tool_call_id:
        payload["tool_call_id"] = tool_call_id
    return payload


def request_text(payload: Mapping[str, Any]) -> str:
    """The readable form of an approval request."""
    return format_request_text(payload)


def parse_answer(text: str) -> Approval:
    """Read a reply to an approval request; anything unclear is a denial."""
    folded = " ".join(text.strip().casefold().split()).rstrip(".!")
    if folded == ALLOW_ONCE.casefold() or folded in _ONCE_WORDS:
        return "once"
    if folded == ALLOW_ALWAYS.casefold() or folded in _ALWAYS_WORDS:
        return "always"
    return "deny"


def is_approval_request(request: Mapping[str, Any] | None) -> bool:
    """Whether a pending human-input request is a network approval."""
    return (request is not None and request.get("source") == APPROVAL_SOURCE
            and isinstance(request.get("targets"), list))


__all__ = [
    "ALLOW_ALWAYS", "ALLOW_ONCE", "APPROVAL_SOURCE", "DENY", "OPTIONS", "answer_notices", "approval_request",
    "is_approval_request", "parse_answer", "reason_text", "record_notices", "request_text",
]

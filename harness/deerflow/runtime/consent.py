"""Consent for persistence: changes that outlive the run need the user's yes.

Some tools change what *later* runs see: ``install_skill`` puts a skill's
description into every later system prompt of the user, ``update_agent``
rewrites a custom agent's standing instructions.  A prompt-injected model
must not be able to make its injection permanent, so these tools never act on
the model's word alone:

* **interactive runs** — the first call changes nothing.  The tool prepares
  the change (validates it; an install snapshots the package where the sandbox
  cannot reach it), and answers with a ``human_input`` request (``source:
  "persistence_approval"``, the same protocol as ``ask_clarification`` and
  network approval, so the notebook form, the chat and ``client.reply`` all
  answer it).  The clarification middleware ends the turn.
* **the answer** — the next run's input.  ``ConsentMiddleware.before_agent``
  reads it (:func:`parse_answer`; anything unclear is "no"); on a yes it
  records a one-shot :class:`ConsentGrants` entry for a fresh tool-call id and
  replays the *exact* change recorded in the request through the tools node,
  so the real tool runs, with every tool middleware around it, and the model
  and the user see its result.
* **unattended runs and subagents** — nobody can say yes: the tool raises
  :func:`refusal`, a model-facing :class:`ToolFailure`, and nothing changes.

Grants live only in the run's memory (``RunContext.services``), so neither the
model nor anything stored in the thread can forge one; an answer given in an
unattended run (a schedule continuing a waiting thread) grants nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deerflow.errors import ToolFailure
from deerflow.runtime.clarification_form import format_request_text, option_items

CONSENT_SOURCE = "persistence_approval"
APPROVE = "Approve"
DENY = "Deny"
OPTIONS = (APPROVE, DENY)
REPLAY_NOTE = "consent_replay"
"""``additional_kwargs`` marker of the tool call the harness replays after a yes."""

_YES = frozenset({"1", "approve", "approved", "yes", "y", "allow", "yes, approve", "i approve"})


@dataclass(frozen=True)
class PendingChange:
    """A persistent change waiting for the user's answer.

    Attributes:
        tool: The tool that makes the change when approved.
        args: The exact arguments it will be called with.
        question: What the user is asked (one sentence).
        details: What exactly changes (shown above the question).
        data: Tool-specific facts the approved call needs (e.g. the snapshot id).
    """

    tool: str
    args: dict[str, Any]
    question: str
    details: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "args": dict(self.args), "data": dict(self.data)}


class ConsentGrants:
    """One run's approved changes, by the tool-call id the harness replays them under."""

    def __init__(self) -> None:
        self._granted: dict[str, dict[str, Any]] = {}

    def grant(self, change: Mapping[str, Any]) -> str:
        """Record an approved change; returns the tool-call id to replay it under."""
        call_id = f"consent-{uuid.uuid4().hex[:16]}"
        self._granted[call_id] = dict(change)
        return call_id

    def take(self, call_id: str | None, tool: str) -> dict[str, Any] | None:
        """The approved change for this call of ``tool`` (used up), or None."""
        change = self._granted.get(call_id or "")
        if change is None or change.get("tool") != tool:
            return None
        del self._granted[call_id or ""]
        return change


def is_subagent(context: Any) -> bool:
    """Whether ``context`` (a :class:`RunContext`, or None outside a run) is a subagent's."""
    return bool(context is not None and context.options.is_subagent)


def refusal(tool: str, context: Any, *, hint: str = "") -> ToolFailure | None:
    """The failure a run gets when it cannot ask the user (None: it can ask).

    Subagents never ask (they run for the lead, and nobody answers them);
    unattended runs have nobody to ask.
    """
    policy = getattr(context, "interaction", None)
    subagent = is_subagent(context)
    if policy is not None and policy.may_request_consent(subagent=subagent):
        return None
    who = "a subagent" if subagent else f"this run is unattended ({getattr(policy, 'mode', 'unknown')})"
    code = "consent_subagent" if subagent else "consent_unattended"
    text = (f"{tool} was refused and nothing was changed: it changes what later runs see, so it needs the "
            f"user's approval, and {who}, so nobody can give it. Do not try to make the change another way. "
            "Report in your final answer what you would have changed" + (f"; {hint}" if hint else "") + ".")
    return ToolFailure(text, code=code)


def consent_request(change: PendingChange, *, tool_call_id: str) -> dict[str, Any]:
    """The human-input request asking the user to approve ``change``."""
    payload: dict[str, Any] = {
        "version": 1,
        "kind": "human_input_request",
        "source": CONSENT_SOURCE,
        "request_id": f"consent:{tool_call_id or uuid.uuid4().hex[:12]}",
        "clarification_type": "risk_confirmation",
        "question": change.question,
        "context": change.details,
        "input_mode": "choice_with_other",
        "options": option_items("option", OPTIONS),
        "change": change.to_dict(),
    }
    if tool_call_id:
        payload["tool_call_id"] = tool_call_id
    return payload


def ask(change: PendingChange, *, tool_call_id: str) -> tuple[str, dict[str, Any]]:
    """The tool result that asks: the model reads that nothing happened yet."""
    request = consent_request(change, tool_call_id=tool_call_id)
    text = (f"[{change.tool}: nothing was changed yet. This change persists beyond this run, so the user has "
            "been asked to approve it and this turn ends here. If they approve, it is made exactly as "
            "requested and you will see the result; do not call the tool again for it.]\n\n"
            + format_request_text(request))
    return text, {"status": "awaiting_approval", "human_input": request}


def parse_answer(text: str) -> bool:
    """Whether a reply approves the change; anything unclear is a no."""
    folded = " ".join(text.strip().casefold().split()).rstrip(".!")
    return folded in _YES


def is_consent_request(request: Mapping[str, Any] | None) -> bool:
    """Whether a pending human-input request asks for consent to a persistent change."""
    return (request is not None and request.get("source") == CONSENT_SOURCE
            and isinstance(request.get("change"), dict) and isinstance(request["change"].get("tool"), str)
            and isinstance(request["change"].get("args"), dict))


def decision_notice(change: Mapping[str, Any], *, approved: bool, reason: str, request_id: str) -> dict[str, Any]:
    """The ``consent_decision`` notice recording a person's answer (or why none counted)."""
    tool = str(change.get("tool"))
    verb = "approved" if approved else "not approved"
    return {"type": "notice", "kind": "consent_decision", "text": f"{tool}: {verb} ({reason}).",
            "data": {"tool": tool, "approved": approved, "reason": reason, "request_id": request_id}}


__all__ = [
    "APPROVE", "CONSENT_SOURCE", "DENY", "OPTIONS", "REPLAY_NOTE", "ConsentGrants",
    "PendingChange", "ask", "consent_request", "decision_notice", "is_consent_request", "is_subagent",
    "parse_answer", "refusal",
]

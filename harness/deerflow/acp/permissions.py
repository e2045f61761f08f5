"""Answering an ACP agent's permission requests without a person in the loop.

An ACP agent may ask its client before it edits a file or runs a command.  A
DeerFlow run never waits on a human inside a tool call, so the answer comes from
policy, per agent (``acp_agents.<name>.permissions``):

* ``auto`` (default) — allow once in an *interactive* run (the person who asked is
  following the run and the agent works in its own workspace); deny in every
  unattended mode (scheduled, webhook, autonomous), where nobody is watching;
* ``deny`` — always deny;
* ``allow`` — always allow once (for agents the operator fully trusts).

Denying selects the agent's own reject option when it offers one, else cancels
the request, which ACP agents treat as a refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from acp.schema import AllowedOutcome, DeniedOutcome, PermissionOption, RequestPermissionResponse

PermissionSetting = Literal["auto", "deny", "allow"]


@dataclass(frozen=True)
class PermissionDecision:
    """What was asked and what the policy answered (kept for the tool result's metadata)."""

    title: str
    allowed: bool
    reason: str


def decide(setting: PermissionSetting, *, attended: bool) -> tuple[bool, str]:
    """Whether to allow, and why (for logs and the tool's metadata)."""
    if setting == "allow":
        return True, "acp_agents permissions: allow"
    if setting == "deny":
        return False, "acp_agents permissions: deny"
    if attended:
        return True, "interactive run (permissions: auto)"
    return False, "unattended run (permissions: auto denies)"


def answer(options: Sequence[PermissionOption], *, allowed: bool) -> RequestPermissionResponse:
    """The protocol answer: the first matching option, preferring one-off choices."""
    kinds = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
    for kind in kinds:
        option = next((o for o in options if o.kind == kind), None)
        if option is not None:
            return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))
    return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


__all__ = ["PermissionDecision", "PermissionSetting", "answer", "decide"]

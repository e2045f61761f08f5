"""Who is on the other end of a run, decided once.

A run is either *attended* (a person reads the events and can answer a
question) or *unattended* (a scheduler, a webhook, an autonomous loop: nobody
will answer).  Every behaviour that depends on that — whether the model is
offered ``ask_clarification``, what happens if it asks anyway, whether a
sandbox may ask a person to approve network access, whether a tool may ask to
make a change that outlives the run, and what the system
prompt says about missing information — reads one :class:`RunInteractionPolicy`,
resolved by :meth:`RunInteractionPolicy.resolve` once per run and carried on
the run's context.  No component re-derives the mode from raw options.

Resolution (first match wins):

1. an explicit ``interaction_mode`` (unknown value → :class:`ConfigError`);
2. legacy hints: ``non_interactive`` → ``scheduled``,
   ``channel_name="github"`` → ``webhook``, ``disable_clarification`` →
   ``autonomous``;
3. otherwise ``interactive``.

The keys above are :data:`INTERNAL_CONTEXT_KEYS`: only trusted, in-process
callers may set them; public requests carrying them are refused by the run
manager, and they never reach checkpoint-persisted configuration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from deerflow.errors import ConfigError, UserError
from deerflow.run_options import INTERACTION_OPTIONS, RunOptions

InteractionMode = Literal["interactive", "scheduled", "webhook", "autonomous"]
MODES: tuple[str, ...] = get_args(InteractionMode)

INTERNAL_CONTEXT_KEYS = INTERACTION_OPTIONS
"""Run options only internal callers may set (they switch off human interaction)."""

CLARIFICATION_TOOL = "ask_clarification"

_TRUE_STRINGS = frozenset({"1", "true", "yes", "on"})


def _flag(value: Any) -> bool:
    """A legacy boolean hint: real booleans, 1, or the usual true-ish strings."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value == 1
    return isinstance(value, str) and value.strip().lower() in _TRUE_STRINGS


@dataclass(frozen=True)
class RunInteractionPolicy:
    """The interaction mode of one run and everything derived from it.

    Attributes:
        mode: ``interactive``, ``scheduled``, ``webhook`` or ``autonomous``.
        source: What decided the mode (``interaction_mode``, a legacy hint's
            key, or ``default``), for logs and diagnostics.
    """

    mode: InteractionMode = "interactive"
    source: str = "default"

    @classmethod
    def resolve(cls, options: RunOptions | Mapping[str, Any] | None) -> RunInteractionPolicy:
        """Resolve the policy from a run's options.

        Raises:
            ConfigError: an explicit ``interaction_mode`` that is not a known mode.
            UserError: raw options that are not valid run options.
        """
        options = RunOptions.parse(options)
        explicit = options.interaction_mode
        if explicit is not None:
            mode = str(explicit).strip().lower()
            if mode not in MODES:
                raise ConfigError(f"unknown interaction mode {str(explicit)!r}; use one of: {', '.join(MODES)}",
                                  key="interaction_mode")
            return cls(mode=cast(InteractionMode, mode), source="interaction_mode")  # checked just above
        if _flag(options.non_interactive):
            return cls(mode="scheduled", source="non_interactive")
        channel = options.channel_name
        if isinstance(channel, str) and channel.strip().lower() == "github":
            return cls(mode="webhook", source="channel_name")
        if _flag(options.disable_clarification):
            return cls(mode="autonomous", source="disable_clarification")
        return cls()

    @classmethod
    def for_request(cls, options: RunOptions, *, trusted: bool) -> RunInteractionPolicy:
        """Resolve the policy of a run request, enforcing the trust boundary.

        Raises:
            UserError: a public (untrusted) request carries internal-only keys.
            ConfigError: an unknown explicit mode.
        """
        refused = sorted(INTERNAL_CONTEXT_KEYS.intersection(options.to_dict())) if not trusted else []
        if refused:
            raise UserError(f"run option{'s' if len(refused) > 1 else ''} {', '.join(refused)} "
                            "can only be set by internal callers, not in a public request")
        return cls.resolve(options)

    @property
    def attended(self) -> bool:
        """Whether a person can answer questions during the run."""
        return self.mode == "interactive"

    @property
    def allows_clarification(self) -> bool:
        """Whether ``ask_clarification`` may end the turn waiting for a human."""
        return self.attended

    @property
    def hidden_tools(self) -> frozenset[str]:
        """Tool names the model must not be offered in this mode."""
        return frozenset() if self.attended else frozenset({CLARIFICATION_TOOL})

    def may_request_network_approval(self, *, subagent: bool = False) -> bool:
        """Whether a pending sandbox network request may ask a person to approve it.

        Unattended runs deny such requests outright (nobody would answer), and
        subagents always deny them, even inside an interactive run.
        """
        return self.attended and not subagent

    def may_request_consent(self, *, subagent: bool = False) -> bool:
        """Whether a tool may ask a person to approve a change that outlives the run.

        Such changes (installing a skill, rewriting a custom agent) are refused
        in unattended runs and in subagents, where nobody can say yes
        (:mod:`deerflow.runtime.consent`).
        """
        return self.attended and not subagent

    def prompt_guidance(self) -> str:
        """The system prompt's ``<interaction>`` section for this mode."""
        return interaction_guidance(self.mode)

    def suppressed_clarification(self, question: str) -> str:
        """What the model reads when it asks a question nobody can answer."""
        return suppressed_clarification_text(self.mode, question)


# -- prompt text (pure functions) ------------------------------------------------------------

BLOCKED_MARKER = "BLOCKED"


def blocked_result_format() -> str:
    """The structured shape of a result that stops for a missing decision."""
    return (f"{BLOCKED_MARKER}\n"
            "missing_decision: <the one decision a person has to make>\n"
            "why: <why it cannot be safely assumed: high risk or irreversible>\n"
            "done: <what you completed without it, or 'nothing'>")


def interaction_guidance(mode: str) -> str:
    """How to handle missing information, per interaction mode."""
    if mode == "interactive":
        return (
            "A person is following this run and can answer questions.\n"
            "- First use what is available: the conversation, uploaded files, the workspace.\n"
            "- When a detail is missing but a reasonable, reversible default exists, proceed with it "
            "and say which assumption you made.\n"
            "- Call ask_clarification when essential information is missing, when the user must choose "
            "between approaches with different outcomes, or before high-risk or irreversible work that "
            "was not clearly authorized. Make it the only tool call of that turn; the run pauses until "
            "the person answers.\n"
            "- To collect several values at once, pass `fields` (a form) instead of asking one question "
            "after another; use a multi_select field when several options may be chosen.")
    return (
        f"This run is unattended ({mode}): nobody will answer questions, so never wait for a person "
        "and do not try to ask one.\n"
        "- Use the available context. Where something is unspecified, make the smallest reversible "
        "assumption and continue.\n"
        "- List every material assumption in your final answer.\n"
        "- If work that is high-risk or irreversible needs a decision you were not given, do not do it. "
        "Finish the safe parts, then end your answer with:\n" + blocked_result_format())


def suppressed_clarification_text(mode: str, question: str) -> str:
    """The tool result replacing a clarification in an unattended run.

    It must never tell the model to simply carry out an ambiguous action: it
    points to reversible assumptions, or to a ``BLOCKED`` result for
    high-risk work.
    """
    asked = f" Your question was: {question.strip()!r}." if question.strip() else ""
    return (
        f"Not delivered: this run is unattended ({mode}) and nobody can answer questions.{asked}\n"
        "Continue without an answer: use the context you have, choose the smallest reversible assumption "
        "for each open point, and list those assumptions in your final answer. If the missing decision "
        "governs high-risk or irreversible work, do not perform that work; finish what is safe and end "
        "with a result in this form:\n" + blocked_result_format())


@dataclass(frozen=True)
class BlockedResult:
    """A parsed ``BLOCKED`` result: the decision an unattended run could not make."""

    missing_decision: str
    why: str = ""
    done: str = ""


_BLOCKED_LINE = re.compile(r"^\s*(missing_decision|why|done)\s*:\s*(.*)$")


def parse_blocked_result(text: str) -> BlockedResult | None:
    """Find a ``BLOCKED`` block in a final answer (None when the run was not blocked).

    Hosts of unattended runs (schedulers, webhooks) use it to route the
    missing decision to a person instead of treating the run as done.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == BLOCKED_MARKER), None)
    if start is None:
        return None
    found: dict[str, str] = {}
    for line in lines[start + 1:]:
        match = _BLOCKED_LINE.match(line)
        if match:
            found.setdefault(match.group(1), match.group(2).strip())
    if not found.get("missing_decision"):
        return None
    return BlockedResult(found["missing_decision"], found.get("why", ""), found.get("done", ""))


__all__ = [
    "BLOCKED_MARKER", "CLARIFICATION_TOOL", "INTERNAL_CONTEXT_KEYS", "MODES", "BlockedResult", "InteractionMode",
    "RunInteractionPolicy", "blocked_result_format", "interaction_guidance", "parse_blocked_result",
    "suppressed_clarification_text",
]

"""Run interaction policy: modes, precedence, trust boundary, and what each mode allows."""

from __future__ import annotations

import pytest

from deerflow.errors import ConfigError, UserError
from deerflow.run_options import RunOptions
from deerflow.runtime.interaction_policy import (
    INTERNAL_CONTEXT_KEYS,
    RunInteractionPolicy,
    interaction_guidance,
    parse_blocked_result,
)

resolve = RunInteractionPolicy.resolve


@pytest.mark.parametrize("mode", ["interactive", "scheduled", "webhook", "autonomous"])
def test_explicit_modes(mode):
    policy = resolve({"interaction_mode": mode})
    assert policy.mode == mode and policy.source == "interaction_mode"


def test_explicit_mode_is_case_insensitive():
    assert resolve({"interaction_mode": " Scheduled "}).mode == "scheduled"


@pytest.mark.parametrize("bad", ["batch", "", "interactive!"])
def test_an_unknown_explicit_mode_is_a_config_error(bad):
    with pytest.raises(ConfigError) as info:
        resolve({"interaction_mode": bad})
    assert info.value.key == "interaction_mode" and "interactive, scheduled, webhook, autonomous" in str(info.value)


def test_a_mode_that_is_not_text_is_refused_as_a_run_option():
    with pytest.raises(UserError, match="run option 'interaction_mode'"):
        resolve({"interaction_mode": 3})


@pytest.mark.parametrize(("context", "mode"), [
    ({"non_interactive": True}, "scheduled"),
    ({"non_interactive": "true"}, "scheduled"),
    ({"channel_name": "github"}, "webhook"),
    ({"channel_name": "GitHub"}, "webhook"),
    ({"disable_clarification": True}, "autonomous"),
    ({"channel_name": "slack"}, "interactive"),
    ({"non_interactive": False, "disable_clarification": "no"}, "interactive"),
    ({}, "interactive"),
    (None, "interactive"),
])
def test_legacy_hints(context, mode):
    assert resolve(context).mode == mode


def test_legacy_hints_are_checked_in_order():
    everything = {"non_interactive": True, "channel_name": "github", "disable_clarification": True}
    assert resolve(everything).mode == "scheduled"
    assert resolve({"channel_name": "github", "disable_clarification": True}).mode == "webhook"


def test_an_explicit_mode_wins_over_legacy_hints():
    policy = resolve({"interaction_mode": "interactive", "non_interactive": True, "disable_clarification": True})
    assert policy.mode == "interactive" and policy.attended


def test_public_requests_may_not_carry_internal_keys():
    for key in sorted(INTERNAL_CONTEXT_KEYS):
        with pytest.raises(UserError, match=key):
            RunInteractionPolicy.for_request(RunOptions.parse({key: "1", "model_name": "m"}), trusted=False)
    assert RunInteractionPolicy.for_request(RunOptions(model_name="m"), trusted=False).mode == "interactive"
    assert RunInteractionPolicy.for_request(RunOptions(non_interactive=True), trusted=True).mode == "scheduled"


def test_only_interactive_runs_offer_and_allow_clarification():
    interactive, scheduled = resolve({}), resolve({"interaction_mode": "scheduled"})
    assert interactive.allows_clarification and interactive.hidden_tools == frozenset()
    assert not scheduled.allows_clarification and scheduled.hidden_tools == {"ask_clarification"}


@pytest.mark.parametrize(("mode", "subagent", "allowed"), [
    ("interactive", False, True), ("interactive", True, False),
    ("scheduled", False, False), ("webhook", False, False), ("autonomous", False, False),
])
def test_network_approval_eligibility(mode, subagent, allowed):
    assert resolve({"interaction_mode": mode}).may_request_network_approval(subagent=subagent) is allowed


def test_guidance_differs_by_mode_and_unattended_never_says_ask():
    attended = interaction_guidance("interactive")
    unattended = interaction_guidance("webhook")
    assert "ask_clarification" in attended
    assert "ask_clarification" not in unattended
    assert "webhook" in unattended and "BLOCKED" in unattended and "assumption" in unattended


def test_suppressed_clarification_points_to_assumptions_or_blocked():
    text = resolve({"interaction_mode": "autonomous"}).suppressed_clarification("Delete the old table?")
    assert "Delete the old table?" in text
    assert "reversible assumption" in text and "BLOCKED" in text and "do not perform" in text


def test_parse_blocked_result():
    answer = ("I prepared the migration script.\n\nBLOCKED\nmissing_decision: whether to drop table users\n"
              "why: irreversible\ndone: wrote migrate.sql")
    blocked = parse_blocked_result(answer)
    assert blocked is not None and blocked.missing_decision == "whether to drop table users"
    assert blocked.why == "irreversible" and blocked.done == "wrote migrate.sql"
    assert parse_blocked_result("All done. Nothing BLOCKED here.") is None
    assert parse_blocked_result("BLOCKED\nwhy: no decision named") is None


def test_the_run_context_carries_one_consistent_policy(tmp_path):
    from deerflow.config.paths import HomePaths
    from deerflow.config.schema import AppConfig
    from deerflow.runtime.context import RunContext

    base = {"user_id": "u", "thread_id": "t", "run_id": "r", "paths": HomePaths(tmp_path).thread("u", "t"),
            "config": AppConfig()}
    by_mode = RunContext(**base, interaction_mode="webhook")
    assert by_mode.interaction.mode == "webhook" and not by_mode.interaction.may_request_network_approval()
    by_policy = RunContext(**base, interaction=resolve({"non_interactive": True}))
    assert by_policy.interaction_mode == "scheduled"
    with pytest.raises(ConfigError):
        RunContext(**base, interaction_mode="sometimes")

"""What each ThreadState reducer promises the rest of the harness."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware.types import AgentState
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.graph import END, START, StateGraph
from langgraph.types import Overwrite

from deerflow.agents.thread_state import (
    MAX_DELEGATIONS,
    MAX_SKILL_CONTEXT,
    ThreadState,
    merge_artifacts,
    merge_delegations,
    merge_goal,
    merge_promoted,
    merge_skill_context,
    merge_viewed_images,
    replace_goal,
)

# --- artifacts --------------------------------------------------------------


def test_artifacts_append_without_repeats_in_first_seen_order() -> None:
    merged = merge_artifacts(["/o/a.md", "/o/b.png"], ["/o/b.png", "/o/c.csv", "/o/a.md"])
    assert merged == ["/o/a.md", "/o/b.png", "/o/c.csv"]


def test_artifacts_empty_or_none_write_does_not_clear() -> None:
    assert merge_artifacts(["/o/a.md"], []) == ["/o/a.md"]
    assert merge_artifacts(["/o/a.md"], None) == ["/o/a.md"]
    assert merge_artifacts(None, ["/o/a.md", "/o/a.md"]) == ["/o/a.md"]


def run_updates(*updates: dict[str, Any]) -> dict[str, Any]:
    """Apply updates through a real ThreadState graph, one node per update."""
    graph = StateGraph(ThreadState)
    previous = START
    for index, update in enumerate(updates):
        name = f"step{index}"
        graph.add_node(name, lambda _state, update=update: update)
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return graph.compile().invoke({"messages": []})


def test_artifacts_are_cleared_only_by_overwrite() -> None:
    kept = run_updates({"artifacts": ["/o/a.md"]}, {"artifacts": []})
    cleared = run_updates({"artifacts": ["/o/a.md"]}, {"artifacts": Overwrite([])})
    assert kept["artifacts"] == ["/o/a.md"]
    assert cleared["artifacts"] == []


# --- viewed images ----------------------------------------------------------

PNG = {"base64": "iVBOR", "mime_type": "image/png"}
JPG = {"base64": "/9j/4", "mime_type": "image/jpeg"}


def test_viewed_images_merge_by_path_and_empty_dict_clears() -> None:
    merged = merge_viewed_images({"/w/a.png": PNG}, {"/w/b.jpg": JPG})
    assert merged == {"/w/a.png": PNG, "/w/b.jpg": JPG}
    assert merge_viewed_images(merged, {}) == {}
    assert merge_viewed_images(merged, None) == merged
    assert merge_viewed_images(None, {"/w/a.png": PNG}) == {"/w/a.png": PNG}


# --- goal -------------------------------------------------------------------

ACTIVE = {"objective": "ship the report", "status": "active"}


def test_ordinary_write_cannot_displace_an_active_goal() -> None:
    assert merge_goal(ACTIVE, {}) == ACTIVE
    assert merge_goal(ACTIVE, None) == ACTIVE
    assert merge_goal(ACTIVE, {"objective": "stale snapshot", "status": "active"}) == ACTIVE


def test_ordinary_write_sets_a_goal_when_none_is_active() -> None:
    assert merge_goal(None, ACTIVE) == ACTIVE
    assert merge_goal({}, ACTIVE) == ACTIVE
    done = {"objective": "old", "status": "achieved"}
    assert merge_goal(done, ACTIVE) == ACTIVE


def test_goal_writer_replaces_or_clears_with_the_marker() -> None:
    new = {"objective": "new plan", "status": "active"}
    assert merge_goal(ACTIVE, replace_goal(new)) == new
    assert merge_goal(ACTIVE, replace_goal(None)) == {}


def test_goal_marker_is_applied_on_the_first_write_of_a_thread() -> None:
    state = run_updates({"goal": replace_goal(ACTIVE)}, {"goal": {"objective": "stale"}})
    assert state["goal"] == ACTIVE


# --- promoted ---------------------------------------------------------------


def test_promotions_union_within_one_catalog() -> None:
    current = {"catalog_hash": "h1", "names": ["web_search", "fetch"]}
    merged = merge_promoted(current, {"catalog_hash": "h1", "names": ["fetch", "sql"]})
    assert merged == {"catalog_hash": "h1", "names": ["web_search", "fetch", "sql"]}


def test_promotions_from_an_old_catalog_are_dropped() -> None:
    current = {"catalog_hash": "h1", "names": ["web_search"]}
    merged = merge_promoted(current, {"catalog_hash": "h2", "names": ["sql"]})
    assert merged == {"catalog_hash": "h2", "names": ["sql"]}


def test_promotions_tolerate_missing_values() -> None:
    current = {"catalog_hash": "h1", "names": ["web_search"]}
    assert merge_promoted(current, None) == current
    assert merge_promoted(None, {"catalog_hash": "h1", "names": ["a", "a"]}) == {
        "catalog_hash": "h1",
        "names": ["a"],
    }


# --- delegations ------------------------------------------------------------


def task(task_id: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "status": status, **extra}


def test_delegations_append_and_latest_entry_wins_in_place() -> None:
    ledger = merge_delegations(None, [task("t1", "running"), task("t2", "running")])
    ledger = merge_delegations(ledger, task("t1", "completed", result="ok"))
    assert ledger == [task("t1", "completed", result="ok"), task("t2", "running")]


@pytest.mark.parametrize("terminal", ["completed", "failed", "cancelled", "timed_out"])
def test_terminal_delegation_is_never_downgraded(terminal: str) -> None:
    ledger = [task("t1", terminal, result="final")]
    assert merge_delegations(ledger, [task("t1", "running", progress="late")]) == ledger


def test_terminal_delegation_can_move_to_another_terminal_status() -> None:
    ledger = [task("t1", "completed")]
    assert merge_delegations(ledger, [task("t1", "failed")]) == [task("t1", "failed")]


def test_delegation_ledger_keeps_the_most_recent_entries() -> None:
    ledger = merge_delegations(None, [task(f"t{i}", "completed") for i in range(MAX_DELEGATIONS)])
    ledger = merge_delegations(ledger, [task("new", "running")])
    assert len(ledger) == MAX_DELEGATIONS
    assert ledger[0]["id"] == "t1"
    assert ledger[-1]["id"] == "new"


def test_delegation_entry_without_id_is_rejected() -> None:
    with pytest.raises(ValueError, match="id"):
        merge_delegations([], [{"status": "running"}])


# --- skill context ----------------------------------------------------------


def skill(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "path": f"/skills/{name}/SKILL.md", "description": name, **extra}


def test_skill_context_dedupes_by_path_and_moves_reread_to_the_end() -> None:
    merged = merge_skill_context([skill("pdf"), skill("xlsx")], [skill("pdf")])
    assert [s["name"] for s in merged] == ["xlsx", "pdf"]


def test_skill_context_keeps_references_not_bodies() -> None:
    merged = merge_skill_context(None, [skill("pdf", body="# very long SKILL.md")])
    assert merged == [skill("pdf")]


def test_skill_context_drops_least_recently_read_beyond_cap() -> None:
    merged = merge_skill_context(None, [skill(f"s{i}") for i in range(MAX_SKILL_CONTEXT + 3)])
    merged = merge_skill_context(merged, [skill("s3")])
    assert len(merged) == MAX_SKILL_CONTEXT
    assert merged[0]["name"] == "s4"
    assert merged[-1]["name"] == "s3"


# --- the schema as a whole --------------------------------------------------


def test_every_added_field_is_optional_in_updates() -> None:
    added = set(ThreadState.__annotations__) - set(AgentState.__annotations__)
    assert "summary_text" in added
    assert added <= ThreadState.__optional_keys__
    assert "messages" in ThreadState.__required_keys__


def test_reduced_fields_start_empty_so_the_first_write_is_reduced() -> None:
    channels = StateGraph(ThreadState).channels
    reduced = ["artifacts", "viewed_images", "goal", "promoted", "delegations", "skill_context"]
    for name in reduced:
        channel = channels[name]
        assert isinstance(channel, BinaryOperatorAggregate)
        assert channel.get() in ([], {})
    state = run_updates({"skill_context": [skill("pdf", body="x")]})
    assert state["skill_context"] == [skill("pdf")]

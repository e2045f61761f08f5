"""Plan mode: a todo list, streamed as events, that the run may not silently abandon."""

from __future__ import annotations

import asyncio
from typing import Any

from deerflow.models.scripted import ScriptedChatModel
from deerflow.runtime import events as ev
from deerflow.runtime.notes import note_kind
from fixtures.agent_runs import AgentHarness


def todos(*items: tuple[str, str]) -> dict[str, Any]:
    return {"name": "write_todos",
            "args": {"todos": [{"content": c, "status": s} for c, s in items]}}


PLAN = todos(("Load the data", "in_progress"), ("Write the report", "pending"))
DONE = todos(("Load the data", "completed"), ("Write the report", "completed"))


def reminders(model: ScriptedChatModel) -> list[list[str]]:
    return [[m.text for m in call.messages if note_kind(m) == "todo_reminder"] for call in model.calls]


def test_write_todos_is_offered_only_in_plan_mode(tmp_path):
    model = ScriptedChatModel(script=["Hi."])
    asyncio.run(AgentHarness(tmp_path / "a").run(model, "hello", is_plan_mode=True))
    assert "write_todos" in model.calls[0].tools
    assert "write_todos" in model.calls[0].messages[0].text  # its guidance is in the system prompt

    plain = ScriptedChatModel(script=["Hi."])
    asyncio.run(AgentHarness(tmp_path / "b").run(plain, "hello"))
    assert "write_todos" not in plain.calls[0].tools


def test_each_todo_update_is_a_todos_event(tmp_path):
    model = ScriptedChatModel(script={"turns": [
        {"text": "Planning.", "tool_calls": [PLAN]}, {"text": "", "tool_calls": [DONE]}, "Here is the report.",
    ]})
    run = asyncio.run(AgentHarness(tmp_path).run(model, "Analyse", is_plan_mode=True))
    updates = run.of(ev.Todos)
    assert [[t["status"] for t in u.todos] for u in updates] == [["in_progress", "pending"],
                                                                 ["completed", "completed"]]
    assert updates[0].todos[1]["content"] == "Write the report"
    assert run.values["todos"] == DONE["args"]["todos"]
    assert not [n for n in run.notices if n.kind == "incomplete_todos"]
    assert reminders(model) == [[], [], []]  # all done: never reminded


def test_finishing_with_open_todos_is_reminded_once_and_can_recover(tmp_path):
    model = ScriptedChatModel(script={"turns": [
        {"text": "Planning.", "tool_calls": [PLAN]},
        "I think that is it.",  # tries to finish with open todos
        {"text": "Right, finishing the plan.", "tool_calls": [DONE]},
        "Report written.",
    ]})
    run = asyncio.run(AgentHarness(tmp_path).run(model, "Analyse", is_plan_mode=True))

    assert run.status == "success"
    assert len(model.calls) == 4
    seen = reminders(model)
    assert seen[:2] == [[], []] and len(seen[2]) == 1 and len(seen[3]) == 1
    assert "[in_progress] Load the data" in seen[2][0] and "[pending] Write the report" in seen[2][0]
    assert run.values["messages"][-1].text == "Report written."
    assert not [n for n in run.notices if n.kind == "incomplete_todos"]


def test_ending_again_with_open_todos_is_surfaced_to_the_user(tmp_path):
    model = ScriptedChatModel(script={"turns": [
        {"text": "Planning.", "tool_calls": [PLAN]}, "Done, I think.", "Still done.",
    ]})
    run = asyncio.run(AgentHarness(tmp_path).run(model, "Analyse", is_plan_mode=True))

    assert run.status == "success"
    assert len(model.calls) == 3  # one reminder, then the model's decision stands
    assert run.values["messages"][-1].text == "Still done."
    [notice] = [n for n in run.notices if n.kind == "incomplete_todos"]
    assert "2 unfinished todo(s)" in notice.text and "Write the report" in notice.text
    assert [t["status"] for t in notice.data["todos"]] == ["in_progress", "pending"]


def test_each_run_gets_its_own_reminder(tmp_path):
    harness = AgentHarness(tmp_path)
    model = ScriptedChatModel(script={"turns": [
        {"text": "", "tool_calls": [PLAN]}, "Pausing.", "Pausing anyway.",
        "Back, but stopping again.", "Stopping for real.",
    ]})
    asyncio.run(harness.run(model, "Analyse", is_plan_mode=True))
    second = asyncio.run(harness.run(model, "continue", is_plan_mode=True))
    assert len(model.calls) == 5
    assert len(reminders(model)[4]) == 2  # one reminder per run, both in the history
    assert [n.kind for n in second.notices if n.kind == "incomplete_todos"] == ["incomplete_todos"]

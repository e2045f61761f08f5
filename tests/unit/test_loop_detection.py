"""Loop detection: repeated identical tool calls are warned about, then stopped."""

from __future__ import annotations

import asyncio
from typing import Any

from deerflow.agents.middlewares.loop_detection import call_signature
from deerflow.config.schema import AppConfig
from deerflow.models.scripted import ScriptedChatModel
from deerflow.runtime import events as ev
from deerflow.runtime.notes import note_kind
from fixtures.agent_runs import AgentHarness

LS = {"name": "ls", "args": {"path": "/mnt/user-data/workspace"}}


def repeating(times: int, call: dict[str, Any] = LS, *, then: str = "All done.") -> dict[str, Any]:
    return {"turns": [{"text": f"Attempt {i + 1}.", "tool_calls": [call]} for i in range(times)] + [then]}


def notes_seen(model: ScriptedChatModel, call: int) -> list[str]:
    return [m.text for m in model.calls[call].messages if note_kind(m) == "loop_warning"]


def test_same_call_ten_times_is_warned_at_three_and_stopped_at_five(tmp_path):
    model = ScriptedChatModel(script=repeating(10))
    run = asyncio.run(AgentHarness(tmp_path).run(model, "List the workspace"))

    assert run.status == "stopped"  # not success: the guard ended the run
    assert run.error is not None and "kept repeating the same tool call" in run.error
    assert len(model.calls) == 5  # the 5th identical call ended the run; turns 6-10 never played
    assert [len(notes_seen(model, i)) for i in range(5)] == [0, 0, 0, 1, 2]
    assert "`ls` (3 times)" in notes_seen(model, 3)[0]
    assert "`ls` (4 times)" in notes_seen(model, 4)[1]
    assert len(run.of(ev.ToolResult)) == 4  # the 5th call never ran
    assert [e.name for e in run.of(ev.ToolCall)] == ["ls"] * 4

    final = run.values["messages"][-1]
    assert final.type == "ai" and final.tool_calls == []
    assert final.text.startswith("Attempt 5.")  # the model's own text is kept...
    assert "Stopped by loop detection" in final.text  # ...with the reason

    notices = [n for n in run.notices if n.kind == "loop_detected"]
    assert [n.data["action"] for n in notices] == ["warned", "warned", "stopped"]
    assert [n.data.get("stopped_by") for n in notices] == [None, None, "loop_detection"]
    assert notices[-1].data["calls"] == [{"name": "ls", "count": 5}]


def test_different_arguments_are_not_a_loop(tmp_path):
    turns = [{"text": "", "tool_calls": [{"name": "ls", "args": {"path": f"/mnt/user-data/{d}"}}]}
             for d in ("workspace", "outputs", "uploads", "workspace/", "outputs/")]
    model = ScriptedChatModel(script={"turns": [*turns, "Listed everything."]})
    run = asyncio.run(AgentHarness(tmp_path).run(model, "List all"))
    assert run.status == "success"
    assert not run.notices or all(n.kind != "loop_detected" for n in run.notices)
    assert run.values["messages"][-1].text == "Listed everything."


def test_thresholds_come_from_config_and_detection_can_be_off(tmp_path):
    strict = AppConfig.model_validate({"loop_detection": {"warn_after": 2, "stop_after": 3}})
    model = ScriptedChatModel(script=repeating(4))
    run = asyncio.run(AgentHarness(tmp_path / "a", config=strict).run(model, "go"))
    assert len(model.calls) == 3
    assert [n.data["action"] for n in run.notices if n.kind == "loop_detected"] == ["warned", "stopped"]

    off = AppConfig.model_validate({"loop_detection": {"enabled": False}})
    model = ScriptedChatModel(script=repeating(6))
    run = asyncio.run(AgentHarness(tmp_path / "b", config=off).run(model, "go"))
    assert len(model.calls) == 7 and len(run.of(ev.ToolResult)) == 6
    assert run.values["messages"][-1].text == "All done."


def test_counts_start_over_with_each_run(tmp_path):
    harness = AgentHarness(tmp_path)
    model = ScriptedChatModel(script={"turns": [
        {"text": "", "tool_calls": [LS]}, {"text": "", "tool_calls": [LS]}, "First done.",
        {"text": "", "tool_calls": [LS]}, {"text": "", "tool_calls": [LS]}, "Second done.",
    ]})
    asyncio.run(harness.run(model, "first"))
    second = asyncio.run(harness.run(model, "second"))
    assert second.values["messages"][-1].text == "Second done."
    assert not [n for n in second.notices if n.kind == "loop_detected"]  # 2 + 2, not 4


def test_calls_past_the_per_tool_cap_are_refused_with_an_error(tmp_path):
    config = AppConfig.model_validate({"loop_detection": {"max_calls_per_tool": 2}})
    paths = ["/mnt/user-data/workspace", "/mnt/user-data/outputs", "/mnt/user-data/uploads"]
    turns = [{"text": "", "tool_calls": [{"name": "ls", "args": {"path": p}}]} for p in paths]
    model = ScriptedChatModel(script={"turns": [*turns, "Stopping here."]})
    run = asyncio.run(AgentHarness(tmp_path, config=config).run(model, "List"))

    results = run.of(ev.ToolResult)
    assert [r.status for r in results] == ["success", "success", "error"]
    assert results[-1].code == "tool_call_limit"
    assert "`ls` has already been called 2 times" in results[-1].text
    assert "(empty)" not in results[-1].text  # the refused call did not run
    shown = model.calls[3].messages[-1]
    assert shown.type == "tool" and "This call was not run" in shown.text
    assert run.values["messages"][-1].text == "Stopping here."


def test_signature_ignores_argument_order_but_not_values():
    assert call_signature("ls", {"a": 1, "b": [1, 2]}) == call_signature("ls", {"b": [1, 2], "a": 1})
    assert call_signature("ls", {"a": 1}) != call_signature("ls", {"a": 2})
    assert call_signature("ls", {"a": 1}) != call_signature("glob", {"a": 1})

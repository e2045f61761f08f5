"""The clarification middleware on a real create_agent graph driven by the scripted model."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from deerflow.agents.middlewares.clarification import ClarificationMiddleware
from deerflow.agents.middlewares.tool_errors import ToolErrorHandlingMiddleware
from deerflow.models.scripted import ScriptedChatModel
from deerflow.runtime.clarification_form import MAX_FORM_FIELDS
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.tools.builtins.clarification import ask_clarification

WRITES: list[str] = []


@tool
def note(text: str) -> str:
    """Write a note."""
    WRITES.append(text)
    return "noted"


def run(turns: list, *, mode: str = "interactive", tools: list | None = None) -> tuple[dict, ScriptedChatModel]:
    model = ScriptedChatModel(script=turns)
    policy = RunInteractionPolicy.resolve({"interaction_mode": mode})
    offered = [t for t in (tools if tools is not None else [ask_clarification, note]) if t.name not in policy.hidden_tools]
    graph = create_agent(model, offered, middleware=[ToolErrorHandlingMiddleware(), ClarificationMiddleware(policy)])
    return graph.invoke({"messages": [("user", "go")]}), model


def ask(**args: object) -> dict:
    return {"tool_calls": [{"name": "ask_clarification", "args": args, "id": "ask1"}]}


def last_tool(state: dict) -> ToolMessage:
    return next(m for m in reversed(state["messages"]) if isinstance(m, ToolMessage))


def test_a_clarification_ends_the_turn_with_the_request_as_artifact():
    state, model = run([ask(question="Which file?", options=["a.csv", "b.csv"]), "never played"])
    assert len(model.calls) == 1  # the model was not called again
    message = state["messages"][-1]
    assert isinstance(message, ToolMessage) and message.name == "ask_clarification"
    request = message.artifact["human_input"]
    assert request["input_mode"] == "choice_with_other" and request["request_id"] == "clarification:ask1"
    assert "Which file?" in message.text and "1. a.csv" in message.text


def test_a_clarification_batched_with_other_calls_still_ends_the_turn():
    turns = [{"tool_calls": [{"name": "note", "args": {"text": "x"}, "id": "n1"},
                             {"name": "ask_clarification", "args": {"question": "Sure?"}, "id": "ask1"}]},
             "never played"]
    state, model = run(turns)
    assert len(model.calls) == 1
    assert any(isinstance(m, ToolMessage) and m.artifact and "human_input" in m.artifact for m in state["messages"])


@pytest.mark.parametrize("fields", [
    [{"name": "__proto__", "label": "x"}, {"name": "constructor"}, {"name": "ok", "type": "hologram"}],
    [{"name": f"field_{i}", "label": "L" * 10_000, "type": "select", "options": list(range(500))} for i in range(100)],
    "definitely not a form",
    [None, 1, ["x"], {"name": {"nested": True}, "type": ["select"], "options": {"a": {"b": "c"}}}],
])
def test_malformed_forms_from_the_model_are_normalized_or_degraded(fields):
    state, model = run([ask(question="Details please", fields=fields)])
    assert len(model.calls) == 1
    request = last_tool(state).artifact["human_input"]
    assert request["input_mode"] in {"form", "free_text"}
    assert len(request.get("fields", [])) <= MAX_FORM_FIELDS
    assert all(f["name"] not in {"__proto__", "constructor"} for f in request.get("fields", []))


def test_a_clarification_without_a_question_is_an_error_the_model_sees():
    state, model = run([ask(context="no question here"), "Sorry, continuing."])
    assert len(model.calls) == 2  # not a pause: the model got the error and answered
    error = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert error.status == "error" and error.artifact["code"] == "bad_arguments"


@pytest.mark.parametrize("mode", ["scheduled", "webhook", "autonomous"])
def test_unattended_runs_get_a_result_and_continue(mode):
    WRITES.clear()
    state, model = run([ask(question="Drop the table?"), {"tool_calls": [{"name": "note", "args": {"text": "safe"}}]},
                        "Done; assumed nothing risky."], mode=mode)
    assert "ask_clarification" not in model.calls[0].tools
    assert len(model.calls) == 3 and state["messages"][-1].text == "Done; assumed nothing risky."
    suppressed = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert suppressed.artifact == {"status": "suppressed", "code": "clarification_unavailable", "mode": mode}
    assert "human_input" not in suppressed.artifact and "BLOCKED" in suppressed.text
    assert WRITES == ["safe"]


def test_other_tools_pass_through():
    WRITES.clear()
    state, model = run([{"tool_calls": [{"name": "note", "args": {"text": "hello"}}]}, "ok"])
    assert WRITES == ["hello"] and len(model.calls) == 2 and state["messages"][-1].text == "ok"

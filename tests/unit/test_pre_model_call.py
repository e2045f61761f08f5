"""Pre-model hooks folded into the model call: same history, same jumps, one superstep fewer per step."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain.agents.middleware.types import hook_config
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from deerflow.agents.middlewares import MiddlewareOptions, build_middlewares
from deerflow.agents.middlewares.fusion import fuse_before_model
from deerflow.agents.middlewares.pre_model_call import PreModelCall, fold_before_model
from deerflow.agents.thread_state import ThreadState
from deerflow.config.schema import AppConfig
from deerflow.models.scripted import ScriptedChatModel
from deerflow.tools.authorization import ToolPolicy

TWO_STEPS = """
turns:
  - tool_calls: [{name: ping, args: {}}]
  - text: done
"""


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


class Note(AgentMiddleware):
    folds_into_model_call = True

    def __init__(self, text: str, log: list[str], *, once: bool = False) -> None:
        super().__init__()
        self.text, self.log, self.once = text, log, once

    @property
    def name(self) -> str:
        return f"Note{self.text}"

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        seen = [m.content for m in state["messages"]]
        self.log.append(f"{self.text} saw {seen}")
        if self.once and any(m.content == f"note {self.text}" for m in state["messages"]):
            return None
        return {"messages": [HumanMessage(content=f"note {self.text}")]}


class Stop(AgentMiddleware):
    """Jumps to the end once a tool result is in the history (as the clarification check does)."""

    folds_into_model_call = True

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if state["messages"][-1].type != "tool" and not any(m.type == "tool" for m in state["messages"][-2:]):
            return None
        self.log.append("stop")
        return {"jump_to": "end", "title": "stopped"}


class Seen(AgentMiddleware):
    """A model hook inside the pre-model one: records what the model request holds."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.log.append(f"request {[m.content for m in request.messages]}")
        return handler(request)


def _agent(chain: list[AgentMiddleware], script: str = TWO_STEPS) -> Any:
    return create_agent(ScriptedChatModel(script), [ping], middleware=chain, state_schema=ThreadState,
                        checkpointer=InMemorySaver())


def _checkpoints(agent: Any, thread: str) -> int:
    return len(list(agent.checkpointer.list({"configurable": {"thread_id": thread}})))


def test_hooks_run_in_the_model_node_in_order_and_the_history_reads_as_before():
    log: list[str] = []
    folded = _agent(fold_before_model([Note("a", log, once=True), Note("b", log, once=True), Seen(log)]))
    assert not [n for n in folded.nodes if n.endswith(".before_model")]
    out = folded.invoke({"messages": [HumanMessage(content="hi")]}, {"configurable": {"thread_id": "f"}})
    assert log[:3] == ["a saw ['hi']", "b saw ['hi', 'note a']", "request ['hi', 'note a', 'note b']"]
    assert [m.content for m in out["messages"]] == ["hi", "note a", "note b", "", "pong", "done"]

    nodes = _agent(fuse_before_model([Note("a", [], once=True), Note("b", [], once=True)]))
    same = nodes.invoke({"messages": [HumanMessage(content="hi")]}, {"configurable": {"thread_id": "n"}})
    assert [m.content for m in same["messages"]] == [m.content for m in out["messages"]]
    assert [m.id for m in out["messages"]] == [m.id for m in folded.get_state(
        {"configurable": {"thread_id": "f"}}).values["messages"]]
    # two agent steps, one pre-model superstep (and checkpoint) fewer each
    assert _checkpoints(folded, "f") == _checkpoints(nodes, "n") - 2


def test_a_jump_ends_the_run_without_calling_the_model_and_keeps_earlier_updates():
    log: list[str] = []
    model = ScriptedChatModel(TWO_STEPS)
    chain = fold_before_model([Stop(log), Note("never", log)])
    agent = create_agent(model, [ping], middleware=chain, state_schema=ThreadState)
    out = agent.invoke({"messages": [HumanMessage(content="hi")]})
    assert log == ["never saw ['hi']", "stop"]  # the first model call: no jump; after the tool: stop
    assert [m.content for m in out["messages"]] == ["hi", "note never", "", "pong"]
    assert out["title"] == "stopped"
    assert len(model.calls) == 1


def test_async_runs_fold_too():
    log: list[str] = []
    agent = _agent(fold_before_model([Note("a", log, once=True), Note("b", log, once=True)]))
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage(content="hi")]}, {"configurable": {"thread_id": "a"}}))
    assert [m.content for m in out["messages"]] == ["hi", "note a", "note b", "", "pong", "done"]


class Plugin(AgentMiddleware):
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None


class AfterModel(AgentMiddleware):
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None


def test_an_undeclared_hook_or_an_after_model_hook_keeps_the_pre_model_node():
    for other in (Plugin(), AfterModel()):
        chain = fold_before_model([Note("a", []), Note("b", []), other])
        assert not any(isinstance(m, PreModelCall) for m in chain)
        assert [n for n in _agent(chain).nodes if n.endswith(".before_model")] == ["PreModel.before_model"]


def test_the_lead_agent_chain_folds_except_in_plan_mode():
    policy = ToolPolicy.for_user(AppConfig().authorization, "local")
    for plan, folded in ((False, True), (True, False)):
        chain = build_middlewares(AppConfig(), policy, MiddlewareOptions(is_plan_mode=plan))
        agent = create_agent(ScriptedChatModel("turns: [{text: done}]"), [ping], middleware=chain,
                             state_schema=ThreadState)
        assert bool([n for n in agent.nodes if n.endswith(".before_model")]) != folded, plan

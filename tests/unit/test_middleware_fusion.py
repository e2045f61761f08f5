"""before_model hooks of several middlewares run in one graph node, in order, with jumps."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import hook_config
from langchain_core.messages import HumanMessage

from deerflow.agents.middlewares.fusion import fuse_before_agent, fuse_before_model
from deerflow.agents.thread_state import ThreadState
from deerflow.models.scripted import ScriptedChatModel


class Note(AgentMiddleware):
    def __init__(self, text: str, log: list[str]) -> None:
        super().__init__()
        self.text, self.log = text, log

    @property
    def name(self) -> str:
        return f"Note{self.text}"

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        seen = [m.content for m in state["messages"]]
        self.log.append(f"{self.text} saw {seen}")
        return {"messages": [HumanMessage(content=f"note {self.text}")]}


class Stop(AgentMiddleware):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.log.append("stop")
        return {"jump_to": "end", "title": "stopped"}

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.log.append("after_agent still runs")
        return None


def test_hooks_share_one_node_see_each_others_updates_and_keep_other_hooks():
    log: list[str] = []
    chain = fuse_before_model([Note("a", log), Note("b", log)])
    agent = create_agent(ScriptedChatModel("turns: [{text: done}]"), [], middleware=chain, state_schema=ThreadState)
    pre_nodes = [n for n in agent.nodes if n.endswith(".before_model")]
    assert pre_nodes == ["PreModel.before_model"]
    out = agent.invoke({"messages": [HumanMessage(content="hi")]})
    assert log == ["a saw ['hi']", "b saw ['hi', 'note a']"]
    assert [m.content for m in out["messages"]] == ["hi", "note a", "note b", "done"]


def test_a_jump_stops_the_sequence_and_the_run():
    log: list[str] = []
    chain = fuse_before_model([Stop(log), Note("never", log)])
    agent = create_agent(ScriptedChatModel("turns: [{text: unreachable}]"), [], middleware=chain,
                         state_schema=ThreadState)
    out = agent.invoke({"messages": [HumanMessage(content="hi")]})
    assert log == ["stop", "after_agent still runs"]
    assert out["title"] == "stopped"
    assert [m.content for m in out["messages"]] == ["hi"]  # the model was never called


def test_a_single_hook_is_left_alone():
    log: list[str] = []
    only = Note("x", log)
    assert fuse_before_model([only]) == [only]


class Opening(AgentMiddleware):
    def __init__(self, text: str, log: list[str], *, jump: bool = False) -> None:
        super().__init__()
        self.text, self.log, self.jump = text, log, jump

    @property
    def name(self) -> str:
        return f"Opening{self.text}"

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.log.append(f"{self.text} saw {[m.content for m in state['messages']]}")
        update: dict[str, Any] = {"messages": [HumanMessage(content=f"opening {self.text}")]}
        return {**update, "jump_to": "end"} if self.jump else update


def test_before_agent_hooks_share_one_node_in_order_and_a_jump_still_ends_the_sequence():
    log: list[str] = []
    chain = fuse_before_agent([Opening("a", log), Opening("b", log), Note("m", log)])
    agent = create_agent(ScriptedChatModel("turns: [{text: done}]"), [], middleware=chain, state_schema=ThreadState)
    assert [n for n in agent.nodes if n.endswith(".before_agent")] == ["RunStart.before_agent"]
    out = agent.invoke({"messages": [HumanMessage(content="hi")]})
    assert log == ["a saw ['hi']", "b saw ['hi', 'opening a']", "m saw ['hi', 'opening a', 'opening b']"]
    assert [m.content for m in out["messages"]] == ["hi", "opening a", "opening b", "note m", "done"]

    log.clear()
    chain = fuse_before_agent([Opening("a", log, jump=True), Opening("never", log)])
    agent = create_agent(ScriptedChatModel("turns: [{text: unreachable}]"), [], middleware=chain,
                         state_schema=ThreadState)
    out = agent.invoke({"messages": [HumanMessage(content="hi")]})
    assert log == ["a saw ['hi']"]
    assert [m.content for m in out["messages"]] == ["hi", "opening a"]  # no model call

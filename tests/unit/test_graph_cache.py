"""The lead agent's compiled graph is shared only by runs that would build the same graph.

Structure, not timing: a second run with the same user, options, model entry and
tools gets the *same* compiled graph, yet its model requests go to its own model
instance; two users, two option sets, two tool sets or two interaction modes
never share one, and runs with per-run objects bound into the graph are never
cached.  With tracing off the middlewares' ``wrap_*`` hooks are one wrapper.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from deerflow.agents.graph_cache import GraphCache
from deerflow.agents.lead_agent import LeadAgent
from deerflow.agents.middlewares import MiddlewareOptions, build_middlewares
from deerflow.agents.middlewares.memory import MAX_RUNS_REMEMBERED, MemoryMiddleware
from deerflow.config.paths import HomePaths
from deerflow.config.schema import AppConfig, ModelConfig
from deerflow.custom_agents.profile import AgentProfile
from deerflow.models.factory import ResolvedModel
from deerflow.models.scripted import ScriptedChatModel
from deerflow.run_options import RunOptions
from deerflow.runs.execution import execute_run
from deerflow.runs.wiring import wire_lead_agent
from deerflow.runtime.context import RunContext
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.tools.assembly import ToolCache
from deerflow.tools.authorization import ToolPolicy

ENTRY = ModelConfig(name="test", use="deerflow.models.scripted:ScriptedChatModel")
LS = {"name": "ls", "args": {"path": "/mnt/user-data/workspace"}}


class Host:
    """What the run manager holds for building lead agents: one config, one model entry, one cache."""

    def __init__(self, config: AppConfig | None = None) -> None:
        self.config = config or AppConfig()
        self.graphs = GraphCache()
        self.tools = ToolCache()  # the host's built tools: the same objects run after run
        from langgraph.checkpoint.memory import InMemorySaver

        self.saver = InMemorySaver()

    def lead(self, model: Any = None, *, user_id: str = "local", profile: AgentProfile | None = None,
             reader: Any = None, **options: Any) -> LeadAgent:
        resolved = ResolvedModel(model or ScriptedChatModel(script={"turns": ["hi"]}), "test", ENTRY)
        run_options = RunOptions.parse(options)
        return wire_lead_agent(self.config, resolved, run_options, interaction=RunInteractionPolicy.resolve(run_options),
                               profile=profile or AgentProfile(), checkpointer=self.saver, tool_cache=self.tools,
                               user_id=user_id, conversation_reader=reader, graphs=self.graphs)

    async def run(self, home: Path, model: ScriptedChatModel, prompt: str, *, user_id: str = "local") -> str:
        lead = self.lead(model, user_id=user_id)
        thread_id = uuid.uuid4().hex
        context = RunContext(user_id=user_id, thread_id=thread_id, run_id=uuid.uuid4().hex,
                             paths=HomePaths(home).thread(user_id, thread_id).ensure(), config=self.config,
                             model_name="test", chat_model=model)
        events: list[Any] = []

        async def publish(event: Any) -> None:
            events.append(event)

        outcome = await execute_run(lead, context, prompt, publish)
        assert outcome.status == "success", outcome.error
        return outcome.projector.last_text


def tool_names(lead: LeadAgent) -> set[str]:
    return set(lead.graph.nodes["tools"].bound.tools_by_name)


def test_same_run_shape_shares_one_graph_but_each_run_calls_its_own_model(tmp_path: Path) -> None:
    host = Host()
    first = ScriptedChatModel(script={"turns": [{"text": "", "tool_calls": [LS]}, "first done"]})
    second = ScriptedChatModel(script={"turns": [{"text": "", "tool_calls": [LS]}, "second done"]})
    assert asyncio.run(host.run(tmp_path, first, "go")) == "first done"
    calls_of_first = len(first.calls)
    assert asyncio.run(host.run(tmp_path, second, "go")) == "second done"
    assert (host.graphs.hits, host.graphs.misses, len(host.graphs)) == (1, 1, 1)
    assert len(first.calls) == calls_of_first == 2  # the cached graph never called the first run's model
    assert len(second.calls) == 2


def test_users_options_tools_and_modes_never_share_a_graph(tmp_path: Path) -> None:
    deny_alice = AppConfig.model_validate({"authorization": {
        "enabled": True, "rules": [{"users": ["alice"], "deny": ["web_fetch"]}]}})
    host = Host(deny_alice)
    bob, alice = host.lead(user_id="bob"), host.lead(user_id="alice")
    assert bob.graph is not alice.graph
    assert "web_fetch" in tool_names(bob) and "web_fetch" not in tool_names(alice)
    assert host.lead(user_id="alice").graph is alice.graph  # the same user again: shared
    assert host.lead(user_id="bob", is_plan_mode=True).graph is not bob.graph
    assert host.lead(user_id="bob", subagent_enabled=True).graph is not bob.graph
    assert host.lead(user_id="bob", interaction_mode="scheduled").graph is not bob.graph

    no_web = Host(AppConfig.model_validate({"web": {"enabled": False}}))
    no_web.graphs, no_web.tools = host.graphs, host.tools  # one cache, another config: another graph
    other = no_web.lead(user_id="bob")
    assert other.graph is not bob.graph and "web_fetch" not in tool_names(other)


def test_runs_with_their_own_objects_in_the_graph_are_never_cached(tmp_path: Path) -> None:
    host = Host()

    class Reader:  # a conversation grant: read_conversation is bound to it
        referenced = frozenset({"t"})

        async def read(self, thread_id: str, *, message_seq: int = 0, offset: int = 0) -> Any:
            raise AssertionError("not called")

    one, two = host.lead(reader=Reader()), host.lead(reader=Reader())
    assert one.graph is not two.graph and len(host.graphs) == 0
    assert host.lead(record=str(tmp_path / "c.json")).graph is not host.lead(record=str(tmp_path / "c.json")).graph
    assert len(host.graphs) == 0


def test_a_new_config_object_builds_a_new_graph() -> None:
    host = Host()
    before = host.lead()
    host.config = AppConfig()  # what the manager gets from an edited config.yaml (and it clears the cache)
    assert host.lead().graph is not before.graph


def chain_names(tracing: bool) -> list[str]:
    from langsmith import tracing_context

    with tracing_context(enabled=tracing):  # what LANGSMITH_TRACING=true says, for this block only
        chain = build_middlewares(AppConfig(), ToolPolicy.for_user(AppConfig().authorization, "local"),
                                  MiddlewareOptions())
    return [m.name for m in chain]


def test_wrap_hooks_are_one_wrapper_only_when_tracing_is_off() -> None:
    off, on = chain_names(False), chain_names(True)
    assert "WrapCalls" in off and "WrapCalls" not in on
    assert [n for n in off if n != "WrapCalls"] == on  # every middleware still there for its other hooks


def test_the_fused_hooks_carry_their_signature_for_langsmiths_wrapper() -> None:
    """``traceable`` asks each wrapped hook's signature at every call: it must be a lookup, not
    one computed from a bound method each time."""
    import inspect

    from langchain.agents.middleware import AgentMiddleware
    from langsmith import tracing_context

    with tracing_context(enabled=False):
        chain = build_middlewares(AppConfig(), ToolPolicy.for_user(AppConfig().authorization, "local"),
                                  MiddlewareOptions())
    (fused,) = [m for m in chain if m.name == "WrapCalls"]
    for name in ("wrap_model_call", "awrap_model_call", "wrap_tool_call", "awrap_tool_call"):
        hook = getattr(fused, name)
        assert getattr(type(fused), name) is not getattr(AgentMiddleware, name)  # what create_agent checks
        assert inspect.isfunction(hook) and inspect.signature(hook) is hook.__signature__
        assert list(inspect.signature(hook).parameters) == ["request", "handler"]


def test_a_shared_memory_middleware_forgets_old_runs() -> None:
    middleware = MemoryMiddleware()
    for i in range(MAX_RUNS_REMEMBERED + 10):
        middleware._remember(f"run-{i}", "block")
    assert len(middleware._blocks) == MAX_RUNS_REMEMBERED and "run-0" not in middleware._blocks


def test_turning_tracing_on_builds_a_traced_graph() -> None:
    from langsmith import tracing_context

    host = Host()
    untraced = host.lead().graph
    with tracing_context(enabled=True):
        traced = host.lead().graph
    assert traced is not untraced and host.lead().graph is untraced


def _hooked_agent() -> Any:
    """A bare ``create_agent`` graph with one middleware that has both ``wrap_*`` hooks."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    class Hooks(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    return create_agent(ScriptedChatModel(script={"turns": ["hi"]}), [], middleware=[Hooks()])


def test_an_untraced_build_wraps_no_hook_in_traceable_and_only_inside_its_block(monkeypatch: Any) -> None:
    """LangSmith's async ``traceable`` costs two thread hops and a task per hook call, traced or not."""
    from langsmith import tracing_context

    from deerflow.agents.middlewares import wrap_fusion

    wrap_fusion._install()  # what the first untraced build does
    wrapped: list[str] = []
    original = wrap_fusion._original_traceable
    assert original is not None

    def counting(*args: Any, **kwargs: Any) -> Any:
        wrapped.append(kwargs.get("name", ""))
        return original(*args, **kwargs)

    monkeypatch.setattr(wrap_fusion, "_original_traceable", counting)
    with tracing_context(enabled=False):
        with wrap_fusion.untraced_build():
            _hooked_agent()
        assert wrapped == []
        _hooked_agent()  # a build outside the block (a user's own create_agent) keeps its spans
        assert "Hooks.awrap_model_call" in wrapped and "Hooks.awrap_tool_call" in wrapped
    wrapped.clear()
    with tracing_context(enabled=True), wrap_fusion.untraced_build():
        _hooked_agent()  # tracing on: the block changes nothing
    assert "Hooks.awrap_model_call" in wrapped


def test_a_lead_agent_run_with_tracing_off_sets_up_no_langsmith_run(tmp_path: Path, monkeypatch: Any) -> None:
    """Every model and tool call of a run goes through the middlewares' hooks; none through ``traceable``."""
    from langsmith import run_helpers, tracing_context

    setups: list[Any] = []
    setup_run = run_helpers._setup_run

    def counting(*args: Any, **kwargs: Any) -> Any:
        setups.append(args[0])
        return setup_run(*args, **kwargs)

    monkeypatch.setattr(run_helpers, "_setup_run", counting)
    model = ScriptedChatModel(script={"turns": [{"tool_calls": [LS]}, "done"]})
    with tracing_context(enabled=False):
        assert asyncio.run(Host().run(tmp_path, model, "list it")) == "done"
    assert setups == []

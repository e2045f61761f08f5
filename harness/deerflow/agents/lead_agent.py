"""The lead agent: a ``create_agent`` graph with DeerFlow's state and middlewares.

``make_lead_agent`` takes the run's options (:class:`~deerflow.run_options.RunOptions`) and what
the run manager resolved from them (model, interaction policy, agent profile), and everything
host-specific — the app config, the checkpointer, tool sources — from an explicit :class:`LeadAgentDeps`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any, cast

from langchain.agents import create_agent
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from deerflow.agents.graph_cache import GraphCache, tool_identity
from deerflow.agents.middlewares import MiddlewareOptions, build_middlewares
from deerflow.agents.middlewares.wrap_fusion import tracing_enabled, untraced_build
from deerflow.agents.prompt import build_system_prompt
from deerflow.agents.thread_state import ThreadState
from deerflow.config.schema import AppConfig
from deerflow.custom_agents.profile import AgentProfile
from deerflow.custom_agents.store import AgentStore
from deerflow.mcp.run_tools import McpRunTools
from deerflow.models.factory import ResolvedModel
from deerflow.plugins import PluginSet
from deerflow.run_options import RunOptions
from deerflow.runtime.context import RunContext
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.skills.run import RunSkills
from deerflow.tools.assembly import ToolSources, get_available_tools
from deerflow.tools.authorization import ToolPolicy
from deerflow.tools.builtins.agent_tools import with_run_tools
from deerflow.tools.builtins.conversation import ConversationReader


@dataclass
class LeadAgentDeps:
    """What the host gives the lead agent."""

    app_config: AppConfig
    checkpointer: BaseCheckpointSaver | None = None
    sources: ToolSources = field(default_factory=ToolSources)
    config_file: str | None = None
    user_id: str = "local"
    # custom agents: the user's store and the skill names agents may name (None: unchecked)
    agents: AgentStore | None = None
    skill_names: frozenset[str] | None = None
    # the host's grant for read_conversation (only when the request referenced other threads)
    conversation_reader: ConversationReader | None = None
    # the run's enabled skills (discovery section of the prompt; None: no skills)
    skills: RunSkills | None = None
    # the run's MCP tools (ToolSources.mcp), notices and deferred schemas (None: no MCP)
    mcp: McpRunTools | None = None
    # tools and middlewares of the host's startup plugins (deerflow.plugins; None: no plugins)
    plugins: PluginSet | None = None
    # the host's compiled graphs, reused by runs that would build the same one (None: built per run)
    graphs: GraphCache | None = None
    # the run is its thread's first: no run-start node, its values come with the input (run_start_input)
    new_thread: bool = False


@dataclass
class LeadAgent:
    graph: CompiledStateGraph[Any, RunContext, Any, Any]
    model: ResolvedModel
    tools: list[BaseTool]
    profile: AgentProfile = field(default_factory=AgentProfile)
    new_thread: bool = False  # built without run-start hooks: the run's input carries their values


def make_lead_agent(
    options: RunOptions, *, deps: LeadAgentDeps, model: ResolvedModel,
    interaction: RunInteractionPolicy, profile: AgentProfile,
) -> LeadAgent:
    """Build the lead agent for a run from what the run manager resolved.

    Nothing is derived here a second time: the manager parses the options,
    resolves the model (``model_name``, else the profile's, else the default),
    the interaction policy and the agent profile once per run, and the lead
    agent only assembles them.

    Args:
        options: The run's options.
        deps: Host-provided config, checkpointer and tool sources.
        model: The run's model.
        interaction: The run's interaction policy: whether ``ask_clarification`` is
            offered, what the clarification middleware does and the prompt's
            interaction guidance.
        profile: The run's agent identity (:mod:`deerflow.custom_agents.profile`).  A
            custom agent's soul goes into the prompt and its tool groups and skills
            narrow the run.
    """
    app = deps.app_config
    subagents_on = app.subagents.enabled if options.subagent_enabled is None else options.subagent_enabled
    sources = deps.sources if deps.mcp is None else replace(deps.sources, mcp=deps.mcp.source)
    if deps.plugins is not None:
        sources = replace(sources, plugins=deps.plugins.tools)
    sources = with_run_tools(sources, app, profile=profile, store=deps.agents, skill_names=deps.skill_names,
                             mode=interaction.mode, reader=deps.conversation_reader)
    tools = get_available_tools(
        profile.tool_groups, True, model.name, subagents_on,
        app_config=app, sources=sources, user_id=deps.user_id, config_file=deps.config_file,
        hidden=interaction.hidden_tools,
    )
    if deps.mcp is not None:
        deps.mcp.bind(tools)  # tool_search reveals only the MCP tools the run really offers
    prompt = build_system_prompt(today=dt.date.today().isoformat(), tool_names=[t.name for t in tools],
                                 interaction_guidance=interaction.prompt_guidance(),
                                 agent_instructions=profile.soul,
                                 sections=[*profile.prompt_sections(), deps.skills.prompt_section() if deps.skills else ""])
    mw_options = MiddlewareOptions(
        is_plan_mode=bool(options.is_plan_mode),
        subagent_enabled=subagents_on,
        interaction=interaction,
        max_concurrent_subagents=options.max_concurrent_subagents,
        max_total_subagents=options.max_total_subagents,
        mcp=deps.mcp,
        plugin_middlewares=tuple(deps.plugins.middlewares()) if deps.plugins else (),
        new_thread=deps.new_thread,
    )

    def build() -> CompiledStateGraph[Any, RunContext, Any, Any]:
        policy = ToolPolicy.for_user(app.authorization, deps.user_id)
        middleware = build_middlewares(app, policy, mw_options, model=model, config_file=deps.config_file)
        with untraced_build():  # no LangSmith wrapper per hook call while tracing is off (wrap_fusion)
            return cast("CompiledStateGraph[Any, RunContext, Any, Any]", create_agent(
                model.model, tools, system_prompt=prompt, middleware=middleware, state_schema=ThreadState,
                context_schema=RunContext, checkpointer=deps.checkpointer, name="lead_agent",
            ))

    key = graph_key(options, deps, model=model, profile=profile, tools=tools, prompt=prompt, mw_options=mw_options)
    pinned = (app, deps.checkpointer, model.entry, tools)
    graph = deps.graphs.get(key, pinned, build) if deps.graphs is not None else build()
    return LeadAgent(graph=graph, model=model, tools=tools, profile=profile, new_thread=deps.new_thread)


def graph_key(options: RunOptions, deps: LeadAgentDeps, *, model: ResolvedModel, profile: AgentProfile,
              tools: list[BaseTool], prompt: str, mw_options: MiddlewareOptions) -> tuple[object, ...] | None:
    """What the lead agent's graph is built from (:mod:`deerflow.agents.graph_cache`); None: not shareable.

    Not shared: runs with objects of their own bound into the graph (a conversation
    reader, a custom agent's tools, active MCP tools or notices, plugin middlewares,
    which plugins get as fresh instances per run) or a recording or replaying model
    (its summarizer would write to another run's cassette).
    """
    if (deps.conversation_reader is not None or profile.name is not None or options.record or options.replay
            or (deps.mcp is not None and deps.mcp.active) or mw_options.plugin_middlewares):
        return None
    return (
        id(deps.app_config), deps.config_file, deps.user_id, id(deps.checkpointer),
        model.name, id(model.entry), model.offline, type(model.model),
        tool_identity(tools), prompt,
        mw_options.is_plan_mode, mw_options.subagent_enabled, mw_options.interaction,
        mw_options.max_concurrent_subagents, mw_options.max_total_subagents, tracing_enabled(),
        mw_options.new_thread,
    )

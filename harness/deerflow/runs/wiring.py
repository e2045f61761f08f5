"""The run's wiring in one place: the lead agent a run executes and the :class:`RunContext` it runs with.

:meth:`RunManager.start <deerflow.runs.manager.RunManager.start>` resolves what a run needs once
(the model, the interaction policy, the agent profile, the run's skills and MCP tools, the
conversation reader, the usage meter) and hands it to these two functions; the test fixtures
(``tests/fixtures/agent_runs.py``, ``skill_runs.py``) call the same functions with what they
hold (a model instance whose calls they read, an in-memory checkpointer), so an agent under
test is assembled exactly as a host's.  A new dependency of the lead agent or of the run's
context is added here, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deerflow.agents.lead_agent import LeadAgent, LeadAgentDeps, make_lead_agent
from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AppConfig
from deerflow.custom_agents.profile import AgentProfile
from deerflow.models.factory import ResolvedModel
from deerflow.run_options import RunOptions
from deerflow.runtime.context import RunContext
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.runtime.services import HostServices
from deerflow.skills.run import RunSkills, project_run_skills
from deerflow.subagents.host import with_subagent_source
from deerflow.tools.builtins import builtin_sources

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from deerflow.agents.graph_cache import GraphCache
    from deerflow.custom_agents import AgentStore
    from deerflow.mcp.run_tools import McpRunTools
    from deerflow.plugins import PluginSet
    from deerflow.runtime.usage import UsageMeter
    from deerflow.tools.assembly import ToolCache
    from deerflow.tools.builtins.conversation import ConversationReader


def wire_lead_agent(
    config: AppConfig, model: ResolvedModel, options: RunOptions, *,
    interaction: RunInteractionPolicy, profile: AgentProfile,
    services: HostServices | None = None, checkpointer: BaseCheckpointSaver | None = None,
    skills: RunSkills | None = None, mcp: McpRunTools | None = None, tool_cache: ToolCache | None = None,
    config_file: str | None = None, user_id: str = "local", agents: AgentStore | None = None,
    skill_names: frozenset[str] | None = None, conversation_reader: ConversationReader | None = None, plugins: PluginSet | None = None,
    graphs: GraphCache | None = None, new_thread: bool = False,
) -> LeadAgent:
    """The lead agent of one run: the built-in tools (on the host's sandbox, with the run's skills),
    the subagent tools when the host has a subagent runtime, MCP and plugin tools, middlewares.

    Args:
        config: The application config in force for the run.
        model: The resolved model (``RunManager``: from ``model_name``, the profile or the default).
        options: The run's parsed options.
        interaction: The run's interaction policy.
        profile: The custom agent's profile (the default profile for none).
        services: The host's services (the sandbox and subagent runtime are read); none: no sandbox.
        checkpointer: Where the thread's state lives (None: the graph keeps none).
        skills, mcp, tool_cache, config_file, user_id, agents, skill_names, conversation_reader,
            plugins, graphs, new_thread: As :class:`~deerflow.agents.lead_agent.LeadAgentDeps`.
    """
    services = services if services is not None else HostServices()
    sources = with_subagent_source(
        builtin_sources(config, model, sandbox=services.sandbox, skills=skills, cache=tool_cache), services, config)
    deps = LeadAgentDeps(app_config=config, checkpointer=checkpointer, sources=sources, config_file=config_file,
                         user_id=user_id, agents=agents, skill_names=skill_names,
                         conversation_reader=conversation_reader, skills=skills, mcp=mcp, plugins=plugins,
                         graphs=graphs, new_thread=new_thread)
    return make_lead_agent(options, deps=deps, model=model, interaction=interaction, profile=profile)


def wire_run_context(
    *, user_id: str, thread_id: str, run_id: str, paths: ThreadPaths, config: AppConfig, model_name: str,
    options: RunOptions, interaction: RunInteractionPolicy, services: HostServices | None = None,
    skills: RunSkills | None = None, mcp: McpRunTools | None = None, usage_meter: UsageMeter | None = None,
    chat_model: BaseChatModel | None = None, folders_made: bool = False,
) -> RunContext:
    """The context one run's middlewares and tools receive: identity, the thread's paths, config,
    options, policy, and the host's services with this run's own (its skills projected into the
    thread, its MCP tools, its usage meter).  A thread without a skills view yet gets paths that
    build it on first use (:mod:`deerflow.skills.projection`).

    Blocking: it makes the thread's folders (unless ``folders_made``: the thread was created for this
    run, with them, a moment ago) and checks an existing skills view; call it off the event loop.
    """
    host = services if services is not None else HostServices()
    if not folders_made:
        paths.ensure()
    paths, skill_services = project_run_skills(skills, paths)  # a thread's first view: built on first use
    return RunContext(folders_ready=True,
        user_id=user_id, thread_id=thread_id, run_id=run_id, paths=paths, config=config, model_name=model_name,
        interaction_mode=interaction.mode, interaction=interaction, options=options, chat_model=chat_model,
        services=host.for_run(**skill_services, mcp_run=mcp, usage_meter=usage_meter),
    )


__all__ = ["wire_lead_agent", "wire_run_context"]

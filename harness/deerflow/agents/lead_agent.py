"""The lead agent: a ``create_agent`` graph with DeerFlow's state and middlewares.

``make_lead_agent`` reads the run's options from ``config["configurable"]``
(the LangGraph convention) and everything host-specific — the app config,
the checkpointer, tool sources — from an explicit :class:`LeadAgentDeps`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from deerflow.agents.interaction_policy import RunInteractionPolicy
from deerflow.agents.middlewares import MiddlewareOptions, build_middlewares
from deerflow.agents.prompt import build_system_prompt
from deerflow.agents.thread_state import ThreadState
from deerflow.config.schema import AppConfig
from deerflow.models.factory import ResolvedModel, create_chat_model
from deerflow.runtime.context import RunContext
from deerflow.tools.assembly import ToolSources, get_available_tools
from deerflow.tools.authorization import ToolPolicy

RUNTIME_OPTIONS = (
    "model_name", "thinking_enabled", "is_plan_mode", "subagent_enabled", "max_concurrent_subagents",
    "max_total_subagents", "agent_name", "is_bootstrap", "interaction_mode",
)


@dataclass
class LeadAgentDeps:
    """What the host gives the lead agent."""

    app_config: AppConfig
    checkpointer: BaseCheckpointSaver | None = None
    sources: ToolSources = field(default_factory=ToolSources)
    config_file: str | None = None
    user_id: str = "local"


@dataclass
class LeadAgent:
    graph: CompiledStateGraph
    model: ResolvedModel
    tools: list[BaseTool]


def runtime_options(config: RunnableConfig | None) -> dict[str, Any]:
    """The recognised runtime options from ``config["configurable"]``."""
    configurable = (config or {}).get("configurable") or {}
    return {k: configurable[k] for k in RUNTIME_OPTIONS if k in configurable}


def make_lead_agent(
    config: RunnableConfig | None, *, deps: LeadAgentDeps, model: ResolvedModel | None = None,
    interaction: RunInteractionPolicy | None = None,
) -> LeadAgent:
    """Build the lead agent for a run.

    Args:
        config: LangGraph runnable config; ``configurable`` holds the run options.
        deps: Host-provided config, checkpointer and tool sources.
        model: A pre-resolved model (else resolved from ``model_name``).
        interaction: The run's interaction policy (the run manager resolves it
            once per run); else resolved from ``configurable``.  It decides
            whether ``ask_clarification`` is offered, what the clarification
            middleware does and the prompt's interaction guidance.
    """
    options = runtime_options(config)
    if interaction is None:
        interaction = RunInteractionPolicy.resolve((config or {}).get("configurable"))
    app = deps.app_config
    resolved = model or create_chat_model(app, options.get("model_name"), config_file=deps.config_file)
    tools = get_available_tools(
        None, True, resolved.name, bool(options.get("subagent_enabled")),
        app_config=app, sources=deps.sources, user_id=deps.user_id, config_file=deps.config_file,
        hidden=interaction.hidden_tools,
    )
    policy = ToolPolicy.for_user(app.authorization, deps.user_id)
    middleware = build_middlewares(app, policy, MiddlewareOptions(
        is_plan_mode=bool(options.get("is_plan_mode")),
        subagent_enabled=bool(options.get("subagent_enabled")),
        interaction=interaction,
    ), model=resolved, config_file=deps.config_file)
    prompt = build_system_prompt(today=dt.date.today().isoformat(), tool_names=[t.name for t in tools],
                                 interaction_guidance=interaction.prompt_guidance())
    graph = create_agent(
        resolved.model, tools, system_prompt=prompt, middleware=middleware, state_schema=ThreadState,
        context_schema=RunContext, checkpointer=deps.checkpointer, name="lead_agent",
    )
    return LeadAgent(graph=graph, model=resolved, tools=tools)

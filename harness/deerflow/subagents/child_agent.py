"""A subagent's graph: its tools, its middleware chain, its context.

* **Tools** — the same assembly as the lead (:func:`get_available_tools`:
  built-ins, config tools, the parent run's MCP tools without ``tool_search``,
  the user's authorization policy) with the
  subagent tools off and :data:`FORBIDDEN_CHILD_TOOLS` hidden, then narrowed
  by the allowlist layers: the type's ``tools``, the type's ``skills`` and
  the *parent's* active-skill allowlist (see :func:`parent_skill_allowlist`),
  so a child can never do more than its parent's skill allows.
* **Middlewares** (:func:`child_middlewares`, the order in one list):
  dangling tool calls → receipts (outermost tool wrapper) → guard →
  authorization → tool errors → output budget → limits → loop detection.
  No clarification, title, uploads or summarization: a child's conversation
  is one task, nobody answers questions, nothing is presented.
* **Context** — a :class:`RunContext` with the thread's identity, files and
  services (so the child uses the thread's sandbox and kernel), a
  ``subagent`` run id, the ``autonomous`` interaction policy, and the
  execution's :class:`ChildRun`; never the parent's delegation services.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph

from deerflow.agents.middlewares.cut_off_tool_calls import CutOffToolCallsMiddleware
from deerflow.agents.middlewares.dangling_tool_calls import DanglingToolCallsMiddleware
from deerflow.agents.middlewares.loop_detection import LoopDetectionMiddleware
from deerflow.agents.middlewares.tool_authorization import ToolAuthorizationMiddleware
from deerflow.agents.middlewares.tool_errors import ToolErrorHandlingMiddleware
from deerflow.agents.middlewares.tool_output_budget import ToolOutputBudgetMiddleware
from deerflow.agents.middlewares.wrap_fusion import untraced_build
from deerflow.config.schema import AppConfig
from deerflow.models.factory import ResolvedModel
from deerflow.run_options import RunOptions
from deerflow.runtime.context import RunContext
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.skills.activation import active_skills
from deerflow.skills.run import run_skills_of
from deerflow.subagents.child_run import ChildRun
from deerflow.subagents.middlewares import (
    ReceiptMiddleware,
    SubagentLimitsMiddleware,
    SubagentToolGuard,
)
from deerflow.subagents.registry import FORBIDDEN_CHILD_TOOLS, SubagentType
from deerflow.tools.assembly import ToolSources, get_available_tools
from deerflow.tools.authorization import ToolPolicy
from deerflow.tools.builtins import builtin_sources

ToolSourcesFactory = Callable[[AppConfig, ResolvedModel, RunContext], ToolSources]


def default_tool_sources(config: AppConfig, model: ResolvedModel, ctx: RunContext) -> ToolSources:
    """The lead's built-in tool sources, on the thread's sandbox, plus the parent run's MCP tools."""
    sources = builtin_sources(config, model, sandbox=ctx.services.sandbox, cache=ctx.services.tool_cache)
    mcp_run = ctx.services.mcp_run
    if mcp_run is not None:
        sources = replace(sources, mcp=mcp_run.child_source)
    return sources


def parent_skill_allowlist(ctx: RunContext, state: Any = None) -> frozenset[str] | None:
    """The parent's skill allowlist (None: no skill limits the parent).

    The allowlist is normally derived from the parent's conversation: the tool
    scope of the skills active in its current turn (:func:`skill_scope_of`).
    An explicit ``RunOptions.skill_allowed_tools`` (names or glob patterns, set by
    a host or on a child's context) wins.
    """
    value = ctx.options.skill_allowed_tools
    if value is not None:
        return frozenset(value)
    return skill_scope_of(ctx, state)


def skill_scope_of(ctx: RunContext, state: Any) -> frozenset[str] | None:
    """The ``allowed-tools`` scope of the parent's active skills (None: unrestricted)."""
    skills = run_skills_of(ctx)
    if skills is None or not isinstance(state, dict):
        return None
    scope = active_skills(state.get("messages", []), skills.by_name).scope()
    return frozenset(scope.allowed) if scope.allowed is not None else None


def allowlist_layers(kind: SubagentType, parent_skills: frozenset[str] | None) -> tuple[frozenset[str], ...]:
    """The allowlists a child's tools must all pass (their intersection)."""
    layers = [kind.tools, kind.skills, parent_skills]
    return tuple(frozenset(layer) for layer in layers if layer is not None)


def resolve_child_tools(
    config: AppConfig, model: ResolvedModel, ctx: RunContext, *, sources: ToolSourcesFactory = default_tool_sources,
) -> list[BaseTool]:
    """The tools any child may be offered: the lead's assembly minus the forbidden tools.

    Each child then keeps those its allowlist layers permit (:meth:`ChildRun.permits`).
    """
    return get_available_tools(
        None, True, model.name, False, app_config=config, sources=sources(config, model, ctx),
        user_id=ctx.user_id, hidden=FORBIDDEN_CHILD_TOOLS,
    )


def child_middlewares(config: AppConfig, user_id: str) -> list[AgentMiddleware[Any, Any]]:
    """The child's middleware chain (first = outermost)."""
    chain: list[AgentMiddleware[Any, Any]] = [
        DanglingToolCallsMiddleware(),
        CutOffToolCallsMiddleware(),
        ReceiptMiddleware(),
        SubagentToolGuard(),
        ToolAuthorizationMiddleware(ToolPolicy.for_user(config.authorization, user_id)),
        ToolErrorHandlingMiddleware(),
        ToolOutputBudgetMiddleware(max_chars=config.tool_output.max_chars,
                                   synopsis_chars=config.tool_output.synopsis_chars),
        SubagentLimitsMiddleware(),
    ]
    if config.loop_detection.enabled:
        chain.append(LoopDetectionMiddleware(config.loop_detection))
    return chain


def build_child_graph(
    model: ResolvedModel, tools: list[BaseTool], system_prompt: str, middleware: list[AgentMiddleware[Any, Any]],
) -> CompiledStateGraph[Any, RunContext, Any, Any]:
    """Compile a child graph (no checkpointer: its conversation lives only as long as it runs).

    Built per delegation, with the tracing state of that moment (``untraced_build``)."""
    with untraced_build():
        return create_agent(model.model, tools, system_prompt=system_prompt, middleware=middleware,
                            context_schema=RunContext, name="subagent")


def child_context(parent: RunContext, child: ChildRun, *, config: AppConfig, model_name: str,
                  skill_allowlist: Collection[str] | None) -> RunContext:
    """The child's run context: the thread's files and sandbox, none of the delegation services."""
    options = RunOptions(is_subagent=True, parent_run_id=parent.run_id, task_id=child.task_id,
                         skill_allowed_tools=sorted(skill_allowlist) if skill_allowlist is not None else None)
    return replace(
        parent, run_id=f"{parent.run_id or 'norun'}.sub.{child.task_id}", config=config, model_name=model_name,
        interaction_mode="autonomous", interaction=RunInteractionPolicy(mode="autonomous", source="subagent"),
        options=options, services=parent.services.for_child(child),
    )


__all__ = ["ToolSourcesFactory", "allowlist_layers",
           "build_child_graph", "child_context", "child_middlewares", "default_tool_sources",
           "parent_skill_allowlist", "resolve_child_tools", "skill_scope_of"]

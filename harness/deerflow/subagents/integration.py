"""``create_deerflow_agent``: DeerFlow delegation inside a caller's own graph.

People who embed the harness build their agent themselves; they still want
``task`` (and the batch tools) with DeerFlow's limits, ledger, receipts and
acceptance checks.  :func:`create_deerflow_agent` gives their
``create_agent`` graph *clones* of those tools bound to the
:class:`SubagentRuntime` they pass:

* the bound ``task`` uses that runtime's execution controller and, when the
  runtime carries one, its caller-owned config for the registry, the child
  model and tools, limits and receipts — never a host's;
* bound batch tools use only that runtime's submitter (none: the batch tools
  are not offered; a host's submitter in the context is never used);
* names and argument schemas are those of the ordinary tools, so model
  contracts and the caller's tool deduplication stay stable.

The graph's context must be a :class:`RunContext` (thread files, sandbox
services, ``run_id``).  Without a ``run_id`` the per-run delegation cap
counts the thread's whole ledger (fail-restrictive) and logs a warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from deerflow.agents.middlewares.subagent_limits import SubagentLimitMiddleware
from deerflow.agents.thread_state import ThreadState
from deerflow.config.schema import AppConfig
from deerflow.models.factory import ResolvedModel
from deerflow.runtime.context import RunContext
from deerflow.subagents.runtime import SubagentRuntime
from deerflow.subagents.tools import bind_tools

DEFAULT_PROMPT = ("You are a helpful agent. Delegate self-contained work with the task tool when it helps; "
                  "a subagent's report is a self-report, so rely on the harness's receipts and acceptance "
                  "verdicts.")


def create_deerflow_agent(
    model: BaseChatModel | ResolvedModel,
    tools: Sequence[BaseTool] = (),
    *,
    subagent_runtime: SubagentRuntime,
    app_config: AppConfig | None = None,
    system_prompt: str | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: BaseCheckpointSaver | None = None,
    bash_allowed: bool = False,
    max_concurrent_subagents: int | None = None,
    max_total_subagents: int | None = None,
    name: str = "deerflow_agent",
) -> CompiledStateGraph:
    """A ``create_agent`` graph with delegation bound to ``subagent_runtime``.

    Args:
        model: The lead's chat model.
        tools: The caller's tools; DeerFlow delegation tools among them are
            replaced by bound clones, missing ones are added.
        subagent_runtime: The runtime every delegation of this graph uses.
        app_config: Config for the tool descriptions and limits (default: the
            runtime's, else the defaults).
        system_prompt: The lead's system prompt.
        middleware: The caller's middlewares, after DeerFlow's subagent limits.
        checkpointer: Where the thread state (and the delegation ledger) is kept.
        bash_allowed: Whether to offer the ``bash`` subagent type.
        max_concurrent_subagents: ``task`` calls per response (clamped 1-16).
        max_total_subagents: Delegations per run (clamped 1-50).
        name: The graph's name.
    """
    config = app_config or subagent_runtime.config or AppConfig()
    chat = model.model if isinstance(model, ResolvedModel) else model
    limits = SubagentLimitMiddleware(
        max_concurrent=max_concurrent_subagents or config.subagents.max_concurrent,
        max_total=max_total_subagents or config.subagents.max_total_per_run)
    all_tools = bind_tools(list(tools), subagent_runtime, config, bash_allowed=bash_allowed)
    chain: list[Any] = [limits, *middleware]
    return create_agent(chat, all_tools, system_prompt=system_prompt or DEFAULT_PROMPT, middleware=chain,
                        state_schema=ThreadState, context_schema=RunContext, checkpointer=checkpointer, name=name)


__all__ = ["create_deerflow_agent"]

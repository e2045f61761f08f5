"""The subagent tool source: ``task``, plus the batch tools while a submitter is installed.

:func:`subagent_tools` is what :class:`~deerflow.tools.assembly.ToolSources`
``.subagents`` returns for a run.  The ``task`` description lists the types
this run can use (``bash`` only where the sandbox runs shell commands) and
says whether receipts are enabled; the batch tools are added only when the
runtime has a :class:`BatchSubmitter`.  :func:`bind_tools` clones the tools
bound to an explicit runtime, same names and schemas.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool

from deerflow.config.schema import AppConfig
from deerflow.subagents.registry import SubagentRegistry
from deerflow.subagents.runtime import SubagentRuntime
from deerflow.subagents.task_tool import SUBAGENT_TOOL_MARK, make_task_tool

BATCH_TOOLS = ("batch_task", "batch_status", "cancel_batch")


def subagent_tools(runtime: SubagentRuntime, config: AppConfig, *, bash_allowed: bool,
                   bound: bool = False) -> list[BaseTool]:
    """``task`` (+ batch tools when ``runtime`` has a submitter).

    Args:
        runtime: The runtime the tools delegate through.
        config: The config in force (types, receipts setting).
        bash_allowed: Whether the session's sandbox runs shell commands.
        bound: Bind the tools to ``runtime`` (else they find the host's at call time).
    """
    registry = SubagentRegistry.from_config(config.subagents, bash_allowed=bash_allowed)
    tools: list[BaseTool] = [make_task_tool(runtime if bound else None, types_text=registry.describe(),
                                            receipts_enabled=config.subagents.receipts_enabled)]
    if runtime.submitter is not None:
        from deerflow.subagents.batches.tools import make_batch_tools

        tools.extend(make_batch_tools(runtime if bound else None, types_text=registry.describe()))
    return tools


def bind_tools(tools: Sequence[BaseTool], runtime: SubagentRuntime, config: AppConfig, *,
               bash_allowed: bool) -> list[BaseTool]:
    """``tools`` with DeerFlow's delegation tools bound to ``runtime``; missing ones added.

    A DeerFlow ``task``/batch tool in ``tools`` (unbound, or bound to another
    runtime) is replaced in place by a clone bound to ``runtime`` with the same
    name and schema.  The caller's own tools keep their place and win on a name
    clash, so deduplication by name stays stable.
    """
    bound = {t.name: t for t in subagent_tools(runtime, config, bash_allowed=bash_allowed, bound=True)}
    out = [bound.pop(t.name) if is_subagent_tool(t) and t.name in bound else t for t in tools]
    names = {t.name for t in out}
    return out + [t for name, t in bound.items() if name not in names]


def is_subagent_tool(tool: BaseTool) -> bool:
    """Whether ``tool`` is one of DeerFlow's delegation tools."""
    return bool((tool.metadata or {}).get(SUBAGENT_TOOL_MARK))


__all__ = ["BATCH_TOOLS", "bind_tools", "is_subagent_tool", "subagent_tools"]

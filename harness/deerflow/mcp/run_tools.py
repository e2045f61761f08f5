"""One run's view of MCP: its tools, its notices, its deferred catalog.

:meth:`McpManager.prepare_run <deerflow.mcp.manager.McpManager.prepare_run>`
builds it before the agent is assembled.  The run manager hands
:meth:`McpRunTools.source` to ``ToolSources.mcp`` (so MCP tools go through the
same priority and authorization as every other source), the lead agent calls
:meth:`McpRunTools.bind` with the tools it finally offers, and the MCP
middlewares read the rest (deferred schemas, notices, finished tasks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool

from deerflow.mcp.deferral import DeferredCatalog
from deerflow.mcp.tool_search import TOOL_SEARCH

if TYPE_CHECKING:  # the MCP SDK loads when a server is used, not on import
    from deerflow.mcp.tasks import TaskService


@dataclass
class McpRunTools:
    """MCP tools and context for one run.

    Attributes:
        tools: MCP tools (plus ``tool_search`` and the task tools when they apply).
        notices: ``notice`` events to publish when the run starts (skipped servers...).
        deferred: Tools offered by name only until promoted (None: tool search is off).
        tasks: The long-running task service (None when no server declares tasks).
        user_id: Whose run this is.
        thread_id: The run's thread.
    """

    tools: list[BaseTool] = field(default_factory=list)
    notices: list[dict[str, Any]] = field(default_factory=list)
    deferred: DeferredCatalog | None = None
    tasks: TaskService | None = None
    user_id: str = "local"
    thread_id: str = ""

    def source(self) -> list[BaseTool]:
        """What ``ToolSources.mcp`` returns."""
        return list(self.tools)

    def child_source(self) -> list[BaseTool]:
        """The MCP tools a subagent of this run is offered: all but ``tool_search``.

        A child has no tool-search middleware and a short conversation of its own,
        so it gets every tool's full schema instead of a deferred catalog; its
        subagent type's ``tools`` allowlist narrows them like any other tool.
        """
        return [t for t in self.tools if t.name != TOOL_SEARCH]

    def bind(self, offered: Sequence[BaseTool]) -> None:
        """Narrow the deferred catalog to the tools the agent really offers.

        A deferred MCP tool can be missing from the final list because a
        higher-priority tool has its name or the user may not use it; then
        ``tool_search`` must not reveal its schema either.
        """
        if self.deferred is None:
            return
        specs = self.deferred.specs
        self.deferred = self.deferred.restrict(
            t.name for t in offered
            if t.name in specs and (t.metadata or {}).get("mcp_server") == specs[t.name].server)

    @property
    def active(self) -> bool:
        """Whether the run needs the MCP middlewares at all."""
        return bool(self.tools or self.notices or self.tasks is not None)

"""Tells a run what happened on the MCP side before it started.

``before_agent`` publishes the run's MCP notices (a server skipped because it
failed to start or timed out, a config error, a missing personal credential)
as ``notice`` events, and reports every long-running MCP task of this thread
that finished since its last run: a ``notice`` per task for the user, and one
bounded ``<mcp_task_results>`` note in the conversation for the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.runtime import Runtime

from deerflow.agents.middlewares.tool_search import DeferredToolsMiddleware
from deerflow.runtime.notes import harness_note

if TYPE_CHECKING:  # the MCP SDK loads when a server is used, not on import
    from deerflow.mcp.run_tools import McpRunTools


class McpNoticesMiddleware(AgentMiddleware):
    """Publishes MCP notices and finished task results at the start of a run."""

    def __init__(self, run_tools: McpRunTools) -> None:
        super().__init__()
        self.run_tools = run_tools

    def before_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        del state
        service, context = self.run_tools.tasks, runtime.context
        if service is None or context is None:
            return self._publish(runtime, [])
        return self._publish(runtime, service.collect_finished(context.user_id, context.thread_id))

    async def abefore_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        del state
        service, context = self.run_tools.tasks, runtime.context
        if service is None or context is None:
            return self._publish(runtime, [])
        return self._publish(runtime, await service.acollect_finished(context.user_id, context.thread_id))

    def _publish(self, runtime: Runtime[Any], finished: list[Any]) -> dict[str, Any] | None:
        """Stream the run's notices and finished tasks; the note for the model, if any task finished."""
        for notice in self.run_tools.notices:
            runtime.stream_writer(notice)
        for record in finished:
            runtime.stream_writer({"type": "notice", "kind": "mcp_task_finished",
                                   "text": f"MCP task {record.id} ({record.server}/{record.tool}): {record.status}",
                                   "data": {"task_id": record.id, "status": record.status}})
        if not finished:
            return None
        from deerflow.mcp.tasks import finished_note

        return {"messages": [harness_note(finished_note(finished), "mcp_task_results")]}


def mcp_middlewares(run_tools: McpRunTools | None) -> list[AgentMiddleware]:
    """The MCP middlewares of a run, in order (none when the run has nothing from MCP)."""
    if run_tools is None or not run_tools.active:
        return []
    chain: list[AgentMiddleware] = [McpNoticesMiddleware(run_tools)]
    if run_tools.deferred is not None:
        chain.append(DeferredToolsMiddleware(run_tools))
    return chain


__all__ = ["McpNoticesMiddleware", "mcp_middlewares"]

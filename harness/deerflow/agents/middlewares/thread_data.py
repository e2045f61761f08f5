"""Creates the thread's directories and records their virtual paths in state."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langgraph.runtime import Runtime

from deerflow.persistence.offloop import off_loop
from deerflow.runtime.context import RunContext

THREAD_DATA = {
    "uploads_path": "/mnt/user-data/uploads",
    "workspace_path": "/mnt/user-data/workspace",
    "outputs_path": "/mnt/user-data/outputs",
}


class ThreadDataMiddleware(AgentMiddleware[AgentState[Any], RunContext]):
    """Before the agent starts: make sure uploads/workspace/outputs exist.

    A run the run manager prepared has them already (``RunContext.folders_ready``); the
    async hook makes them off the event loop otherwise (a hung disk must not stall other runs).
    """

    def before_agent(self, state: Any, runtime: Runtime[RunContext]) -> dict[str, Any] | None:
        if not runtime.context.folders_ready:
            runtime.context.paths.ensure()
            runtime.context.folders_ready = True  # later users in this run (a subagent's prepare) need not
        return _thread_data(state)

    async def abefore_agent(self, state: Any, runtime: Runtime[RunContext]) -> dict[str, Any] | None:
        if not runtime.context.folders_ready:
            await off_loop(runtime.context.paths.ensure, what="making the thread's folders")
            runtime.context.folders_ready = True
        return _thread_data(state)


def _thread_data(state: Any) -> dict[str, Any] | None:
    return None if state.get("thread_data") == THREAD_DATA else {"thread_data": dict(THREAD_DATA)}

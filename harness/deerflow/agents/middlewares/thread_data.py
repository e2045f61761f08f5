"""Creates the thread's directories and records their virtual paths in state."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langgraph.runtime import Runtime

from deerflow.runtime.context import RunContext

THREAD_DATA = {
    "uploads_path": "/mnt/user-data/uploads",
    "workspace_path": "/mnt/user-data/workspace",
    "outputs_path": "/mnt/user-data/outputs",
}


class ThreadDataMiddleware(AgentMiddleware[AgentState[Any], RunContext]):
    """Before the agent starts: make sure uploads/workspace/outputs exist."""

    def before_agent(self, state: Any, runtime: Runtime[RunContext]) -> dict[str, Any] | None:
        runtime.context.paths.ensure()
        if state.get("thread_data") == THREAD_DATA:
            return None
        return {"thread_data": dict(THREAD_DATA)}

    async def abefore_agent(self, state: Any, runtime: Runtime[RunContext]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

"""The lead agent's middlewares, one per module, ordered in one place.

Order matters: for ``wrap_*`` hooks the first middleware is the outermost;
``before_*`` hooks run first-to-last and ``after_*`` hooks last-to-first.
Clarification is always last (it must see the final tool calls).
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain.agents.middleware import AgentMiddleware

from deerflow.agents.middlewares.dangling_tool_calls import DanglingToolCallsMiddleware
from deerflow.agents.middlewares.thread_data import ThreadDataMiddleware
from deerflow.agents.middlewares.title import TitleMiddleware
from deerflow.agents.middlewares.tool_authorization import ToolAuthorizationMiddleware
from deerflow.agents.middlewares.tool_errors import ToolErrorHandlingMiddleware
from deerflow.config.schema import AppConfig
from deerflow.tools.authorization import ToolPolicy


@dataclass(frozen=True)
class MiddlewareOptions:
    """Run options that change the middleware chain."""

    is_plan_mode: bool = False
    subagent_enabled: bool = False
    interaction_mode: str = "interactive"


def build_middlewares(app_config: AppConfig, policy: ToolPolicy, options: MiddlewareOptions) -> list[AgentMiddleware]:
    """The ordered middleware chain of the lead agent."""
    del options  # plan mode, subagents and clarification arrive with their issues
    chain: list[AgentMiddleware] = [
        ThreadDataMiddleware(),
        DanglingToolCallsMiddleware(),
        ToolAuthorizationMiddleware(policy),
        ToolErrorHandlingMiddleware(),
    ]
    if app_config.title.enabled:
        chain.append(TitleMiddleware(max_chars=app_config.title.max_chars))
    return chain


__all__ = ["MiddlewareOptions", "build_middlewares"]

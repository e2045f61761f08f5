"""Per-user tool authorization, enforced twice.

Rules in ``config.yaml`` (``authorization.rules``) name users (``*`` for all)
and tool-name patterns (shell globs) to ``allow`` or ``deny``.  A tool is
permitted for a user when no matching rule denies it and, if any matching
rule has an ``allow`` list, one of those lists matches it.

Stage one removes denied tools before the model sees their schemas
(:func:`filter_tools`); stage two refuses them again at execution
(:class:`~deerflow.agents.middlewares.tool_authorization.ToolAuthorizationMiddleware`),
because a tool can still be reached by name (hallucinated calls, deferred
promotion, replayed histories).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from langchain_core.tools import BaseTool

from deerflow.config.schema import AuthorizationConfig


@dataclass(frozen=True)
class ToolPolicy:
    """The resolved permission of one user."""

    enabled: bool
    allow: tuple[tuple[str, ...], ...]
    deny: tuple[str, ...]

    @classmethod
    def for_user(cls, config: AuthorizationConfig, user_id: str) -> ToolPolicy:
        rules = [r for r in config.rules if any(fnmatchcase(user_id, u) for u in r.users)]
        return cls(
            enabled=config.enabled,
            allow=tuple(tuple(r.allow) for r in rules if r.allow is not None),
            deny=tuple(p for r in rules for p in r.deny),
        )

    def permits(self, tool_name: str) -> bool:
        if not self.enabled:
            return True
        if any(fnmatchcase(tool_name, p) for p in self.deny):
            return False
        return not self.allow or any(fnmatchcase(tool_name, p) for lst in self.allow for p in lst)


def filter_tools(tools: Sequence[BaseTool], policy: ToolPolicy) -> list[BaseTool]:
    """Stage one: only the tools the user may call."""
    return [t for t in tools if policy.permits(t.name)]

"""Custom agents: a persona (``SOUL.md``) plus a ``config.yaml``, per user.

See :mod:`deerflow.custom_agents.definition` for the layout,
:mod:`deerflow.custom_agents.store` for reading and writing them and
:mod:`deerflow.custom_agents.profile` for how a run becomes one.
"""

from deerflow.custom_agents.definition import (
    AgentCatalog,
    AgentChange,
    AgentConfig,
    CustomAgent,
    InvalidAgentChange,
    check_agent_name,
)
from deerflow.custom_agents.profile import (
    AgentProfile,
    apply_agent_commands,
    build_catalog,
    known_skills,
    resolve_profile,
)
from deerflow.custom_agents.store import AgentStore

__all__ = [
    "AgentCatalog",
    "AgentChange",
    "AgentConfig",
    "AgentProfile",
    "AgentStore",
    "CustomAgent",
    "InvalidAgentChange",
    "apply_agent_commands",
    "build_catalog",
    "check_agent_name",
    "known_skills",
    "resolve_profile",
]

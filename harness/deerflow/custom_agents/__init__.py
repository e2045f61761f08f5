"""Custom agents: a persona (``SOUL.md``) plus a ``config.yaml``, per user.

See :mod:`deerflow.custom_agents.definition` for the layout,
:mod:`deerflow.custom_agents.store` for reading and writing them and
:mod:`deerflow.custom_agents.profile` for how a run becomes one.
"""

from typing import TYPE_CHECKING

from deerflow._lazy import lazy_exports

if TYPE_CHECKING:
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

# Imported on first use: importing the package (the CLI does) stays cheap.
_EXPORTS = {
    "AgentCatalog": "definition",
    "AgentChange": "definition",
    "AgentConfig": "definition",
    "CustomAgent": "definition",
    "InvalidAgentChange": "definition",
    "check_agent_name": "definition",
    "AgentProfile": "profile",
    "apply_agent_commands": "profile",
    "build_catalog": "profile",
    "known_skills": "profile",
    "resolve_profile": "profile",
    "AgentStore": "store",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

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

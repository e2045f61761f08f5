"""``setup_agent`` and ``update_agent``: a custom agent writing its own definition.

Both are built per run, bound to the run's user store and agent name, so the
model can only ever touch the one agent the run is about:

* ``setup_agent(soul, description, skills?)`` — bootstrap runs only;
* ``update_agent(soul?, description?, skills?, tool_groups?, model?)`` — runs of
  a named custom agent; a partial update, validated before anything is written.

Neither is offered in ``webhook`` runs (an outside event must not rewrite an
agent).  ``update_agent`` changes what every later run of the agent sees, so
it changes nothing on the model's word alone (:mod:`deerflow.runtime.consent`):
in an interactive run it asks the user and the approved change is made when
the answer comes back; scheduled and autonomous runs and subagents are
refused.  Validation failures are model errors (:class:`ToolFailure`): the model
reads which name was unknown and what exists, and the files stay as they were.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from deerflow.config.paths import HomePaths
from deerflow.config.schema import AppConfig
from deerflow.custom_agents.definition import AgentCatalog, AgentChange, InvalidAgentChange
from deerflow.custom_agents.profile import AgentProfile, build_catalog, known_skills
from deerflow.custom_agents.store import AgentStore
from deerflow.errors import NotFoundError, ToolFailure
from deerflow.runtime.consent import ConsentGrants, PendingChange, ask, refusal
from deerflow.runtime.services import HostServices, services_of
from deerflow.tools.assembly import ToolSources
from deerflow.tools.builtins.conversation import ConversationReader, read_conversation_tool

SETUP_AGENT = "setup_agent"
UPDATE_AGENT = "update_agent"
WITHHELD_MODES = frozenset({"webhook"})
_FIELDS = ("soul", "description", "skills", "tool_groups", "model")


class SetupAgentArgs(BaseModel):
    soul: str = Field(description="The agent's persona and standing instructions (Markdown, second person).")
    description: str = Field(description="One sentence saying what the agent is for.")
    skills: list[str] | None = Field(default=None, description="Skill names the agent is limited to (optional).")


class UpdateAgentArgs(BaseModel):
    soul: str | None = Field(default=None, description="New persona and standing instructions (replaces the old).")
    description: str | None = Field(default=None, description="New one-sentence description.")
    skills: list[str] | None = Field(default=None, description="Skill names the agent is limited to.")
    tool_groups: list[str] | None = Field(default=None, description="Tool groups the agent may use.")
    model: str | None = Field(default=None, description="Configured model name the agent runs on.")


def agent_tools(profile: AgentProfile, store: AgentStore | None, catalog: AgentCatalog, *,
                mode: str) -> list[BaseTool]:
    """The agent tools a run gets: ``setup_agent`` when bootstrapping, ``update_agent`` for a named agent."""
    if profile.name is None or store is None or mode in WITHHELD_MODES:
        return []
    if profile.bootstrap:
        return [setup_agent_tool(store, profile.name, catalog)]
    return [update_agent_tool(store, profile.name, catalog)]


def setup_agent_tool(store: AgentStore, name: str, catalog: AgentCatalog) -> BaseTool:
    """``setup_agent`` bound to one agent of one user."""

    def setup_agent(soul: str, description: str, skills: list[str] | None = None) -> str:
        try:
            agent = store.setup(name, soul=soul, description=description, skills=skills, catalog=catalog)
        except InvalidAgentChange as exc:
            raise ToolFailure(str(exc), code="invalid_agent") from None
        return (f"Saved custom agent {name!r} ({agent.label}): {agent.config.description or 'no description'}. "
                f"The user can now run it with --agent {name}.")

    return StructuredTool.from_function(
        setup_agent, name=SETUP_AGENT, args_schema=SetupAgentArgs,
        description=f"Create the custom agent {name!r}: save its soul (persona and standing instructions), "
                    "a one-line description and optionally the skills it is limited to.")


def update_agent_tool(store: AgentStore, name: str, catalog: AgentCatalog) -> BaseTool:
    """``update_agent`` bound to one agent of one user; a change needs the user's yes (see module docstring)."""

    def update_agent(runtime: ToolRuntime, soul: str | None = None, description: str | None = None,
                     skills: list[str] | None = None, tool_groups: list[str] | None = None,
                     model: str | None = None) -> str | tuple[str, dict[str, Any]]:
        refused = refusal(UPDATE_AGENT, runtime.context, hint="the user can make the change themselves")
        if refused is not None:
            raise refused
        change = AgentChange(soul=soul, description=description, skills=skills, tool_groups=tool_groups,
                             model=model)
        grants = services_of(runtime.context).consent_grants
        if isinstance(grants, ConsentGrants) and grants.take(runtime.tool_call_id, UPDATE_AGENT) is not None:
            try:
                store.update(name, change, catalog=catalog)
            except InvalidAgentChange as exc:
                raise ToolFailure(str(exc), code="invalid_agent") from None
            return (f"The user approved. Updated {name!r}: {', '.join(_changed(change))}. "
                    "The change applies from the next run."), {"status": "ok", "approved": True}
        _check(store, name, change, catalog)
        args = {k: v for k, v in dataclasses.asdict(change).items() if k in _FIELDS and v is not None}
        return ask(PendingChange(tool=UPDATE_AGENT, args=args, question=f"Apply this change to the custom agent "
                                 f"{name!r}?", details=_change_details(name, change)),
                   tool_call_id=runtime.tool_call_id or "")

    return StructuredTool.from_function(
        update_agent, name=UPDATE_AGENT, args_schema=UpdateAgentArgs, response_format="content_and_artifact",
        description=f"Change your own definition (you are the custom agent {name!r}). Pass only the fields "
                    "that change; unknown skills, tool groups or models are refused and nothing is written. "
                    "The user is asked to approve the change (refused in unattended runs).")


def _check(store: AgentStore, name: str, change: AgentChange, catalog: AgentCatalog) -> None:
    """Validate before asking, so the user is only asked about a change that can be made."""
    try:
        store.get(name)
        if change.is_empty():
            raise InvalidAgentChange("nothing to change: give soul, description, skills, tool_groups or model")
        catalog.check(change)
    except (InvalidAgentChange, NotFoundError) as exc:
        raise ToolFailure(str(exc), code="invalid_agent") from None


def _change_details(name: str, change: AgentChange) -> str:
    """The change as the user reads it: each field's new value (a long soul shortened)."""
    lines = [f"The agent wants to change its own definition ({name!r}); every later run of {name!r} uses it."]
    for field in _FIELDS:
        value = getattr(change, field)
        if value is None:
            continue
        shown = ", ".join(value) if isinstance(value, list) else str(value)
        if len(shown) > 2000:
            shown = shown[:2000] + f"… ({len(shown):,} characters in all)"
        lines.append(f"New {field}: {shown}")
    return "\n".join(lines)


def with_run_tools(
    sources: ToolSources, app_config: AppConfig, *, profile: AgentProfile, store: AgentStore | None,
    skill_names: frozenset[str] | None, mode: str, reader: ConversationReader | None,
) -> ToolSources:
    """``sources`` plus the tools this one run is granted, in the always-on ``builtin`` group.

    The agent tools follow the run's :class:`AgentProfile`; ``read_conversation``
    follows the host's grant and is never bound in a bootstrap run.
    """
    catalog = build_catalog(app_config, builtin_groups=sources.builtins.keys(), skills=skill_names)
    extra = agent_tools(profile, store, catalog, mode=mode)
    if reader is not None and not profile.bootstrap:
        extra.append(read_conversation_tool(reader))
    if not extra:
        return sources
    builtins = {**sources.builtins, "builtin": [*sources.builtins.get("builtin", []), *extra]}
    return dataclasses.replace(sources, builtins=builtins)


def host_catalog(app_config: AppConfig, home: HomePaths, user_id: str, *, services: HostServices) -> AgentCatalog:
    """The catalog for changes made outside a run (CLI, API, client): what a run on this host would offer."""
    from deerflow.tools.builtins import builtin_groups

    groups = builtin_groups(app_config, None, sandbox=services.sandbox)  # no run, so no model
    skills = known_skills(app_config, home, user_id, library=services.skills)
    return build_catalog(app_config, builtin_groups=groups.keys(), skills=skills)


def _changed(change: AgentChange) -> Sequence[str]:
    return [f for f in _FIELDS if getattr(change, f) is not None]


__all__ = ["SETUP_AGENT", "UPDATE_AGENT", "agent_tools", "host_catalog", "setup_agent_tool", "update_agent_tool", "with_run_tools"]

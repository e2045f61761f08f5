"""What a custom agent is, and what a change to one may contain.

A custom agent is a persona the user made, stored as two files::

    $DEERFLOW_HOME/users/{user}/agents/{name}/SOUL.md      persona and standing instructions
    $DEERFLOW_HOME/users/{user}/agents/{name}/config.yaml  description, model, tool groups, skills

``config.yaml`` is :class:`AgentConfig`; ``SOUL.md`` is free text that becomes the
``<agent_instructions>`` section of the system prompt.  ``tool_groups`` and
``skills`` left unset mean "everything the host offers"; a list narrows the run.

Every change is checked against an :class:`AgentCatalog` (the models, tool groups
and skills this host actually has) *before* anything is written, so a typo from a
model or a person never leaves an agent that cannot run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deerflow.errors import UserError

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
SOUL_MAX_CHARS = 20_000
DESCRIPTION_MAX_CHARS = 500


class InvalidAgentChange(UserError):
    """A change that names something this host does not have; nothing was written."""


def check_agent_name(name: str) -> str:
    """Return ``name`` if it can name an agent (it is also a directory name).

    Raises:
        InvalidAgentChange: empty, upper case, separators or other odd characters.
    """
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise InvalidAgentChange(
            f"invalid agent name {name!r}: use 1-64 lower-case letters, digits, '-' or '_', "
            "starting with a letter or digit")
    return name


class AgentConfig(BaseModel):
    """The ``config.yaml`` of one custom agent."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    name: str
    display_name: str | None = Field(default=None, max_length=120)
    description: str = Field(default="", max_length=DESCRIPTION_MAX_CHARS)
    model: str | None = None
    tool_groups: list[str] | None = None
    skills: list[str] | None = None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_agent_name(value)


@dataclass(frozen=True)
class CustomAgent:
    """A stored agent: its config, its soul and where it lives."""

    config: AgentConfig
    soul: str
    path: Path

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def label(self) -> str:
        """What a UI shows: the owner's display name, else the name."""
        return self.config.display_name or self.config.name

    def summary(self) -> dict[str, object]:
        """A JSON-able view for the API and the CLI."""
        return {**self.config.model_dump(), "soul": self.soul}


@dataclass(frozen=True)
class AgentChange:
    """A partial update: ``None`` leaves a field as it is.

    ``display_name`` belongs to the owner (API, CLI); the agent's own
    ``update_agent`` tool never sets it.
    """

    soul: str | None = None
    description: str | None = None
    skills: list[str] | None = None
    tool_groups: list[str] | None = None
    model: str | None = None
    display_name: str | None = None

    def is_empty(self) -> bool:
        return all(getattr(self, f) is None for f in self.__dataclass_fields__)


@dataclass(frozen=True)
class AgentCatalog:
    """What a custom agent may name on this host.

    Attributes:
        models: Configured model names; empty means only the default model exists,
            so no ``model`` may be set.
        tool_groups: Tool groups the host offers (built-in and config groups).
        skills: Skill names the user can use; ``None`` when the host cannot list
            skills, in which case skill names are accepted unchecked.
    """

    models: frozenset[str]
    tool_groups: frozenset[str]
    skills: frozenset[str] | None

    def check(self, change: AgentChange) -> None:
        """Raise :class:`InvalidAgentChange` naming every unknown value (nothing is written)."""
        problems: list[str] = []
        if change.soul is not None and not change.soul.strip():
            problems.append("soul is empty: describe the agent's persona and standing instructions")
        if change.soul is not None and len(change.soul) > SOUL_MAX_CHARS:
            problems.append(f"soul is {len(change.soul)} characters; the limit is {SOUL_MAX_CHARS}")
        if change.description is not None and len(change.description) > DESCRIPTION_MAX_CHARS:
            problems.append(f"description is longer than {DESCRIPTION_MAX_CHARS} characters")
        if change.model is not None and change.model not in self.models:
            problems.append(_unknown("model", [change.model], self.models))
        if change.tool_groups is not None:
            problems.extend(_unknown_items("tool group", change.tool_groups, self.tool_groups))
        if change.skills is not None and self.skills is not None:
            problems.extend(_unknown_items("skill", change.skills, self.skills))
        if problems:
            raise InvalidAgentChange("; ".join(problems) + ". Nothing was changed.")


def _unknown_items(kind: str, values: Iterable[str], known: frozenset[str]) -> list[str]:
    missing = [v for v in values if v not in known]
    return [_unknown(kind, missing, known)] if missing else []


def _unknown(kind: str, missing: list[str], known: frozenset[str]) -> str:
    plural = "s" if len(missing) > 1 else ""
    available = ", ".join(sorted(known)) or "none"
    return f"unknown {kind}{plural} {', '.join(repr(m) for m in missing)} (available: {available})"

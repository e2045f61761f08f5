"""Subagent types: what the lead may delegate to, and with which limits.

A :class:`SubagentRegistry` is built per use from the config in force (no
module-level table): the built-in ``general-purpose`` type, the ``bash`` type
only where the sandbox runs shell commands, and the custom types of
``subagents.types`` (a custom type may replace a built-in one by name).

Each type says which tools its child may use (``None``: every tool the lead
has, minus the ones no subagent ever gets), which model (``inherit`` = the
lead's) and its own turn/token/time limits, falling back to the
``subagents`` section's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from deerflow.config.schema import SubagentsConfig, SubagentTypeConfig
from deerflow.errors import ToolFailure

GENERAL_PURPOSE = "general-purpose"
BASH = "bash"

FORBIDDEN_CHILD_TOOLS = frozenset({"task", "batch_task", "batch_status", "cancel_batch", "ask_clarification",
                                   "present_files"})
"""Tools no subagent is offered or may run: no nesting, no questions to a person, no presenting."""

_GENERAL_PROMPT = (
    "You are a subagent: a focused worker the lead agent delegated one task to. Nobody will answer "
    "questions while you work, so make reasonable, reversible assumptions and note them. Work in "
    "/mnt/user-data/workspace; write deliverables where the task says (usually /mnt/user-data/outputs). "
    "When you are done, reply with a short report of what you did and what you found.")
_BASH_PROMPT = (
    "You are a command-line subagent. Run shell commands in the sandbox to build, test, inspect or move "
    "files, one step at a time, checking each result. Nobody will answer questions while you work. "
    "When you are done, reply with a short report of the commands that mattered and their outcome.")


@dataclass(frozen=True)
class SubagentLimits:
    """When a subagent is stopped, whatever it is doing."""

    max_turns: int
    max_tokens: int | None
    timeout_seconds: float


@dataclass(frozen=True)
class SubagentType:
    """One kind of subagent the lead can delegate to.

    Attributes:
        name: The ``subagent_type`` the lead passes to ``task``.
        description: What it is for (listed in the ``task`` description).
        prompt: Its system prompt.
        tools: Tool names it may use; ``None`` means the lead's tools.
        model: A configured model name, or ``inherit``.
        skills: Tool names its skills may use; intersected with the parent's
            skill allowlist (``None``: no limit of its own).
        limits: Its turn, token and time limits.
    """

    name: str
    description: str
    prompt: str
    tools: tuple[str, ...] | None
    model: str
    skills: tuple[str, ...] | None
    limits: SubagentLimits


class SubagentRegistry:
    """The subagent types available to one run."""

    def __init__(self, types: Mapping[str, SubagentType]) -> None:
        self._types = dict(types)

    @classmethod
    def from_config(cls, config: SubagentsConfig, *, bash_allowed: bool) -> SubagentRegistry:
        """Built-ins (``bash`` only when the sandbox allows shell commands) plus ``subagents.types``."""
        defaults = SubagentLimits(config.max_turns, config.max_tokens, config.timeout_seconds)
        types = {GENERAL_PURPOSE: SubagentType(
            GENERAL_PURPOSE, "A capable agent for a self-contained, multi-step task: reading and writing "
            "files, running code, research. Give it everything it needs in the prompt.",
            _GENERAL_PROMPT, None, "inherit", None, defaults)}
        if bash_allowed:
            types[BASH] = SubagentType(
                BASH, "Runs shell commands in the thread's sandbox: builds, tests, git, file operations.",
                _BASH_PROMPT, ("bash", "ls", "read_file", "write_file", "str_replace", "glob", "grep"),
                "inherit", None, defaults)
        for name, entry in config.types.items():
            types[name] = _custom(name, entry, defaults)
        return cls(types)

    def names(self) -> list[str]:
        return sorted(self._types)

    def get(self, name: str) -> SubagentType:
        """The type called ``name``.

        Raises:
            ToolFailure: ``unknown_subagent_type``, naming the available types.
        """
        found = self._types.get(name)
        if found is None:
            raise ToolFailure(f"unknown subagent_type {name!r}; use one of: {', '.join(self.names())}",
                              code="unknown_subagent_type")
        return found

    def describe(self) -> str:
        """One line per type, for the ``task`` tool description."""
        return "\n".join(f"- {t.name}: {t.description}" for t in sorted(self._types.values(), key=lambda t: t.name))


def _custom(name: str, entry: SubagentTypeConfig, defaults: SubagentLimits) -> SubagentType:
    limits = SubagentLimits(
        entry.max_turns or defaults.max_turns,
        entry.max_tokens if entry.max_tokens is not None else defaults.max_tokens,
        entry.timeout_seconds or defaults.timeout_seconds,
    )
    return SubagentType(name, entry.description, entry.prompt,
                        tuple(entry.tools) if entry.tools is not None else None, entry.model,
                        tuple(entry.skills) if entry.skills is not None else None, limits)


__all__ = ["BASH", "FORBIDDEN_CHILD_TOOLS", "GENERAL_PURPOSE", "SubagentLimits", "SubagentRegistry", "SubagentType"]

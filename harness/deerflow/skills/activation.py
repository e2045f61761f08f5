"""When a skill is active, and what it lets the model use.

Discovery only shows a skill; activation makes its ``allowed-tools`` count.
A skill is active for the current **turn** (the user's latest message and
everything after it; a reply to a clarification continues the turn it
answers) when:

* **slash** — the turn's user message starts with ``/skill-name``.  The run
  manager checks the name before the run starts (reserved or unknown names are
  refused with a message), so here it is simply looked up;
* **read** — the model read ``/mnt/skills/<name>/SKILL.md`` with ``read_file``
  during the turn and the read succeeded (the runtime saw a real load, not
  a mention).

Combination (the :class:`ToolScope`): a slash-activated skill wins outright —
its policy alone applies, whatever else is read during the turn.  Otherwise
the allowed tools are the **union** over the active skills that declare
``allowed-tools``; skills that declare none do not restrict anything, and
with no declaring skill active every tool is allowed.

Some tools stay available under any scope because they are framework
infrastructure rather than capabilities: discovery (``describe_skill``,
``tool_search``), asking the user (``ask_clarification``), planning
(``write_todos``) and delivering (``present_files``).  ``read_file`` stays
visible too, but outside the allowed list it may only read skill files.
Names in ``allowed-tools`` that no source provides are ignored.

This is behavioural scoping of a cooperative model: it removes schemas from
the request and refuses calls at execution, but a skill's own scripts run
with whatever the allowed tools can do (``python`` can write files).  The
sandbox is the security boundary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from langchain_core.messages import BaseMessage

from deerflow.errors import UserError
from deerflow.skills.catalog import SKILLS_MOUNT, Skill
from deerflow.skills.manifest import MANIFEST, RESERVED_NAMES
from deerflow.skills.turn_scan import SKILL_READER, TURN_SCANS
from deerflow.text.safe_regex import glob_matches

SLASH_RE = re.compile(r"^\s*/([A-Za-z0-9][A-Za-z0-9_.-]*)(?=\s|$)")
FRAMEWORK_TOOLS = frozenset({"describe_skill", "tool_search", "ask_clarification", "write_todos",
                             "present_files"})


@dataclass(frozen=True)
class SlashCommand:
    """``/name rest`` at the start of a user message."""

    name: str
    rest: str


def parse_slash(text: str) -> SlashCommand | None:
    """The slash command a message starts with, if any (``/mnt/...`` paths are not commands)."""
    match = SLASH_RE.match(text)
    if not match:
        return None
    return SlashCommand(match.group(1), text[match.end():].strip())


def check_slash(prompt: str, enabled: Mapping[str, Skill]) -> Skill | None:
    """The skill a prompt activates with ``/name``; None without a slash command.

    Raises:
        UserError: a reserved command, or a name that is not an enabled skill.
    """
    command = parse_slash(prompt)
    if command is None:
        return None
    name = command.name
    if name in RESERVED_NAMES:
        raise UserError(f"/{name} is a reserved command, not a skill, and cannot be used here; "
                        "start the message with another character to send it as text")
    skill = enabled.get(name)
    if skill is None:
        known = ", ".join(f"/{n}" for n in sorted(enabled)) or "none are enabled"
        raise UserError(f"/{name} is not an enabled skill (available: {known}); "
                        "start the message with another character to send it as text")
    return skill


def skill_manifest_name(path: Any) -> str | None:
    """The skill a ``read_file`` path names when it is ``/mnt/skills/<name>/SKILL.md``."""
    if not isinstance(path, str):
        return None
    parts = PurePosixPath(path.strip()).parts
    root = PurePosixPath(SKILLS_MOUNT).parts
    if len(parts) == len(root) + 2 and parts[: len(root)] == root and parts[-1] == MANIFEST:
        return parts[len(root)]
    return None


def is_skill_path(path: Any) -> bool:
    """Whether ``path`` lies under ``/mnt/skills`` (no ``..``)."""
    if not isinstance(path, str):
        return False
    parts = PurePosixPath(path.strip()).parts
    root = PurePosixPath(SKILLS_MOUNT).parts
    return parts[: len(root)] == root and ".." not in parts


@dataclass(frozen=True)
class ActiveSkills:
    """The skills active in the current turn."""

    slash: Skill | None = None
    read: tuple[Skill, ...] = ()
    answered: bool = False
    """Whether the model has spoken in the turn (a slash activation is recorded before it does)."""

    @property
    def all(self) -> list[Skill]:
        return ([self.slash] if self.slash else []) + [s for s in self.read if s is not self.slash]

    def scope(self) -> ToolScope:
        """The tool scope these skills impose (see the module docstring)."""
        deciders = [self.slash] if self.slash is not None else list(self.read)
        declared = [s for s in deciders if s.allowed_tools is not None]
        if not declared:
            return ToolScope(None, ())
        patterns = tuple(dict.fromkeys(t for s in declared for t in s.allowed_tools or ()))
        return ToolScope(patterns, tuple(s.name for s in declared))


def active_skills(messages: Sequence[BaseMessage], enabled: Mapping[str, Skill]) -> ActiveSkills:
    """Which enabled skills the conversation's current turn has activated.

    Read from a scan kept per conversation that reads only the messages added since it was last
    asked (:mod:`deerflow.skills.turn_scan`).
    """
    turn = TURN_SCANS.turn(messages)
    slash = None
    if turn.opener is not None:
        command = parse_slash(turn.opener.text)
        slash = enabled.get(command.name) if command else None
    read = tuple(enabled[n] for n in turn.read if n in enabled)
    return ActiveSkills(slash, read, turn.answered)


@dataclass(frozen=True)
class ToolScope:
    """Allowed tool patterns (None: unrestricted) and the skills that set them."""

    allowed: tuple[str, ...] | None
    skills: tuple[str, ...]

    @property
    def restricted(self) -> bool:
        return self.allowed is not None

    def lists(self, tool: str) -> bool:
        """Whether an active skill's ``allowed-tools`` names ``tool`` (or it is framework)."""
        if self.allowed is None or tool in FRAMEWORK_TOOLS:
            return True
        return any(glob_matches(tool, p) for p in self.allowed)  # RE2: the name is the model's

    def visible(self, tool: str) -> bool:
        """Whether the model is shown ``tool``'s schema."""
        return self.lists(tool) or tool == SKILL_READER

    def permits(self, tool: str, args: Mapping[str, Any]) -> bool:
        """Whether a call may run (``read_file`` outside the list: skill files only)."""
        if self.lists(tool):
            return True
        return tool == SKILL_READER and is_skill_path(args.get("path"))

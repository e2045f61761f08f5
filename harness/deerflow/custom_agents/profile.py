"""Which agent a run is, decided once before the run starts.

A run is the plain lead agent, a *bootstrap* run creating a custom agent
(``is_bootstrap=True`` with ``agent_name``, or a prompt starting with
``/bootstrap NAME``), or a run *of* a custom agent (``agent_name``, or a prompt
starting with ``/agent NAME``: how chat selects one).  The
:class:`AgentProfile` carries what that means for the run: the soul for the
system prompt, the model, the tool groups and skills that narrow it, and the
prompt sections telling the model what it may change.  Resolving it is a
validation step: an unknown agent is a :class:`~deerflow.errors.UserError`
raised before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deerflow.config.paths import HomePaths
from deerflow.config.schema import AppConfig
from deerflow.custom_agents.definition import AgentCatalog, CustomAgent, check_agent_name
from deerflow.custom_agents.store import AgentStore
from deerflow.errors import UserError
from deerflow.run_options import RunOptions

BOOTSTRAP_COMMAND = "/bootstrap"
AGENT_COMMAND = "/agent"
_COMMAND = re.compile(r"^(?P<cmd>/bootstrap|/agent)(?:\s+(?P<name>\S+))?(?:\s+(?P<rest>.*))?$", re.DOTALL)
_REPO_SKILLS = Path(__file__).resolve().parents[3] / "skills"


@dataclass(frozen=True)
class AgentProfile:
    """The agent identity of one run.

    Attributes:
        name: The custom agent's name (None for the plain lead agent).
        bootstrap: Whether this run creates (or re-creates) the agent.
        agent: The stored agent (None for the plain lead agent and a first bootstrap).
    """

    name: str | None = None
    bootstrap: bool = False
    agent: CustomAgent | None = None

    @property
    def soul(self) -> str | None:
        return self.agent.soul if self.agent and not self.bootstrap else None

    @property
    def model(self) -> str | None:
        return self.agent.config.model if self.agent and not self.bootstrap else None

    @property
    def tool_groups(self) -> list[str] | None:
        return self.agent.config.tool_groups if self.agent and not self.bootstrap else None

    @property
    def skills(self) -> list[str] | None:
        """Skills this agent is limited to (None: whatever the user has enabled)."""
        return self.agent.config.skills if self.agent and not self.bootstrap else None

    def prompt_sections(self) -> list[str]:
        """System-prompt sections for this identity (pure text, snapshot-testable)."""
        if self.name is None:
            return []
        if self.bootstrap:
            return [bootstrap_section(self.name, existing=self.agent is not None)]
        label = self.agent.label if self.agent else self.name
        return [custom_agent_section(self.name, label, self.skills)]


def bootstrap_section(name: str, *, existing: bool) -> str:
    """What a bootstrap run is for."""
    again = (" It exists already: setup_agent replaces its soul and description; its display name, "
             "model and tool groups stay as the owner set them.") if existing else ""
    return (
        f"<agent_bootstrap>\nThis run creates the custom agent {name!r}.{again}\n"
        "- Work out from the conversation what the agent is for: its role, tone, standing "
        "instructions and limits.\n"
        "- Then call setup_agent once with `soul` (Markdown, written to the agent in the second "
        "person: who it is and how it works), a one-sentence `description`, and `skills` only if "
        "the user named skills.\n"
        "- Finish by telling the user how to talk to the agent: `--agent " + name + "`.\n"
        "</agent_bootstrap>")


def custom_agent_section(name: str, label: str, skills: list[str] | None) -> str:
    """Who the model is in a custom agent's run, and what it may change about itself."""
    lines = [f"<custom_agent name={name!r}>",
             f"You are {label!r}, a custom agent the user created; your instructions are in "
             "<agent_instructions>.",
             "When the user asks you to change how you work (persona, description, skills, tool groups, "
             "model), call update_agent with only the fields that change. Do not change yourself "
             "unprompted."]
    if skills is not None:
        lines.append("Skills available to you: " + (", ".join(skills) if skills else "none") + ".")
    lines.append("</custom_agent>")
    return "\n".join(lines)


def apply_agent_commands(prompt: str, options: RunOptions) -> tuple[str, RunOptions]:
    """Turn a leading agent command into run options, for hosts that only pass text (chat).

    * ``/bootstrap NAME what it is for`` — a bootstrap run creating agent NAME;
    * ``/agent NAME the prompt`` — a run of custom agent NAME.

    Returns the prompt the model should see and the options; other prompts pass
    through unchanged.

    Raises:
        UserError: a command without a name (or ``/agent`` without a prompt), or an invalid name.
    """
    match = _COMMAND.match(prompt.strip())
    if not match:
        return prompt, options
    command, name = match.group("cmd"), match.group("name")
    rest = (match.group("rest") or "").strip()
    if not name:
        raise UserError(f"{command} needs an agent name: {command} NAME "
                        + ("what the agent should do" if command == BOOTSTRAP_COMMAND else "your prompt"))
    check_agent_name(name)
    if command == AGENT_COMMAND:
        if not rest:
            raise UserError(f"/agent {name} needs a prompt after the agent's name")
        return rest, options.merged(agent_name=name)
    text = rest or f"Help me set up the custom agent {name!r}."
    return text, options.merged(agent_name=name, is_bootstrap=True)


def resolve_profile(options: RunOptions, store: AgentStore | None) -> AgentProfile:
    """The agent identity the run options ask for.

    Raises:
        UserError: ``is_bootstrap`` without ``agent_name``, an invalid name, an
            unknown agent, or custom agents asked for where the host has none.
    """
    name = options.agent_name
    bootstrap = bool(options.is_bootstrap)
    if not name:
        if bootstrap:
            raise UserError("a bootstrap run needs agent_name: the name of the agent to create")
        return AgentProfile()
    check_agent_name(name)
    if store is None:
        raise UserError("custom agents are not available in this host")
    if bootstrap:
        return AgentProfile(name=name, bootstrap=True, agent=store.get(name) if store.exists(name) else None)
    return AgentProfile(name=name, agent=store.get(name))


def build_catalog(app_config: AppConfig, *, builtin_groups: Iterable[str],
                  skills: frozenset[str] | None) -> AgentCatalog:
    """What agents may name here: configured models, every tool group offered, the user's skills."""
    groups = set(builtin_groups) | {g.name for g in app_config.tool_groups} | {t.group for t in app_config.tools}
    return AgentCatalog(models=frozenset(m.name for m in app_config.models), tool_groups=frozenset(groups),
                        skills=skills)


def known_skills(app_config: AppConfig, home: HomePaths, user_id: str, *, library: Any = None) -> frozenset[str]:
    """The skill names an agent may name: the user's skills, enabled or not.

    With the host's skill library (:mod:`deerflow.skills`) its listing is the
    answer; without one, the skill roots are scanned: ``skills.path`` (or the repo's
    ``skills/``) and the user's own, a skill being a directory holding ``SKILL.md``
    named by its frontmatter ``name`` (else the directory name).
    """
    if library is not None:
        return frozenset(s.name for s in library.listing(user_id).skills)
    roots = [Path(app_config.skills.path).expanduser() if app_config.skills.path else _REPO_SKILLS,
             home.user_dir(user_id) / "skills"]
    names: set[str] = set()
    for root in roots:
        if root.is_dir():
            for skill_md in (*root.glob("*/SKILL.md"), *root.glob("*/*/SKILL.md")):
                names.add(_skill_name(skill_md))
    return frozenset(names)


def _skill_name(skill_md: Path) -> str:
    try:
        head = skill_md.read_text(encoding="utf-8", errors="replace")[:4000]
    except OSError:
        return skill_md.parent.name
    if head.startswith("---"):
        for line in head.splitlines()[1:]:
            if line.strip() == "---":
                break
            key, _, value = line.partition(":")
            if key.strip() == "name" and value.strip():
                return value.strip().strip("'\"")
    return skill_md.parent.name


__all__ = ["AGENT_COMMAND", "BOOTSTRAP_COMMAND", "AgentProfile", "apply_agent_commands", "bootstrap_section",
           "build_catalog",
           "custom_agent_section", "known_skills", "resolve_profile"]

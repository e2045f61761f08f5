"""Custom agents on disk, one directory per agent, per user.

A store is bound to one user's ``agents/`` directory, so one user can never
name, read or change another user's agent: the other directory is simply not
in reach.  Writes validate first (:meth:`AgentCatalog.check`), then replace each
changed file atomically (temporary file in the same directory, ``fsync``,
``os.replace``): a reader sees the old file or the new one, never half of one,
and a rejected change leaves both files untouched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from pydantic import ValidationError

from deerflow.config.paths import HomePaths
from deerflow.custom_agents.definition import (
    AgentCatalog,
    AgentChange,
    AgentConfig,
    CustomAgent,
    InvalidAgentChange,
    check_agent_name,
)
from deerflow.errors import NotFoundError, UserError
from deerflow.persistence.aio import guard_loop
from deerflow.persistence.files import atomic_write_text

SOUL_FILE = "SOUL.md"
CONFIG_FILE = "config.yaml"


class AgentStore:
    """One user's custom agents.

    Every method reads or writes the agent's files on the calling thread: async code runs them in
    a worker thread (with ``DEERFLOW_LOOP_GUARD=1``, reading an agent on an event loop's thread
    raises ``LoopBlocked``).

    Args:
        root: The user's ``agents/`` directory (see :meth:`for_user`).
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def for_user(cls, home: HomePaths, user_id: str) -> AgentStore:
        return cls(home.user_dir(user_id) / "agents")

    def _dir(self, name: str) -> Path:
        return self.root / check_agent_name(name)

    def exists(self, name: str) -> bool:
        return (self._dir(name) / CONFIG_FILE).is_file()

    def list_agents(self) -> list[CustomAgent]:
        """Every readable agent, by name (a broken one is skipped, not fatal)."""
        if not self.root.is_dir():
            return []
        agents = []
        for child in sorted(self.root.iterdir()):
            if child.is_dir() and (child / CONFIG_FILE).is_file():
                try:
                    agents.append(self.get(child.name))
                except UserError:
                    continue
        return agents

    def get(self, name: str) -> CustomAgent:
        """The agent called ``name``.

        Raises:
            NotFoundError: no such agent for this user (the message lists theirs).
            UserError: its ``config.yaml`` is not valid.
        """
        guard_loop("AgentStore.get()", instead="run the store's work with asyncio.to_thread")  # and list, update...
        path = self._dir(name)
        config_file = path / CONFIG_FILE
        if not config_file.is_file():
            known = ", ".join(sorted(p.parent.name for p in self.root.glob(f"*/{CONFIG_FILE}"))) or "none"
            raise NotFoundError(f"unknown agent {name!r} (your agents: {known}); create it with "
                                f"`deerflow agents new {name}` or `/bootstrap {name}`")
        try:
            data = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
            config = AgentConfig.model_validate({**data, "name": name})
        except (yaml.YAMLError, ValidationError) as exc:
            raise UserError(f"agent {name!r} has an invalid {CONFIG_FILE}: {_first_line(exc)}") from None
        soul_file = path / SOUL_FILE
        soul = soul_file.read_text(encoding="utf-8") if soul_file.is_file() else ""
        return CustomAgent(config=config, soul=soul, path=path)

    def setup(self, name: str, *, soul: str, description: str, skills: list[str] | None,
              catalog: AgentCatalog) -> CustomAgent:
        """Create the agent, or re-create it from a new bootstrap.

        Re-bootstrapping replaces the soul and description (and the skills when
        given) but keeps what the owner chose: ``display_name``, ``model`` and
        ``tool_groups``.

        Raises:
            InvalidAgentChange: empty soul, unknown skills; nothing is written.
        """
        check_agent_name(name)
        catalog.check(AgentChange(soul=soul, description=description, skills=skills))
        previous = self.get(name).config if self.exists(name) else AgentConfig(name=name)
        config = previous.model_copy(update={
            "description": description.strip(),
            "skills": skills if skills is not None else previous.skills,
        })
        self._write(name, config=config, soul=soul)
        return self.get(name)

    def update(self, name: str, change: AgentChange, *, catalog: AgentCatalog) -> CustomAgent:
        """Apply a partial change to an existing agent.

        Raises:
            NotFoundError: no such agent.
            InvalidAgentChange: nothing to change, or an unknown model, tool group or
                skill; nothing is written.
        """
        current = self.get(name)
        if change.is_empty():
            raise InvalidAgentChange("nothing to change: give soul, description, skills, tool_groups or model")
        catalog.check(change)
        fields = {k: getattr(change, k) for k in ("description", "skills", "tool_groups", "model", "display_name")
                  if getattr(change, k) is not None}
        if "description" in fields:
            fields["description"] = fields["description"].strip()
        config = current.config.model_copy(update=fields)
        AgentConfig.model_validate(config.model_dump())  # lengths and name, before writing
        self._write(name, config=config if config != current.config else None, soul=change.soul)
        return self.get(name)

    def delete(self, name: str) -> None:
        """Remove the agent's directory.

        Raises:
            NotFoundError: no such agent.
        """
        path = self.get(name).path
        shutil.rmtree(path)

    def _write(self, name: str, *, config: AgentConfig | None, soul: str | None) -> None:
        path = self._dir(name)
        path.mkdir(parents=True, exist_ok=True)
        if soul is not None:
            atomic_write_text(path / SOUL_FILE, soul.strip() + "\n", durable=True)
        if config is not None:
            data = config.model_dump(exclude_none=True)
            atomic_write_text(path / CONFIG_FILE, yaml.safe_dump(data, sort_keys=False, allow_unicode=True),
                              durable=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["CONFIG_FILE", "SOUL_FILE", "AgentStore", "InvalidAgentChange"]

"""The skills of a host: listing, enabling, installing, and preparing a run.

One :class:`SkillLibrary` per host (run manager, embedded client); it holds no
per-user state in memory — every call reads the directories and the state
files, so the CLI, the server and a notebook can change skills side by side
and the next run sees the change.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from deerflow.config.loader import ExtensionsLocation, LoadedConfig, resolve_extensions
from deerflow.config.paths import HomePaths
from deerflow.config.schema import SkillsConfig
from deerflow.errors import NotFoundError
from deerflow.persistence.aio import guard_loop
from deerflow.skills.archive import PackageLimits
from deerflow.skills.catalog import (
    Discovery,
    Skill,
    SkillInfo,
    SkillProblem,
    discover,
    merge,
    public_root_from,
)
from deerflow.skills.installer import InstallResult, InstallTarget, install_package
from deerflow.skills.run import RunSkills
from deerflow.skills.state import USER_STATE_FILE, read_states, resolve_enabled, write_state


@dataclass(frozen=True)
class SkillListing:
    """A user's skills (enabled or not) and the directories that failed to load."""

    skills: tuple[Skill, ...]
    problems: tuple[SkillProblem, ...]

    def infos(self) -> list[SkillInfo]:
        return [s.info() for s in self.skills]

    def get(self, name: str) -> Skill:
        """The skill called ``name``; NotFoundError listing the known names otherwise."""
        for skill in self.skills:
            if skill.name == name:
                return skill
        known = ", ".join(s.name for s in self.skills) or "none"
        raise NotFoundError(f"unknown skill {name!r} (known skills: {known})")


class SkillLibrary:
    """Public and custom skills, with per-user enabled state.

    Args:
        public_root: Directory of public skills (None: none).
        home: ``$DEERFLOW_HOME`` layout (custom skills and per-user state live there).
        extensions_path: The operator's ``extensions_config.json`` (need not exist), or the config's
            :class:`~deerflow.config.loader.ExtensionsLocation`, resolved at each read.
        config: The ``skills`` section of ``config.yaml``.
        limits: Package limits for installs.
    """

    def __init__(self, *, public_root: Path | None, home: HomePaths, extensions_path: Path | ExtensionsLocation,
                 config: SkillsConfig | None = None, limits: PackageLimits | None = None) -> None:
        self.public_root = public_root
        self.home = home
        self.extensions_where = extensions_path
        self.config = config or SkillsConfig()
        self.limits = limits or PackageLimits()

    @classmethod
    def from_config(cls, loaded: LoadedConfig, home: HomePaths) -> SkillLibrary:
        """The library a host builds from its loaded config."""
        base = loaded.path.parent if loaded.path is not None else None
        return cls(public_root=public_root_from(loaded.config.skills.path, base=base), home=home,
                   extensions_path=loaded.extensions, config=loaded.config.skills)

    @property
    def extensions_path(self) -> Path:
        """The operator's ``extensions_config.json`` as things are now (resolved at each read)."""
        return resolve_extensions(self.extensions_where)

    def user_state_path(self, user_id: str) -> Path:
        return self.home.user_dir(user_id) / USER_STATE_FILE

    def listing(self, user_id: str) -> SkillListing:
        """Every skill of ``user_id`` with its enabled flag (a fresh read of disk).

        It reads every ``SKILL.md`` and the state files on the calling thread: async code runs it
        (and everything built on it: :meth:`skill`, :meth:`set_enabled`, :meth:`for_run`) in a
        worker thread (with ``DEERFLOW_LOOP_GUARD=1`` a call on an event loop's thread raises
        ``LoopBlocked``).
        """
        guard_loop("SkillLibrary.listing()", instead="run it with asyncio.to_thread")
        found: Discovery = merge(discover(self.public_root, "public"),
                                 discover(self.home.user_skills(user_id), "custom"))
        layers = [read_states(self.extensions_path), read_states(self.user_state_path(user_id))]
        skills = tuple(_with_enabled(s, resolve_enabled(s.name, layers)) for s in found.skills)
        return SkillListing(skills, found.problems)

    def skills(self, user_id: str) -> list[SkillInfo]:
        return self.listing(user_id).infos()

    def skill(self, user_id: str, name: str) -> Skill:
        return self.listing(user_id).get(name)

    def set_enabled(self, user_id: str, name: str, enabled: bool) -> SkillInfo:
        """Enable or disable a skill for one user (their own state file).

        Raises:
            NotFoundError: no such skill.
        """
        self.skill(user_id, name)
        write_state(self.user_state_path(user_id), name, enabled)
        return self.skill(user_id, name).info()

    def install(self, user_id: str, source: Path, *, replace: bool = False) -> InstallResult:
        """Install a package as a custom skill of ``user_id`` and enable it (see installer)."""
        public = {s.name for s in discover(self.public_root, "public").skills}
        target = InstallTarget(
            custom_root=self.home.user_skills(user_id), public_names=frozenset(public), limits=self.limits,
            enable=lambda name: write_state(self.user_state_path(user_id), name, True),
        )
        return install_package(Path(source).expanduser(), target, replace=replace)

    def for_run(self, user_id: str, prompt: str, *, allow: Collection[str] | None = None) -> RunSkills:
        """The enabled skills of a run; checks a leading ``/skill-name`` in ``prompt``.

        Args:
            user_id: Whose skills.
            prompt: The run's user message.
            allow: A custom agent's skill allowlist (None: every enabled skill).

        Raises:
            UserError: the prompt starts with a reserved or unknown ``/name``.
        """
        listed = self.listing(user_id).skills
        enabled = tuple(s for s in listed if s.enabled and (allow is None or s.name in allow))
        return RunSkills.create(user_id, enabled, prompt=prompt, deferred=self.config.deferred_discovery,
                                library=self, known=frozenset(s.name for s in listed))


def _with_enabled(skill: Skill, enabled: bool) -> Skill:
    return Skill(skill.manifest, skill.body, skill.source, skill.root, enabled)

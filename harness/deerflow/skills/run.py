"""The skills of one run: what the prompt, the tools and the middlewares see.

:class:`RunSkills` is built by the run manager before anything is written
(a bad ``/name`` is a user error at that point), projected into the thread
once the thread exists (a thread with no view yet gets it on first use: see
:mod:`deerflow.skills.projection`), and handed to the run as ``RunContext.services``:
``run_skills`` (this object) and ``skills_root`` (the thread's view, the
``/mnt/skills`` of the file tools).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from deerflow.config.paths import ThreadPaths
from deerflow.runtime.services import HostServices, services_of
from deerflow.skills.activation import check_slash
from deerflow.skills.catalog import Skill
from deerflow.skills.projection import OwedView, project_skills, view_absent
from deerflow.skills.prompt import discovery_section

if TYPE_CHECKING:
    from deerflow.skills.library import SkillLibrary

INSTALL_TOOL = "install_skill"
MAX_MATCHES = 5
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class RunSkills:
    """A run's enabled skills.

    Attributes:
        user_id: Whose skills these are.
        skills: The enabled skills, by name order.
        deferred: Deferred discovery (names-only index + ``describe_skill``).
        slash: The skill the prompt activates with ``/name``, if any.
        library: The host library (for the ``install_skill`` tool), if any.
        known: Every skill name of the user, enabled or not, from the same listing (what a
            custom agent may name; None when not listed here).
    """

    user_id: str
    skills: tuple[Skill, ...]
    deferred: bool = False
    slash: Skill | None = None
    library: SkillLibrary | None = None
    known: frozenset[str] | None = None

    @classmethod
    def create(cls, user_id: str, skills: Sequence[Skill], *, prompt: str = "", deferred: bool = False,
               library: SkillLibrary | None = None, known: frozenset[str] | None = None) -> RunSkills:
        """Build and check: a leading ``/name`` must be an enabled skill (UserError otherwise)."""
        ordered = tuple(sorted(skills, key=lambda s: s.name))
        slash = check_slash(prompt, {s.name: s for s in ordered})
        return cls(user_id, ordered, deferred, slash, library, known)

    @property
    def by_name(self) -> Mapping[str, Skill]:
        return {s.name: s for s in self.skills}

    def prompt_section(self) -> str:
        """The system-prompt section for discovery ("" with no enabled skill)."""
        return discovery_section(self.skills, deferred=self.deferred)

    def offers_install(self) -> bool:
        """``install_skill`` is offered when an enabled skill lists it (the skill creator does)."""
        return self.library is not None and any(INSTALL_TOOL in (s.allowed_tools or ()) for s in self.skills)

    def project(self, paths: ThreadPaths) -> tuple[ThreadPaths, dict[str, Any]]:
        """The run's paths and the run services that expose the thread's view.

        An existing view (or anything planted where it belongs) is rebuilt now; an absent one
        is owed: the returned paths build it on first use (``ThreadPaths.ready_skills_view``).
        """
        if view_absent(paths):
            paths = replace(paths, owed_skills_view=OwedView(self.skills, paths.root))
            view = paths.skills_view
        else:
            view = project_skills(self.skills, paths)
        return paths, {"run_skills": self, "skills_root": str(view)}

    def search(self, query: str) -> list[Skill]:
        """``select:a,b`` picks names; otherwise keywords ranked by name, then description hits."""
        query = query.strip()
        if query.lower().startswith("select:"):
            names = [n.strip() for n in query[len("select:"):].split(",") if n.strip()]
            by_name = self.by_name
            return [by_name[n] for n in dict.fromkeys(names) if n in by_name]
        words = set(_WORD.findall(query.lower()))
        scored = []
        for skill in self.skills:
            name_words = set(_WORD.findall(skill.name))
            text_words = set(_WORD.findall(skill.description.lower()))
            score = 3 * len(words & name_words) + len(words & text_words)
            score += sum(1 for w in words if len(w) > 3 and any(t.startswith(w) for t in text_words - words))
            if score:
                scored.append((-score, skill.name, skill))
        return [s for _, _, s in sorted(scored)[:MAX_MATCHES]]


def run_skills_of(context: Any) -> RunSkills | None:
    """The run's skills from a ``RunContext`` (None when skills are not set up)."""
    found = services_of(context).run_skills
    return found if isinstance(found, RunSkills) else None


def prepare_run_skills(services: HostServices, user_id: str, prompt: str, *,
                       allow: Sequence[str] | None = None) -> RunSkills | None:
    """A run's skills from the host's library (``services.skills``); None without one.

    Raises:
        UserError: the prompt starts with a reserved or unknown ``/name``.
    """
    library = services.skills
    if library is None:
        return None
    return library.for_run(user_id, prompt, allow=allow)


def project_run_skills(skills: RunSkills | None, paths: ThreadPaths) -> tuple[ThreadPaths, dict[str, Any]]:
    """The run's paths and the run services exposing the thread's view of ``skills`` ({} without skills)."""
    return skills.project(paths) if skills is not None else (paths, {})

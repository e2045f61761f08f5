"""Finding skills on disk: public skills from the repository, custom skills per user.

Two sources, in this order:

* **public** — ``skills/public/<name>/`` shipped with DeerFlow (the wheel's
  ``deerflow/_data`` copy, else the repository's; :mod:`deerflow.resources`), or the directory named by ``skills.path`` in ``config.yaml``
  (its ``public/`` subdirectory when it has one, else the directory itself);
* **custom** — ``$DEERFLOW_HOME/users/{user}/skills/<name>/``, written only
  by the installer (:mod:`deerflow.skills.installer`).

A skill directory's name must equal its frontmatter ``name``; names are unique
across both sources (the installer refuses a custom skill named like a public
one, and a public skill wins should one appear anyway).  A directory that does
not parse is not a skill: it is reported as a :class:`SkillProblem` so the
listing can show it, and never reaches a run.  Directories starting with ``.``
(installer staging areas) are ignored.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from deerflow.resources import public_skills_dir
from deerflow.skills.manifest import (
    MANIFEST,
    SkillDocument,
    SkillFormatError,
    SkillManifest,
    parse_skill_md,
)

logger = logging.getLogger(__name__)

SkillSource = Literal["public", "custom"]
SKILLS_MOUNT = "/mnt/skills"


@dataclass(frozen=True)
class Skill:
    """A skill found on disk.

    Attributes:
        manifest: Its validated frontmatter.
        body: The instructions (``SKILL.md`` after the frontmatter).
        source: ``public`` or ``custom``.
        root: Its canonical host directory (never shown to the model).
        enabled: Whether the user has it enabled.
    """

    manifest: SkillManifest
    body: str
    source: SkillSource
    root: Path
    enabled: bool = True

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def description(self) -> str:
        return self.manifest.description

    @property
    def allowed_tools(self) -> tuple[str, ...] | None:
        return self.manifest.allowed_tools

    @property
    def virtual_dir(self) -> str:
        """Where the model sees the package."""
        return f"{SKILLS_MOUNT}/{self.name}"

    @property
    def virtual_manifest(self) -> str:
        return f"{self.virtual_dir}/{MANIFEST}"

    def files(self) -> list[str]:
        """Paths of the package's files relative to its root, sorted (symlinks left out)."""
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*")
                      if p.is_file() and not p.is_symlink())

    def info(self) -> SkillInfo:
        """The public summary of this skill."""
        m = self.manifest
        return SkillInfo(
            name=m.name, description=m.description, source=self.source, enabled=self.enabled,
            allowed_tools=list(m.allowed_tools) if m.allowed_tools is not None else None,
            required_secrets=list(m.required_secrets), license=m.license, version=m.version,
            author=m.author, compatibility=m.compatibility, metadata=dict(m.metadata),
            path=self.virtual_dir,
        )


@dataclass(frozen=True)
class SkillInfo:
    """What a user sees of a skill (CLI, magics, server API); JSON-ready with :meth:`to_dict`."""

    name: str
    description: str
    source: SkillSource
    enabled: bool
    allowed_tools: list[str] | None = None
    required_secrets: list[str] = field(default_factory=list)
    license: str | None = None
    version: str | None = None
    author: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class SkillProblem:
    """A directory that looks like a skill but cannot be used, and why."""

    source: SkillSource
    directory: str
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "directory": self.directory, "error": self.error}


@dataclass(frozen=True)
class Discovery:
    """Skills found under one or more roots, plus the directories that failed."""

    skills: tuple[Skill, ...] = ()
    problems: tuple[SkillProblem, ...] = ()


def default_public_root() -> Path:
    """The public skills that ship with DeerFlow (the wheel's copy, else the repository's)."""
    return public_skills_dir()


def public_root_from(path: str | None, *, base: Path | None = None) -> Path:
    """The public skills directory for ``skills.path`` (None: the repository's).

    Args:
        path: The configured value; relative paths are taken from ``base``
            (the config file's directory).
        base: Directory relative paths start from.
    """
    if not path:
        return default_public_root()
    root = Path(path).expanduser()
    if not root.is_absolute() and base is not None:
        root = base / root
    return root / "public" if (root / "public").is_dir() else root


class _ParsedManifests:
    """Parsed ``SKILL.md`` files keyed by path and file signature (inode, size, mtime, ctime).

    Every run lists the skills (twice: the catalog and the run's enabled set);
    re-reading and YAML-parsing every manifest each time was a sixth of a run's
    fixed cost.  A file whose signature changed is parsed again, so an edit or an
    install is seen by the next run, as before.  Bounded (least recently used out).
    """

    def __init__(self, max_entries: int = 1024) -> None:
        self._docs: OrderedDict[str, tuple[tuple[int, ...], SkillDocument]] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries

    def get(self, path: Path) -> SkillDocument | None:
        signature = _signature(path)
        with self._lock:
            hit = self._docs.get(str(path))
            if hit is None or signature is None or hit[0] != signature:
                return None
            self._docs.move_to_end(str(path))
            return hit[1]

    def put(self, path: Path, signature: tuple[int, ...] | None, doc: SkillDocument) -> None:
        """Remember ``doc``, parsed from ``path`` as it was at ``signature`` (taken before reading)."""
        if signature is None or signature != _signature(path):  # changed while we read: parse again next time
            return
        with self._lock:
            self._docs[str(path)] = (signature, doc)
            self._docs.move_to_end(str(path))
            while len(self._docs) > self._max:
                self._docs.popitem(last=False)


def _signature(path: Path) -> tuple[int, ...] | None:
    """The file's own signature, or None (never cached) unless it is a regular file.

    ``lstat``: a link's signature would not change when its target does, so a linked
    ``SKILL.md`` is parsed on every read rather than served stale from the cache.
    """
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_PARSED = _ParsedManifests()


def load_skill(directory: Path, source: SkillSource) -> Skill:
    """Parse the skill in ``directory``.

    Raises:
        SkillFormatError: no or invalid ``SKILL.md``, or a name that differs from the directory.
    """
    manifest_path = directory / MANIFEST
    where = f"{source} skill {directory.name!r}"
    if not manifest_path.is_file():
        raise SkillFormatError(f"{where}: there is no {MANIFEST}")
    doc = _PARSED.get(manifest_path)
    if doc is None:
        signature = _signature(manifest_path)
        try:
            text = manifest_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SkillFormatError(f"{where}: {MANIFEST} cannot be read as UTF-8 text ({exc})") from None
        doc = parse_skill_md(text, where=f"{where}: {MANIFEST}")
        _PARSED.put(manifest_path, signature, doc)
    if doc.manifest.name != directory.name:
        raise SkillFormatError(f"{where}: the frontmatter name {doc.manifest.name!r} does not match "
                               f"its directory {directory.name!r}")
    return Skill(doc.manifest, doc.body, source, directory)


def discover(root: Path | None, source: SkillSource) -> Discovery:
    """Every skill directly under ``root`` (missing root: none)."""
    if root is None or not root.is_dir():
        return Discovery()
    skills: list[Skill] = []
    problems: list[SkillProblem] = []
    for directory in sorted(root.iterdir()):
        if directory.name.startswith(".") or not directory.is_dir() or directory.is_symlink():
            continue
        try:
            skills.append(load_skill(directory, source))
        except SkillFormatError as exc:
            logger.warning("skipping %s", exc)
            problems.append(SkillProblem(source, directory.name, str(exc)))
    return Discovery(tuple(skills), tuple(problems))


def merge(public: Discovery, custom: Discovery) -> Discovery:
    """Public and custom skills by name; a public skill wins a name clash."""
    by_name = {s.name: s for s in public.skills}
    problems = list(public.problems) + list(custom.problems)
    for skill in custom.skills:
        if skill.name in by_name:
            problems.append(SkillProblem("custom", skill.name,
                                         f"custom skill {skill.name!r} is shadowed by the public skill"))
            continue
        by_name[skill.name] = skill
    return Discovery(tuple(sorted(by_name.values(), key=lambda s: s.name)), tuple(problems))

"""Installing a custom skill: stage, validate, scan, then one atomic rename.

The same path serves every way a skill arrives — an archive or a directory
from the user (client, CLI, magic, server upload) and a skill the agent wrote
in its workspace (the ``install_skill`` tool):

1. copy the package into ``.staging-<id>/`` inside the user's custom skills
   directory (same filesystem as the target), under the archive limits;
2. find its ``SKILL.md``, parse it, check the name (reserved, taken by a
   public skill, already installed);
3. run SkillScan; a critical finding refuses the install
   (:class:`SkillScanBlocked` carries the report so callers can show it);
4. rename the staged directory to ``<name>/`` (replacing an existing custom
   skill only when asked: old moved aside, new renamed in, old deleted);
5. enable the skill for the user; remove the staging directory whatever happened.

Nothing is ever visible under the skill's name before step 4 succeeds.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deerflow.errors import UserError
from deerflow.skills.archive import (
    ARCHIVE_SUFFIXES,
    PackageLimits,
    SkillPackageError,
    copy_directory,
    extract_zip,
    package_root,
)
from deerflow.skills.catalog import SkillInfo, load_skill
from deerflow.skills.manifest import RESERVED_NAMES, parse_skill_md
from deerflow.skills.scan import ScanReport, scan_package


class SkillScanBlocked(UserError):
    """SkillScan found critical problems; ``report`` lists every finding."""

    def __init__(self, name: str, report: ScanReport) -> None:
        self.name = name
        self.report = report
        lines = "\n".join(f"  {f}" for f in report.critical)
        super().__init__(f"skill {name!r} was not installed: SkillScan blocked it\n{lines}")


@dataclass(frozen=True)
class InstallResult:
    """An installed skill and what SkillScan said about it (warnings only, by definition)."""

    skill: SkillInfo
    report: ScanReport
    replaced: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"skill": self.skill.to_dict(), "scan": self.report.to_dict(), "replaced": self.replaced}


@dataclass(frozen=True)
class InstallTarget:
    """Where and under which rules a package is installed.

    Attributes:
        custom_root: The user's custom skills directory.
        public_names: Names taken by public skills.
        limits: Package limits.
        enable: Called with the skill name once it is in place.
    """

    custom_root: Path
    public_names: frozenset[str]
    limits: PackageLimits
    enable: Callable[[str], None]


def install_package(source: Path, target: InstallTarget, *, replace: bool = False) -> InstallResult:
    """Install the package at ``source`` (archive or directory) as a custom skill.

    Raises:
        SkillPackageError: unsafe or malformed package (nothing installed).
        SkillFormatError: invalid ``SKILL.md``.
        SkillScanBlocked: SkillScan found critical problems.
        UserError: the name is reserved, public, or installed (without ``replace``).
    """
    if not source.exists():
        raise UserError(f"{source} does not exist")
    target.custom_root.mkdir(parents=True, exist_ok=True)
    staging = target.custom_root / f".staging-{uuid.uuid4().hex}"
    staging.mkdir()
    try:
        unpacked = staging / "package"
        unpacked.mkdir()
        _unpack(source, unpacked, target.limits)
        root = package_root(unpacked)
        staged = staging / _probe_name(root)
        root.rename(staged)
        skill = load_skill(staged, "custom")
        _check_name(skill.name, target, replace=replace)
        report = scan_package(staged)
        if report.blocked:
            raise SkillScanBlocked(skill.name, report)
        replaced = _move_into_place(staged, target.custom_root / skill.name, staging)
        target.enable(skill.name)
        installed = load_skill(target.custom_root / skill.name, "custom")
        return InstallResult(installed.info(), report, replaced)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _unpack(source: Path, dest: Path, limits: PackageLimits) -> None:
    if source.is_dir():
        copy_directory(source, dest, limits)
    elif source.suffix.lower() in ARCHIVE_SUFFIXES:
        if source.stat().st_size > limits.max_total_bytes:
            raise SkillPackageError(f"{source.name} is larger than {limits.max_total_bytes:,} bytes")
        extract_zip(source, dest, limits)
    else:
        raise SkillPackageError(f"{source.name}: give a directory or a .skill/.zip archive")


def _probe_name(root: Path) -> str:
    """The frontmatter name, so the staged directory matches it before parsing for real."""
    doc = parse_skill_md((root / "SKILL.md").read_text(encoding="utf-8", errors="replace"),
                         where="the package's SKILL.md")
    return doc.manifest.name


def _check_name(name: str, target: InstallTarget, *, replace: bool) -> None:
    if name in RESERVED_NAMES:
        raise UserError(f"skill name {name!r} is reserved; rename the skill")
    if name in target.public_names:
        raise UserError(f"{name!r} is the name of a public skill; give your skill another name")
    if (target.custom_root / name).exists() and not replace:
        raise UserError(f"skill {name!r} is already installed; install with replace to overwrite it")


def _move_into_place(staged: Path, final: Path, staging: Path) -> bool:
    """Rename ``staged`` to ``final``; an existing ``final`` is moved aside first."""
    replaced = final.exists()
    if replaced:
        final.rename(staging / "previous")
    try:
        staged.rename(final)
    except OSError as exc:
        if replaced:
            (staging / "previous").rename(final)
        raise UserError(f"could not install skill {final.name!r}: {exc.strerror}") from None
    return replaced

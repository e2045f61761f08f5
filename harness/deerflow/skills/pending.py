"""A skill package the agent asked to install, frozen while the user decides.

``install_skill`` must install exactly what the user approved.  The package
sits in the thread's workspace, which code in the sandbox can rewrite at any
time — also between the question and the answer.  So the tool copies it, at
the moment it asks, into ``<thread>/pending-changes/<id>/`` (the thread's host
folder, never mounted into a sandbox), parses and scans the copy, shows the
user that copy's name, description and findings, and installs from that copy
once approved.  The workspace is not read again.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from deerflow.skills.archive import PackageLimits, copy_directory, package_root
from deerflow.skills.catalog import Skill, load_skill
from deerflow.skills.installer import SkillScanBlocked
from deerflow.skills.manifest import MANIFEST, parse_skill_md
from deerflow.skills.scan import ScanReport, scan_package
from deerflow.threadfs import SafeDir, remove_tree

PENDING_DIR = "pending-changes"
STALE_AFTER_SECONDS = 24 * 3600  # a question nobody answered within a day is answered "no" by then
_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class PendingPackage:
    """A frozen copy of a package awaiting the user's answer."""

    snapshot_id: str
    directory: Path
    skill: Skill
    report: ScanReport


def freeze_package(source: SafeDir, thread_root: Path, *, limits: PackageLimits) -> PendingPackage:
    """Copy, parse and scan the package in ``source``; the copy is what an approval installs.

    ``source`` is the package's folder opened below the thread's mount
    (``VirtualFS.open_dir``), never a path: the agent's code can plant a link in
    any folder on the way to it.

    Raises:
        SkillPackageError / SkillFormatError: an unsafe or malformed package (nothing kept).
        SkillScanBlocked: SkillScan found critical problems (nothing kept).
    """
    sweep_stale(thread_root)
    snapshot_id = uuid.uuid4().hex
    holder = thread_root / PENDING_DIR / snapshot_id
    unpacked = holder / "package"
    unpacked.mkdir(parents=True)
    try:
        copy_directory(source, unpacked, limits)
        root = package_root(unpacked)
        doc = parse_skill_md((root / MANIFEST).read_text(encoding="utf-8", errors="replace"),
                             where="the package's SKILL.md")
        staged = holder / str(doc.manifest.name)
        root.rename(staged)
        skill = load_skill(staged, "custom")
        report = scan_package(staged)
        if report.blocked:
            raise SkillScanBlocked(skill.name, report)
    except BaseException:
        remove_tree(holder)  # iterative: the package's depth is the author's
        raise
    return PendingPackage(snapshot_id, staged, skill, report)


def frozen_package(thread_root: Path, snapshot_id: str, name: str) -> Path | None:
    """The frozen copy recorded in an approved request, if it is still there."""
    if not _ID.match(snapshot_id) or not re.fullmatch(r"[a-z0-9-]{1,64}", name):
        return None
    path = thread_root / PENDING_DIR / snapshot_id / name
    return path if path.is_dir() and not path.is_symlink() else None


def discard(thread_root: Path, snapshot_id: str) -> None:
    """Remove a frozen copy (after its install, or when it is no longer wanted)."""
    if _ID.match(snapshot_id):
        remove_tree(thread_root / PENDING_DIR / snapshot_id)


__all__ = ["PENDING_DIR", "PendingPackage", "discard", "freeze_package", "frozen_package"]


def sweep_stale(thread_root: Path, *, max_age: float = STALE_AFTER_SECONDS, now: float | None = None) -> int:
    """Remove frozen copies older than ``max_age`` (declined or never answered); return how many.

    An approval installs and discards its copy at once; a "no" or a question left unanswered
    would otherwise keep its copy for the thread's life.  Only names this module created (32 hex
    digits) are considered, and a link there is removed as a name, never followed.
    """
    pending = thread_root / PENDING_DIR
    cutoff = (time.time() if now is None else now) - max_age
    removed = 0
    try:
        entries = list(os.scandir(pending))
    except OSError:
        return 0
    for entry in entries:
        if not _ID.match(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_mtime >= cutoff:
            continue
        if entry.is_dir(follow_symlinks=False):
            remove_tree(Path(entry.path))
        else:
            os.unlink(entry.path)
        removed += 1
    return removed

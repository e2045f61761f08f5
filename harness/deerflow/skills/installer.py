"""Installing a custom skill: stage, validate, scan, then one atomic rename.

The same path serves every way a skill arrives — an archive or a directory
from the user (client, CLI, magic, server upload) and a skill the agent wrote
in its workspace (the ``install_skill`` tool):

1. copy the package into ``.staging-<id>/`` inside the user's custom skills
   directory (same filesystem as the target), under the archive limits;
2. find its ``SKILL.md``, parse it, check the name (reserved, taken by a
   public skill, already installed: a quick answer, checked again in step 4);
3. run SkillScan; a critical finding refuses the install
   (:class:`SkillScanBlocked` carries the report so callers can show it);
4. under the install lock of ``(user, name)``, check again whether the name is
   taken and rename the staged directory to ``<name>/``: without ``replace``
   by a no-clobber rename (``renameat2(RENAME_NOREPLACE)``), so an install
   that raced this one is never overwritten; with ``replace``, old moved
   aside, new renamed in, old deleted; then enable the skill for the user;
5. remove the staging directory whatever happened.

Nothing is ever visible under the skill's name before step 4 succeeds.

The lock is an ``flock`` on ``<user dir>/.skill-install-locks/<name>.lock``
(beside the user's skill state, outside every thread folder and every
directory a sandbox sees), so installs of one name by the HTTP endpoint, the
agent's tool, the CLI and a notebook — threads or processes — take turns; a
second install without ``replace`` gets :class:`SkillExistsError`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
from deerflow.threadfs import remove_tree

LOCK_DIR = ".skill-install-locks"
LOCK_TIMEOUT = 60.0
"""Seconds an install waits for another install of the same name before giving up."""


class SkillExistsError(UserError):
    """The name is installed (perhaps by an install that finished a moment ago) and ``replace`` was not asked."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"skill {name!r} is already installed; install with replace to overwrite it")


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
        enable: Called with the skill name once it is in place (under the install lock).
        lock_root: Where the per-name install locks live (default: beside ``custom_root``,
            in the user's private directory).
    """

    custom_root: Path
    public_names: frozenset[str]
    limits: PackageLimits
    enable: Callable[[str], None]
    lock_root: Path | None = field(default=None)

    def lock_path(self, name: str) -> Path:
        return (self.lock_root or self.custom_root.parent / LOCK_DIR) / f"{name}.lock"


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
        with install_lock(target.lock_path(skill.name)):
            replaced = _move_into_place(staged, target.custom_root / skill.name, staging, replace=replace)
            target.enable(skill.name)
            installed = load_skill(target.custom_root / skill.name, "custom")
        return InstallResult(installed.info(), report, replaced)
    finally:
        remove_tree(staging)  # iterative: the package's depth is the author's


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
    if os.path.lexists(target.custom_root / name) and not replace:
        raise SkillExistsError(name)


@contextmanager
def install_lock(path: Path, *, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the ``flock`` at ``path`` (created if missing) for the block.

    ``flock`` locks belong to the open file, so two threads of one process
    exclude each other as two processes do.  Waiting is polled against a
    deadline so a stuck holder yields a clear error rather than a hang.

    Raises:
        UserError: another install of the same name held the lock past ``timeout``.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise UserError(f"another install of skill {path.stem!r} is still running; "
                                    "try again when it has finished") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def _move_into_place(staged: Path, final: Path, staging: Path, *, replace: bool) -> bool:
    """Put ``staged`` at ``final``; returns whether an installed skill was replaced.

    Without ``replace`` the rename refuses to clobber (an install that won a
    race keeps its skill).  With it, an existing ``final`` is moved aside,
    the new one renamed in, and the old one restored if that fails.

    Raises:
        SkillExistsError: ``final`` exists and ``replace`` is false.
        UserError: the rename failed for another reason.
    """
    replaced = replace and os.path.lexists(final)
    try:
        if not replace:
            rename_noreplace(staged, final)
            return False
        if replaced:
            final.rename(staging / "previous")
        staged.rename(final)
    except FileExistsError:
        raise SkillExistsError(final.name) from None
    except OSError as exc:
        if replaced:
            (staging / "previous").rename(final)
        raise UserError(f"could not install skill {final.name!r}: {exc.strerror}") from None
    return replaced


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)


def rename_noreplace(source: Path, dest: Path) -> None:
    """Rename ``source`` to ``dest`` atomically, failing if ``dest`` exists.

    ``renameat2(RENAME_NOREPLACE)`` where libc and the filesystem have it;
    otherwise ``mkdir(dest)`` claims the name (atomic, fails if it exists) and
    the rename replaces that empty directory.

    Raises:
        FileExistsError: ``dest`` exists.
        OSError: the rename failed.
    """
    if _renameat2 is not None:
        if _renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(dest), _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), str(dest))
    os.mkdir(dest, 0o700)
    try:
        os.rename(source, dest)
    except OSError:
        os.rmdir(dest)
        raise

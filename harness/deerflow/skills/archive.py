"""Getting a skill package onto disk safely: zip archives and directories.

A package comes from a ``.skill``/``.zip`` archive (a zip file) or a
directory.  Either way it is copied into a fresh staging directory chosen by
the caller (the installer puts it on the same filesystem as its target, so the
final move is an atomic rename).  Every check that can be made before writing
is made first; the rest is enforced while writing:

* **names** — no absolute paths, drive letters (``C:\\x``), ``..`` components,
  NUL bytes or duplicates; backslashes count as separators;
* **layout** — one tree, the same on every filesystem: a name may not be both
  a file and a directory (``x`` and ``x/y``), and no two names may differ only
  in letter case (they would collide on macOS and Windows);
* **types** — regular files and directories only: symlink members, device or
  FIFO entries and encrypted members are refused (a directory source may not
  contain symlinks either);
* **limits** — number of members, size per file and total size, from the
  archive's own headers first, then by counting the bytes actually written,
  so a header that lies about sizes (a decompression bomb) is cut off at the
  limit without ever writing past it.

Any violation raises :class:`SkillPackageError`; the caller discards the
staging directory, so nothing partial is ever installed.
"""

from __future__ import annotations

import contextlib
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from deerflow.errors import UserError
from deerflow.threadfs import SafeDir, UnsafePath

ARCHIVE_SUFFIXES = (".skill", ".zip")
_CHUNK = 64 * 1024
_DRIVE = re.compile(r"^[A-Za-z]:")
_IGNORED_TOP = frozenset({"__MACOSX"})
MAX_DEPTH = 32
"""Folder levels a member may sit below the archive's top (keeps the layout check linear)."""


class SkillPackageError(UserError):
    """A package that cannot be installed safely; the message says which member and why."""


@dataclass(frozen=True)
class PackageLimits:
    """Bounds on what one skill package may hold."""

    max_members: int = 1000
    max_file_bytes: int = 10 * 1024 * 1024
    max_total_bytes: int = 50 * 1024 * 1024


def safe_member_path(name: str) -> PurePosixPath | None:
    """The relative path a member may be written to; None for an ignorable entry.

    Raises:
        SkillPackageError: absolute paths, drive letters, ``..``, NUL bytes.
    """
    if "\x00" in name:
        raise SkillPackageError(f"archive member {name!r} has a NUL byte in its name")
    normalised = name.replace("\\", "/")
    if normalised.startswith("/") or _DRIVE.match(normalised):
        raise SkillPackageError(f"archive member {name!r} has an absolute path")
    parts = [p for p in normalised.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SkillPackageError(f"archive member {name!r} leaves the package with '..'")
    if not parts or parts[0] in _IGNORED_TOP:
        return None
    return PurePosixPath(*parts)


def extract_zip(archive: Path, dest: Path, limits: PackageLimits = PackageLimits()) -> None:
    """Extract ``archive`` into the empty directory ``dest`` under ``limits``.

    Raises:
        SkillPackageError: not a zip, or any member or size that breaks the rules.
    """
    try:
        with zipfile.ZipFile(archive) as zf:
            members = _checked_members(zf, limits)
            written = 0
            for info, rel in members:
                target = dest.joinpath(*rel.parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                written += _copy_member(zf, info, target, limits, budget=limits.max_total_bytes - written)
    except zipfile.BadZipFile as exc:
        raise SkillPackageError(f"{archive.name} is not a valid zip archive ({exc})") from None
    except (NotImplementedError, RuntimeError) as exc:  # unsupported compression, encryption
        raise SkillPackageError(f"{archive.name} cannot be read: {exc}") from None
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:  # a layout the checks missed
        raise SkillPackageError(f"{archive.name} has conflicting members ({exc.strerror}: "
                                f"{Path(exc.filename or '').name!r})") from None


def _checked_members(zf: zipfile.ZipFile, limits: PackageLimits) -> list[tuple[zipfile.ZipInfo, PurePosixPath]]:
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise SkillPackageError(f"the archive has {len(infos)} members; the limit is {limits.max_members}")
    layout = _Layout()
    members = []
    total = 0
    for info in infos:
        rel = safe_member_path(info.filename)
        if rel is None:
            continue
        _check_member_type(info)
        layout.add(info.filename, rel, is_dir=info.is_dir())
        if info.file_size > limits.max_file_bytes:
            raise SkillPackageError(f"archive member {info.filename!r} is {info.file_size:,} bytes "
                                    f"uncompressed; the limit per file is {limits.max_file_bytes:,}")
        total += info.file_size
        if total > limits.max_total_bytes:
            raise SkillPackageError(f"the archive expands to more than {limits.max_total_bytes:,} bytes")
        members.append((info, rel))
    layout.check()
    return members


class _Layout:
    """The tree an archive's names describe; refuses names that cannot all be written.

    Keys are case-folded, so ``Data.csv`` and ``data.csv`` (or ``A/`` and
    ``a/``) collide here as they would on a case-insensitive filesystem.
    """

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.dirs: dict[str, str] = {}

    def add(self, name: str, rel: PurePosixPath, *, is_dir: bool) -> None:
        if len(rel.parts) > MAX_DEPTH:
            raise SkillPackageError(f"archive member {name[:200]!r} is nested more than {MAX_DEPTH} folders deep")
        for parent in list(rel.parents)[:-1]:
            self._claim(self.dirs, parent)
        if is_dir:
            self._claim(self.dirs, rel)
            return
        if str(rel).casefold() in self.files and self.files[str(rel).casefold()] == str(rel):
            raise SkillPackageError(f"archive member {name!r} appears twice")
        self._claim(self.files, rel)

    @staticmethod
    def _claim(table: dict[str, str], rel: PurePosixPath) -> None:
        known = table.setdefault(str(rel).casefold(), str(rel))
        if known != str(rel):
            raise SkillPackageError(f"archive members {known!r} and {str(rel)!r} differ only in letter case")

    def check(self) -> None:
        for key, path in self.files.items():
            if key in self.dirs:
                raise SkillPackageError(f"archive member {path!r} is a file, but other members put files "
                                        f"inside {self.dirs[key]!r}; a name cannot be both a file and a folder")


def _check_member_type(info: zipfile.ZipInfo) -> None:
    if info.flag_bits & 0x1:
        raise SkillPackageError(f"archive member {info.filename!r} is encrypted")
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise SkillPackageError(f"archive member {info.filename!r} is a symbolic link")
    if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) and stat.S_IFMT(mode):
        raise SkillPackageError(f"archive member {info.filename!r} is not a regular file")


def _copy_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, limits: PackageLimits,
                 *, budget: int) -> int:
    """Stream one member to ``target``, stopping at the per-file or remaining total budget."""
    cap = min(limits.max_file_bytes, budget)
    written = 0
    with zf.open(info) as src, target.open("xb") as out:
        while chunk := src.read(_CHUNK):
            written += len(chunk)
            if written > cap:
                raise SkillPackageError(f"archive member {info.filename!r} expands beyond its declared "
                                        f"size and the limits (a decompression bomb?)")
            out.write(chunk)
    return written


def copy_directory(source: Path | SafeDir, dest: Path, limits: PackageLimits = PackageLimits()) -> None:
    """Copy a package directory into the empty directory ``dest`` under ``limits``.

    ``source`` may be a folder the agent's code controls (a skill it wrote in
    its workspace), so it is read through a :class:`~deerflow.threadfs.SafeDir`:
    nothing is followed, and a link or special file swapped in while we copy is
    refused rather than copied from wherever it points.  Such a folder comes as
    a ``SafeDir`` opened from the thread's mount (``VirtualFS.open_dir``): a path
    would follow a link planted in one of its parents.  A path is for folders
    the user names (``deerflow skills install DIR``); the caller keeps a
    ``SafeDir`` open.

    Raises:
        SkillPackageError: symlinks, special files, or sizes beyond the limits.
    """
    count = total = 0
    try:
        with contextlib.nullcontext(source) if isinstance(source, SafeDir) else SafeDir.open(source) as root:
            for rel_text, info in root.walk(skip_dirs=_SKIPPED_DIRS):
                rel = Path(rel_text)
                if info.kind == "dir":
                    continue
                if info.kind == "symlink":
                    raise SkillPackageError(f"{rel} is a symbolic link; a skill package holds files only")
                if info.kind != "file":
                    raise SkillPackageError(f"{rel} is not a regular file")
                count += 1
                total += info.size
                _check_sizes(rel, info.size, count, total, limits)
                data = root.read_bytes(rel_text, max_bytes=limits.max_file_bytes)
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
    except UnsafePath as exc:
        raise SkillPackageError(f"cannot copy the package: {exc.message}") from None


_SKIPPED_DIRS = frozenset({"__pycache__", ".ipynb_checkpoints", ".git"})


def _check_sizes(rel: Path, size: int, count: int, total: int, limits: PackageLimits) -> None:
    if count > limits.max_members:
        raise SkillPackageError(f"the package has more than {limits.max_members} files")
    if size > limits.max_file_bytes:
        raise SkillPackageError(f"{rel} is {size:,} bytes; the limit per file is {limits.max_file_bytes:,}")
    if total > limits.max_total_bytes:
        raise SkillPackageError(f"the package is larger than {limits.max_total_bytes:,} bytes")


def package_root(extracted: Path) -> Path:
    """The directory holding ``SKILL.md``: the top level, or its single folder.

    Raises:
        SkillPackageError: when neither holds a ``SKILL.md``.
    """
    if (extracted / "SKILL.md").is_file():
        return extracted
    entries = [p for p in extracted.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / "SKILL.md").is_file():
        return entries[0]
    raise SkillPackageError("the package has no SKILL.md at its top level or in a single top-level folder")

"""What :class:`~deerflow.threadfs.root.SafeDir` hands out: entries described without following them, and its one error.

Kept apart from the class so the rules (root.py) and the vocabulary callers match on
(``UnsafePath.code``, ``EntryInfo.kind``) can be read separately.
"""

from __future__ import annotations

import errno
import stat
from dataclasses import dataclass
from typing import Literal

Kind = Literal["file", "dir", "symlink", "other"]


class UnsafePath(OSError):
    """A path the host refuses to touch, or one that is not there.

    Attributes:
        code: ``not_found``, ``symlink`` (a link on the way), ``not_regular``
            (FIFO, socket, device), ``not_socket`` (where a socket was expected),
            ``is_dir``, ``not_dir``, ``hard_link``,
            ``exists``, ``too_large``, ``bad_path`` or ``io``.
        rel: The relative path as asked for (no host prefix).
    """

    def __init__(self, code: str, rel: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.rel = rel
        self.message = message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class EntryInfo:
    """One directory entry, described without following it.

    Attributes:
        name: The entry's name.
        kind: ``file``, ``dir``, ``symlink`` or ``other`` (FIFO, socket, device).
        size: Size in bytes (of the link itself for a link).
        mtime_ns: Modification time.
        nlink: Hard link count.
        target: A link's target text (never resolved), else ``None``.
    """

    name: str
    kind: Kind
    size: int
    mtime_ns: int
    nlink: int = 1
    target: str | None = None


def kind_of(mode: int) -> Kind:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def translate(exc: OSError, rel: str) -> UnsafePath:
    shown = rel or "."
    code, text = {
        errno.ENOENT: ("not_found", f"{shown} does not exist"),
        errno.ELOOP: ("symlink", f"{shown} goes through a symbolic link, which the host never follows"),
        errno.EXDEV: ("symlink", f"{shown} leads out of its folder"),
        errno.ENOTDIR: ("not_dir", f"a part of {shown} is not a directory"),
        errno.EISDIR: ("is_dir", f"{shown} is a directory"),
        errno.EEXIST: ("exists", f"{shown} already exists"),
        errno.ENXIO: ("not_regular", f"{shown} is not a regular file"),
        errno.ENOTEMPTY: ("exists", f"{shown} is a directory that is not empty"),
    }.get(exc.errno or 0, ("io", f"{shown}: {exc.strerror or 'input/output error'}"))
    return UnsafePath(code, rel, text)

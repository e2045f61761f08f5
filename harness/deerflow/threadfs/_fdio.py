"""Steps on an already open directory descriptor that need nothing of :class:`SafeDir`'s resolution:
a temporary file under a random name, a bounded listing, a quiet unlink (used by ``root.py``)."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable


def write_temp_file(parent: int, name: str, data: bytes | Iterable[bytes], *, mode: int, durable: bool) -> str:
    """A new hidden file in the directory open at ``parent`` holding ``data`` (``O_EXCL`` under a random
    name, never through a link); its name. On any failure the file is removed."""
    tmp = f".{name[:40]}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=parent)
    try:
        for chunk in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        unlink_quietly(tmp, parent)
        raise
    os.close(fd)
    return tmp


def first_names(fd: int, limit: int) -> list[str]:
    """At most ``limit`` names of the directory open at ``fd`` (directory order), read lazily."""
    names: list[str] = []
    if limit <= 0:
        return names
    with os.scandir(fd) as entries:
        for entry in entries:
            names.append(entry.name)
            if len(names) >= limit:
                break
    return names


def unlink_quietly(name: str, dir_fd: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)

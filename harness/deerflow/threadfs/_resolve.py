"""Opening a path beneath a directory descriptor without ever following a link.

Two implementations of one primitive, :func:`open_beneath`:

* ``openat2(2)`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
  RESOLVE_NO_MAGICLINKS`` (Linux 5.6+): the kernel walks the path, refuses any
  symbolic link on the way (the last component included) and any step out of
  the starting directory, all in one system call, so nothing can be swapped
  between a check and the use.
* A component-by-component walk on directory descriptors with ``O_NOFOLLOW``
  where ``openat2`` is missing (old kernels, seccomp filters that refuse it).
  Each step opens one name relative to the descriptor of the step before, so a
  directory renamed or replaced by a link after we passed it cannot redirect
  the rest of the walk.

Relative paths only, with no ``..``, no empty and no ``.`` components: callers
validate them (see :func:`split_relative`), and both implementations refuse
them again.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from pathlib import PurePosixPath

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
_SYS_OPENAT2 = 437  # the same number on every architecture (added after the syscall table unification)
_EAGAIN_RETRIES = 16  # RESOLVE_BENEATH answers EAGAIN when a rename raced the walk


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_syscall():  # pragma: no cover - trivial
    if platform.system() != "Linux":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.syscall
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_long
    return fn


_syscall = _load_syscall()
_openat2_works: bool | None = None if _syscall is not None else False


def split_relative(rel: str | PurePosixPath) -> tuple[str, ...]:
    """The components of a relative path, or ``ValueError`` for anything odd.

    ``""`` and ``"."`` mean the directory itself (no components).
    """
    text = str(rel)
    if "\x00" in text:
        raise ValueError("NUL in path")
    if text.startswith("/"):
        raise ValueError("absolute path where a relative one was expected")
    parts = tuple(p for p in text.split("/") if p not in ("", "."))
    if ".." in parts:
        raise ValueError("'..' in path")
    return parts


def _openat2(dir_fd: int, rel: str, flags: int, mode: int) -> int:
    if _syscall is None:  # not Linux, or no libc: open_beneath walks instead
        raise OSError(errno.ENOSYS, "openat2 is not available", rel)
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE)
    path = os.fsencode(rel)
    for _ in range(_EAGAIN_RETRIES):
        fd = _syscall(_SYS_OPENAT2, dir_fd, path, ctypes.byref(how), ctypes.sizeof(how))
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err != errno.EAGAIN:
            raise OSError(err, os.strerror(err), rel)
    raise OSError(errno.EAGAIN, "the path kept changing while it was opened", rel)


def _walk(dir_fd: int, parts: tuple[str, ...], flags: int, mode: int) -> int:
    if not parts:
        return os.open(".", flags | os.O_CLOEXEC, dir_fd=dir_fd)
    current = dir_fd
    opened: list[int] = []
    try:
        for name in parts[:-1]:
            current = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            opened.append(current)
        fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
        if flags & os.O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):  # O_PATH|O_NOFOLLOW opens the link itself
            os.close(fd)
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), "/".join(parts))
        return fd
    finally:
        for fd in opened:
            os.close(fd)


def open_beneath(dir_fd: int, rel: str | PurePosixPath, flags: int, mode: int = 0o644) -> int:
    """``open`` ``rel`` below ``dir_fd``; a link anywhere on the way is ``ELOOP``.

    Raises:
        OSError: ``ELOOP`` (a symbolic link), ``EXDEV`` (a step out of the
            directory), ``ENOENT``, ``ENOTDIR`` and the other ``open`` errors.
        ValueError: an absolute path or one with ``..``.
    """
    global _openat2_works
    parts = split_relative(rel)
    if _openat2_works is not False and parts:
        try:
            fd = _openat2(dir_fd, "/".join(parts), flags, mode)
        except OSError as exc:
            if exc.errno in (errno.ENOSYS, errno.EPERM) and _openat2_works is None:
                _openat2_works = False  # not available here: use the walk from now on
            else:
                raise
        else:
            _openat2_works = True
            return fd
    return _walk(dir_fd, parts, flags, mode)


def using_openat2() -> bool:
    """Whether :func:`open_beneath` uses ``openat2`` (for diagnostics and tests)."""
    return _openat2_works is not False


def force_walk(enabled: bool) -> None:
    """Use the ``O_NOFOLLOW`` walk even where ``openat2`` works (tests cover both paths)."""
    global _openat2_works
    _openat2_works = False if enabled else (None if _syscall is not None else False)

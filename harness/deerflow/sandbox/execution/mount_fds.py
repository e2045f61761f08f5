"""A thread's mount folders held by descriptor, so a sandbox binds what the host checked.

Everything below a thread's root is the sandbox's to tamper with.  Binding a
mount folder *by path* (``bwrap --bind HOST VIRTUAL``) leaves a window between
the host's check (:meth:`~deerflow.config.paths.ThreadPaths.ensure`) and the
moment bubblewrap resolves the path: a folder swapped for a symbolic link to a
host directory in that window would be mounted, writable, in the next sandbox.

:func:`open_mounts` opens every mount folder below the thread's root through
:class:`~deerflow.threadfs.SafeDir` (``openat2`` with no link followed), and the
provider binds the descriptors (``--bind-fd FD VIRTUAL``): what is mounted is
the very directory that was opened, whatever the path names by then.  A link,
FIFO or file where a mount folder should be is refused with
:class:`UnsafeMount` (a :class:`~deerflow.errors.ToolFailure`: the model sees a
one-line reason) and nothing starts.

The caller passes :attr:`MountFds.fds` to the spawned process (``pass_fds``)
and closes them right after the spawn, on every path (:meth:`MountFds.close`).
bubblewrap closes them itself once mounted, so the sandboxed program never
holds a descriptor of a host directory (whose ``..`` would lead out).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.sandbox.files.virtual_paths import OUTPUTS, UPLOADS, WORKSPACE, Mount
from deerflow.threadfs import SafeDir, UnsafePath

_REQUIRED = frozenset({str(UPLOADS), str(WORKSPACE), str(OUTPUTS)})  # ThreadPaths.ensure() makes them


class UnsafeMount(ToolFailure):
    """A thread's mount folder is a link, FIFO, file or gone: no sandbox was started."""

    def __init__(self, virtual: str, reason: str) -> None:
        super().__init__(
            f"The sandbox was not started: the host folder behind {virtual} {reason}, so it "
            "cannot be mounted safely. Recreate it as a plain directory (or start a new thread).",
            code="unsafe_mount",
        )
        self.virtual = virtual


class MountFds:
    """Open descriptors of a thread's mount folders, each with its virtual path and access.

    Owns the descriptors: :meth:`close` (or the ``with`` block) closes them.
    """

    def __init__(self, held: Iterable[tuple[Mount, SafeDir]] = ()) -> None:
        self._held = list(held)

    @property
    def fds(self) -> tuple[int, ...]:
        """The descriptors to pass to the spawned process (``pass_fds``)."""
        return tuple(d.fd for _, d in self._held)

    @property
    def mounts(self) -> tuple[Mount, ...]:
        return tuple(m for m, _ in self._held)

    def bwrap_args(self) -> list[str]:
        """``--bind-fd FD VIRTUAL`` (``--ro-bind-fd`` for read-only mounts), in mount order."""
        args: list[str] = []
        for mount, d in self._held:
            args += ["--bind-fd" if mount.writable else "--ro-bind-fd", str(d.fd), str(mount.virtual)]
        return args

    def moved(self, paths: ThreadPaths) -> str | None:
        """The virtual path of the first mount whose host path no longer names the held folder.

        For engines that bind by path (Docker): checked after the container was created, it
        catches a folder swapped during the create, unless it was swapped back before this check.
        """
        try:
            with SafeDir.open(paths.root) as root:
                for mount, d in self._held:
                    try:
                        rel = mount.host.relative_to(paths.root).as_posix()
                    except ValueError:  # outside the thread: the operator's folder
                        continue
                    now, held = root.lstat(rel), os.fstat(d.fd)
                    if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
                        return str(mount.virtual)
        except UnsafePath:
            return "/mnt/user-data"
        return None

    def close(self) -> None:
        """Close every descriptor (idempotent)."""
        held, self._held = self._held, []
        for _, d in held:
            d.close()

    def __enter__(self) -> MountFds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def ensure_thread(paths: ThreadPaths) -> None:
    """:meth:`ThreadPaths.ensure`, with a refused folder as :class:`UnsafeMount` (what the model sees)."""
    try:
        paths.ensure()
    except UnsafePath as exc:
        raise UnsafeMount("/mnt/user-data", _reason(exc)) from None


def open_mounts(paths: ThreadPaths, mounts: Iterable[Mount]) -> MountFds:
    """Open each of ``mounts`` that exists, following no link below the thread's root.

    Folders below ``paths.root`` are opened through the root's :class:`SafeDir`
    (a link anywhere below the root refuses).  A mount outside the thread (the
    operator's ``skills_dir``) is the host's own configuration: it is opened by
    its path as :meth:`VirtualFS.open_mount` opens it, and still bound by descriptor.  A missing optional
    mount (``/mnt/acp-workspace``, ``/mnt/skills``) is left out, as before.

    Raises:
        UnsafeMount: a mount folder is a link, FIFO or file, or a required one is missing.
    """
    held: list[tuple[Mount, SafeDir]] = []
    try:
        with SafeDir.open(paths.root) as root:
            for mount in mounts:
                opened = _open_one(root, paths.root, mount)
                if opened is not None:
                    held.append((mount, opened))
    except UnsafePath as exc:  # the thread's root itself (its own layout: a host problem)
        MountFds(held).close()
        raise UnsafeMount("/mnt/user-data", _reason(exc)) from None
    except BaseException:
        MountFds(held).close()
        raise
    return MountFds(held)


def _open_one(root: SafeDir, root_path: Path, mount: Mount) -> SafeDir | None:
    virtual = str(mount.virtual)
    try:
        rel = mount.host.relative_to(root_path)
    except ValueError:  # outside the thread: the operator's folder (as the file tools open it)
        rel = None
    try:
        if rel is None:
            return SafeDir.open(mount.host, label=virtual)
        return root.subdir(rel.as_posix(), label=virtual)
    except UnsafePath as exc:
        if exc.code == "not_found" and virtual not in _REQUIRED:
            return None
        raise UnsafeMount(virtual, _reason(exc)) from None


def _reason(exc: UnsafePath) -> str:
    return {
        "symlink": "is (or goes through) a symbolic link",
        "not_dir": "is not a directory (a file, FIFO or other object took its place)",
        "not_found": "is missing",
    }.get(exc.code, f"cannot be opened ({exc.code})")

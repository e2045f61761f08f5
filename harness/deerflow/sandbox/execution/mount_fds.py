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

An engine that binds by path (Docker) cannot be handed a descriptor: there the
held folders' device and inode (:meth:`MountFds.identities`) are compared with
what the started container reports at each mount point (:func:`read_mount_report`),
before anything of the agent's runs in it.

The caller passes :attr:`MountFds.fds` to the spawned process (``pass_fds``)
and closes them right after the spawn, on every path (:meth:`MountFds.close`).
bubblewrap closes them itself once mounted, so the sandboxed program never
holds a descriptor of a host directory (whose ``..`` would lead out).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

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

    def identities(self) -> dict[str, tuple[int, int]]:
        """Each held folder's device and inode by virtual path: what an engine that binds by
        path (Docker) must be found to have mounted there (:func:`read_mount_report`)."""
        return {str(m.virtual): _identity(os.fstat(d.fd)) for m, d in self._held}

    def close(self) -> None:
        """Close every descriptor (idempotent)."""
        held, self._held = self._held, []
        for _, d in held:
            d.close()

    def __enter__(self) -> MountFds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


STAT_FORMAT = "%n %d %i"
"""``stat -c`` format (GNU coreutils and busybox alike) of a mounted folder: name, device, inode."""


class MountReport(NamedTuple):
    """What ``stat -c STAT_FORMAT`` reported from inside a sandbox, against the held folders."""

    wrong: str | None
    """The first virtual path reported as another folder than the one held for it."""
    missing: str | None
    """The first virtual path with no complete line in the report (nothing confirmed it)."""

    @property
    def refused(self) -> str | None:
        """The path to refuse for: reported wrong, else not reported (what is unconfirmed is refused)."""
        return self.wrong or self.missing


def read_mount_report(expected: Mapping[str, tuple[int, int]], reported: str) -> MountReport:
    """Compare each held folder's identity with what ``stat`` reported at its virtual path.

    Only complete lines count: ``stat`` ends each with a newline, so a report cut short (an
    engine's exec stream can drop a short-lived process's output under load) cannot pass a
    truncated inode off as another folder's; its paths are *missing*, which a caller may ask
    again about, whereas a *wrong* one is a folder swapped during the create.
    """
    seen: dict[str, tuple[int, int]] = {}
    for line in reported.split("\n")[:-1]:
        parts = line.rsplit(" ", 2)
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            seen[parts[0]] = (int(parts[1]), int(parts[2]))
    wrong = next((v for v, held in expected.items() if v in seen and seen[v] != held), None)
    missing = next((v for v in expected if v not in seen), None)
    return MountReport(wrong, missing)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


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

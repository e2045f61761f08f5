"""Process, memory and CPU-time limits for bubblewrap sandboxes.

The knobs are the Docker provider's (``pids_limit``, ``memory_limit``) plus a
CPU-time cap (``cpu_time_limit``).  Two mechanisms, because neither holds
everywhere:

* **rlimits, set inside the sandbox** by the in-sandbox supervisor
  (:mod:`deerflow.sandbox.execution.supervisor`) before it starts the command or
  kernel: ``RLIMIT_NPROC`` = ``pids_limit``, ``RLIMIT_CPU`` =
  ``cpu_time_limit`` seconds (per process), and ``RLIMIT_AS`` =
  ``memory_limit`` when no cgroup can hold memory.  Each bwrap sandbox has a
  fresh user namespace, and since Linux 5.14 ``RLIMIT_NPROC`` counts
  processes per (user namespace, uid): the cap is per sandbox.  But the
  kernel never applies ``RLIMIT_NPROC`` to processes whose host uid is 0, and
  a server running as root maps the sandbox user to uid 0.  Hence:
* **a cgroup per launch**, when the server can create one (root, a writable
  cgroup v1 ``pids``/``memory`` hierarchy, or cgroup v2 with those
  controllers delegated to a cgroup it owns): ``pids.max`` and the memory
  limit hold for every uid.  The launch command is prefixed by a one-line
  ``sh`` that moves itself into the cgroup and ``exec``\\ s bubblewrap, so
  the sandbox starts inside it.  When the launch ends the cgroup's remaining
  processes are killed and the cgroup removed.

:func:`detect_cgroups` reports which hierarchy is usable; with neither a
cgroup nor a non-root uid the process cap cannot hold, and the provider logs
that once.  ``RLIMIT_CPU`` holds for root too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from deerflow.config.values import parse_size

log = logging.getLogger(__name__)

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_KILL_ROUNDS = 100
# Moves the shell into each cgroup given before ``--`` and becomes the rest.
_ENTER = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class ProcessLimits:
    """Caps on one sandboxed command or kernel (``None``: no cap).

    Attributes:
        pids: Processes and threads at once.
        memory: Memory, Docker-style (``512m``).
        cpu_seconds: CPU time of each process, in seconds (a kernel's
            accumulates over its life; past it the kernel is killed and restarted).
    """

    pids: int | None = 512
    memory: str | None = None
    cpu_seconds: float | None = None

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory is None else parse_size(self.memory)

    def rlimit_args(self, *, memory_in_cgroup: bool) -> list[str]:
        """Supervisor arguments setting the rlimits (``--rlimit NAME=VALUE``)."""
        args: list[str] = []
        if self.pids is not None:
            args += ["--rlimit", f"nproc={self.pids}"]
        if self.cpu_seconds is not None:
            args += ["--rlimit", f"cpu={max(int(self.cpu_seconds), 1)}"]
        if self.memory_bytes is not None and not memory_in_cgroup:
            args += ["--rlimit", f"as={self.memory_bytes}"]
        return args


@dataclass(frozen=True)
class CgroupLayout:
    """Where per-launch cgroups go: one parent per controller (v1) or one (v2)."""

    version: int
    pids_parent: Path
    memory_parent: Path | None

    def create(self, limits: ProcessLimits) -> LaunchCgroup:
        """A fresh cgroup (per controller) with ``limits`` written.

        Raises:
            OSError: the cgroup could not be made or configured.
        """
        name = f"launch-{uuid.uuid4().hex[:12]}"
        dirs = [self.pids_parent / name]
        if self.memory_parent is not None and self.memory_parent != self.pids_parent:
            dirs.append(self.memory_parent / name)
        group = LaunchCgroup(tuple(dirs), self.version, has_memory=self.memory_parent is not None)
        try:
            for d in dirs:
                d.mkdir()
            group.configure(limits)
        except OSError:
            group.remove()
            raise
        return group


@dataclass(frozen=True)
class LaunchCgroup:
    """The cgroup(s) of one launch."""

    dirs: tuple[Path, ...]
    version: int
    has_memory: bool = False

    def configure(self, limits: ProcessLimits) -> None:
        """Write ``pids.max`` and the memory limit (no swap beyond it)."""
        pids = "max" if limits.pids is None else str(limits.pids)
        (self.dirs[0] / "pids.max").write_text(pids)
        if self.has_memory and limits.memory_bytes is not None:
            if self.version == 2:
                (self.dirs[0] / "memory.max").write_text(str(limits.memory_bytes))
                with contextlib.suppress(OSError):
                    (self.dirs[0] / "memory.swap.max").write_text("0")
            else:
                (self.dirs[-1] / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    (self.dirs[-1] / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_bytes))

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside this cgroup."""
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        return ["/bin/sh", "-c", _ENTER, "sh", *procs, "--", *argv]

    def pids(self) -> list[int]:
        found: list[int] = []
        for d in self.dirs:
            with contextlib.suppress(OSError):
                found += [int(p) for p in (d / "cgroup.procs").read_text().split()]
        return found

    def remove(self) -> None:
        """Kill what is left inside and remove the cgroup (idempotent, never raises)."""
        for _ in range(_KILL_ROUNDS):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        for d in self.dirs:
            for _ in range(_KILL_ROUNDS):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still populated while the last processes exit
                    time.sleep(0.01)
            else:
                log.warning("could not remove the sandbox cgroup %s", d)


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per controller (``""`` is the v2 unified one)."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                own[name] = path
    return own


def _writable_parent(base: Path, prefix: str) -> Path | None:
    """A fresh parent cgroup under ``base``, or ``None`` if it cannot be made."""
    parent = base / f"deerflow-{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        parent.mkdir()
    except OSError:
        return None
    return parent


def _detect_v1(own: dict[str, str]) -> CgroupLayout | None:
    pids_mount = _CGROUP_ROOT / "pids"
    if "pids" not in own or not (pids_mount / "cgroup.procs").exists():
        return None
    pids_parent = _writable_parent(pids_mount / own["pids"].lstrip("/"), "sandbox")
    if pids_parent is None:
        return None
    memory_parent = None
    memory_mount = _CGROUP_ROOT / "memory"
    if "memory" in own and (memory_mount / "cgroup.procs").exists():
        memory_parent = _writable_parent(memory_mount / own["memory"].lstrip("/"), "sandbox")
    return CgroupLayout(1, pids_parent, memory_parent)


def _detect_v2(own: dict[str, str]) -> CgroupLayout | None:
    if not (_CGROUP_ROOT / "cgroup.controllers").exists() or "" not in own:
        return None
    parent = _writable_parent(_CGROUP_ROOT / own[""].lstrip("/"), "sandbox")
    if parent is None:
        return None
    try:
        # Allowed only where the server's own cgroup delegates the controllers.
        (parent / "cgroup.subtree_control").write_text("+pids")
    except OSError:
        with contextlib.suppress(OSError):
            parent.rmdir()
        return None
    try:
        (parent / "cgroup.subtree_control").write_text("+memory")
        memory: Path | None = parent
    except OSError:
        memory = None
    return CgroupLayout(2, parent, memory)


def detect_cgroups() -> CgroupLayout | None:
    """The cgroup layout this server can create per-launch cgroups in, if any.

    Each call makes fresh parent cgroups (one provider's), removed by :func:`remove_layout`.
    """
    own = _own_cgroups()
    return _detect_v1(own) or _detect_v2(own)


def remove_layout(layout: CgroupLayout) -> None:
    """Remove the provider's parent cgroups (after every launch cgroup is gone)."""
    for parent in {layout.pids_parent, layout.memory_parent} - {None}:
        assert parent is not None
        for child in parent.glob("launch-*"):
            LaunchCgroup((child,), layout.version).remove()
        with contextlib.suppress(OSError):
            parent.rmdir()


__all__ = [
    "CgroupLayout", "LaunchCgroup", "ProcessLimits", "detect_cgroups", "parse_size", "remove_layout",
]

"""The execution seam: where a thread's shell commands and Python kernel run.

A :class:`SandboxProvider` answers two questions for a thread:

* *run this shell command* — :meth:`SandboxProvider.execute` returns an
  :class:`~deerflow.sandbox.execution.process.ExecResult` (output, exit code, truncated,
  timed out).  Subclasses only say *how* to launch (:meth:`command_launch`);
  the timeout, process-group kill and output cap live in one place.
* *how to start a Python kernel* — :meth:`SandboxProvider.kernel_launch`
  returns a :class:`KernelLaunch` (command line, environment, where the
  kernel's runtime directory is visible).  The kernel's lifecycle belongs to
  :class:`~deerflow.sandbox.kernels.kernel_pool.KernelPool`, which asks the provider.

Implementations: ``local`` (the host; shell refused unless explicitly
allowed), ``bwrap`` (bubblewrap namespaces) and ``docker`` (a container per
thread, :mod:`deerflow.sandbox.docker.provider`).  Network modes: ``open``,
``isolated`` and ``allowlist`` (no network of its own; an egress proxy owned
by the provider decides every connection, :mod:`deerflow.sandbox.network.egress_proxy`).

The agent only ever sees virtual paths (``/mnt/user-data/...``).  The mount
table is :class:`~deerflow.sandbox.files.virtual_paths.VirtualFS`, shared with the
file tools, so a sandbox shows exactly what the file tools show, with the
same access (uploads, skills and ACP files read-only).  A provider masks host
paths in output with it (:meth:`~SandboxProvider.mask_out`); the ``local``
provider also maps virtual paths in commands to host paths
(:meth:`~SandboxProvider.translate_in`).
"""

from __future__ import annotations

import asyncio
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.sandbox.execution.process import ExecResult, run_command

if TYPE_CHECKING:
    from deerflow.sandbox.execution.mount_fds import MountFds
    from deerflow.sandbox.network.egress_proxy import EgressProxy
from deerflow.sandbox.files.virtual_paths import USER_DATA, WORKSPACE, Mount, VirtualFS
from deerflow.threadfs import SafeDir, UnsafePath

NetworkMode = Literal["isolated", "open", "allowlist"]

VIRTUAL_USER_DATA = str(USER_DATA)
VIRTUAL_WORKSPACE = str(WORKSPACE)

DEFAULT_COMMAND_TIMEOUT = 60.0
DEFAULT_MAX_OUTPUT = 30_000


class HostBashDisabled(ToolFailure):
    """Raised when shell access is requested from a provider that refuses it."""

    def __init__(self) -> None:
        super().__init__(
            "Shell commands are disabled in this sandbox: it is the local provider, so a "
            "command would run directly on the host, outside the thread's virtual "
            "filesystem. Use the python tool or the file tools instead. (An operator can "
            "switch sandbox.use to 'bwrap', or set sandbox.allow_host_bash: true for a "
            "fully trusted setup.)",
            code="host_bash_disabled",
        )


class _HoldsMounts:
    """The descriptors a launch's command line refers to (``bwrap --bind-fd``)."""

    held: MountFds | None

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return self.held.fds if self.held is not None else ()

    def release(self) -> None:
        """Close the held descriptors in this process (idempotent)."""
        if self.held is not None:
            self.held.close()


@dataclass(frozen=True)
class Launch(_HoldsMounts):
    """How to start a process: command line, complete environment, host cwd.

    ``held``: descriptors the command line refers to (``bwrap --bind-fd``); the
    spawner passes :attr:`pass_fds` to the child and calls :meth:`release` right
    after the spawn, and on every error path.
    """

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    held: MountFds | None = field(default=None, compare=False)


class KernelRuntime:
    """One kernel's runtime directory (connection file, ipc sockets, log), held by descriptor.

    The sandbox sees this directory (it must, for the sockets), and in a long-lived container it
    also sees the directory it was created in, so the host never reaches it by path: it creates,
    reads and removes its files through :meth:`open` and :meth:`remove`, anchored at ``parent``.

    Args:
        path: Its host path, only for launchers that hand it on (a bind, a host kernel's own files).
        parent: The held directory it was created in; this object owns it.
        name: Its name in ``parent``.
    """

    def __init__(self, path: Path, parent: SafeDir, name: str) -> None:
        self.path = path
        self.parent = parent
        self.name = name

    def open(self) -> SafeDir:
        """The directory itself, held (``UnsafePath`` if the sandbox replaced it by now)."""
        return self.parent.subdir(self.name)

    def remove(self) -> None:
        """Delete the directory and its contents, following no link (idempotent)."""
        if self.parent.fd < 0:
            return
        try:
            self.parent.rmtree(self.name)
        except UnsafePath:
            pass  # not there any more, or no longer ours to remove
        finally:
            self.parent.close()


def private_kernel_runtime() -> KernelRuntime:
    """A fresh ``dfk-*`` directory in the host's temporary directory (mode 0700)."""
    base = tempfile.gettempdir()
    parent = SafeDir.open(base)
    try:
        name = parent.mkdtemp("dfk-")
    except BaseException:
        parent.close()
        raise
    return KernelRuntime(Path(base) / name, parent, name)


@dataclass(frozen=True)
class KernelLaunch(_HoldsMounts):
    """How to start a thread's IPython kernel.

    Attributes:
        argv: The command line up to, not including, ``-f <connection file>``.
        env: The complete environment of the kernel process.
        cwd: Host directory to launch from.
        runtime_view: Where the pool's per-kernel runtime directory (connection
            file, ZMQ ipc sockets) is visible to the kernel.  Equal to the host
            path for the local provider; a fixed path inside a sandbox.
        held: Descriptors the command line refers to, as in :class:`Launch`.
    """

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    runtime_view: str
    held: MountFds | None = field(default=None, compare=False)


class SandboxProvider(ABC):
    """Runs shell commands and launches Python kernels for threads.

    Args:
        command_timeout: Default seconds before a command is killed.
        max_output: Bytes of command output kept (head and tail).
        skills_dir: Host skills directory, shown read-only at ``/mnt/skills``.
    """

    name: ClassVar[str]
    egress: EgressProxy | None = None
    """The egress proxy deciding the sandbox's connections (``network: allowlist``); None: no proxy."""

    def __init__(
        self,
        *,
        command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
        max_output: int = DEFAULT_MAX_OUTPUT,
        skills_dir: Path | None = None,
    ) -> None:
        self.command_timeout = command_timeout
        self.max_output = max_output
        self.skills_dir = skills_dir

    @property
    def allows_bash(self) -> bool:
        """Whether :meth:`execute` runs commands (tools omit ``bash`` otherwise)."""
        return True

    @abstractmethod
    def command_launch(self, paths: ThreadPaths, command: str) -> Launch:
        """How to launch ``command`` (already translated) for the thread."""

    @abstractmethod
    def kernel_launch(self, paths: ThreadPaths, runtime_dir: Path) -> KernelLaunch:
        """How to launch the thread's kernel, given its host runtime directory."""

    def kernel_runtime(self, paths: ThreadPaths) -> KernelRuntime:
        """A fresh, private host directory for one kernel's connection file and sockets.

        The kernel removes it when it stops.  Providers that cannot add a
        mount per kernel (a long-lived container) create it under a directory
        the sandbox already sees, through that directory's descriptor.
        """
        del paths
        return private_kernel_runtime()

    def kernel_stopped(self, paths: ThreadPaths) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """A kernel of the thread stopped and its runtime directory is gone.

        Providers that keep something running for kernels (a container) may let it go now.
        """

    def vfs(self, paths: ThreadPaths) -> VirtualFS:
        """The thread's virtual filesystem (the mount table shared with the file tools).

        ``/mnt/skills`` is the thread's projection of its enabled skills once a
        run has built it (:mod:`deerflow.skills.projection`), else ``skills_dir``.
        A view the run owes (a thread's first) is built first, so a thread
        with a run never falls back to ``skills_dir``.
        """
        paths.ready_skills_view()
        view = paths.skills_view
        return VirtualFS(paths, skills_root=view if view.is_dir() else self.skills_dir)

    def mounts(self, paths: ThreadPaths) -> tuple[Mount, ...]:
        """The thread's mounts that exist on the host (``/mnt/acp-workspace`` is optional)."""
        return tuple(m for m in self.vfs(paths).mounts if m.host.is_dir())

    def translate_in(self, paths: ThreadPaths, text: str) -> str:
        """Rewrite a command or cell before it runs; identity where paths are real."""
        return text

    def mask_out(self, paths: ThreadPaths, text: str) -> str:
        """Hide host paths (mounts, thread dir, home) in output shown to the model."""
        return self.vfs(paths).mask(text)

    def execute(
        self, paths: ThreadPaths, command: str, *, timeout: float | None = None
    ) -> ExecResult:
        """Run a shell command in the thread's sandbox.

        Args:
            paths: The thread's host directories (created if missing).
            command: A bash command line as the model wrote it.
            timeout: Seconds before the command's process group is killed;
                defaults to ``command_timeout``.

        Raises:
            HostBashDisabled: if this provider does not run shell commands.
        """
        if not self.allows_bash:
            raise HostBashDisabled()
        paths.ensure()
        launch = self.command_launch(paths, self.translate_in(paths, command))
        from deerflow.runtime.metrics import sandbox_started

        sandbox_started(self.name, "command")
        return run_command(
            launch.argv,
            env=launch.env,
            cwd=launch.cwd,
            timeout=self.command_timeout if timeout is None else timeout,
            max_output=self.max_output,
            pass_fds=launch.pass_fds,
            after_spawn=launch.release,
        )

    async def aexecute(
        self, paths: ThreadPaths, command: str, *, timeout: float | None = None
    ) -> ExecResult:
        """:meth:`execute` off the event loop (the wait blocks a worker thread)."""
        return await asyncio.to_thread(self.execute, paths, command, timeout=timeout)

"""The ``bwrap`` provider: commands and kernels inside bubblewrap namespaces.

What a sandboxed process sees:

* a fresh root (tmpfs, remounted read-only at the end) holding only
  read-only system directories (``/usr`` and the ``/bin``, ``/lib*``
  symlinks or binds), a short list of ``/etc`` files needed to run programs
  and resolve names, and a synthetic ``/etc/passwd`` with one ``sandbox``
  user — no ``/root``, ``/home``, project checkout or ``$DEERFLOW_HOME``;
* the thread's mounts at their virtual paths, with the access the file tools
  give them (workspace and outputs writable; uploads, ``/mnt/skills`` and
  ``/mnt/acp-workspace`` read-only), with the workspace as cwd.  They are
  bound by descriptor (``--bind-fd``/``--ro-bind-fd``), each folder opened
  with no link followed below the thread's root, so a folder swapped for a
  link to a host directory is refused, never mounted
  (:mod:`deerflow.sandbox.execution.mount_fds`);
* the server's Python relocated to ``/opt/deerflow`` (see
  :mod:`deerflow.sandbox.execution.python_runtime`);
* private ``/tmp`` (also ``$HOME``), ``/proc`` and a minimal ``/dev``.

Namespaces: user (uid/gid 1000, no capabilities), pid, ipc, uts, cgroup, and
network unless the mode is ``open``.  In ``allowlist`` mode the sandbox keeps
its private network namespace and reaches the outside only through the
provider's :class:`~deerflow.sandbox.network.egress_proxy.EgressProxy`: the thread's
proxy socket directory is bound at ``/run/egress`` and every command and
kernel runs under :mod:`deerflow.sandbox.execution.supervisor`, which relays
``127.0.0.1:3128`` (``HTTP_PROXY``) to it.  ``--new-session`` stops terminal
injection; ``--die-with-parent`` ties the sandbox to the server.  The
environment is built from scratch (``--clearenv``) from the allowlist of
:mod:`deerflow.sandbox.execution.env`, so no host variable — secret or not — reaches
the sandbox unless listed there.

Every command and kernel runs under the in-sandbox supervisor, which applies
the rlimits of :class:`~deerflow.sandbox.execution.limits.ProcessLimits` (``pids_limit``,
``memory_limit``, ``cpu_time_limit``); where the server can create cgroups the
whole sandbox also starts inside a cgroup of its own with ``pids.max`` and a
memory limit, which holds even when the server runs as root (see
:mod:`deerflow.sandbox.execution.limits`).  When a command ends, bubblewrap's init (pid 1
of the sandbox's pid namespace) exits and the kernel kills everything left in
the namespace; a kernel's leftover children are killed after each cell by
:mod:`deerflow.sandbox.kernels.kernel`.

Kernels: the pool's per-kernel runtime directory is bound at
``/run/kernel``.  The kernel talks ZMQ over ``ipc`` sockets in that
directory; Unix sockets are filesystem objects, so they work across the
network namespace boundary where loopback TCP would not.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ConfigError
from deerflow.sandbox.execution.egress_bridge import (
    EGRESS_VIEW,
    SUPERVISOR_VIEW,
    proxy_env,
    supervised,
    supervisor_source,
)
from deerflow.sandbox.execution.env import SYSTEM_PATH, check_environment, sandbox_env
from deerflow.sandbox.execution.limits import (
    CgroupLayout,
    LaunchCgroup,
    ProcessLimits,
    detect_cgroups,
    remove_layout,
)
from deerflow.sandbox.execution.mount_fds import MountFds, ensure_thread, open_mounts
from deerflow.sandbox.execution.process import ExecResult, run_command
from deerflow.sandbox.execution.provider import (
    VIRTUAL_WORKSPACE,
    HostBashDisabled,
    KernelLaunch,
    Launch,
    NetworkMode,
    SandboxProvider,
)
from deerflow.sandbox.execution.python_runtime import PythonRuntime
from deerflow.sandbox.network.egress_proxy import EgressProxy
from deerflow.sandbox.network.policy import Allowlist, NetworkGate

log = logging.getLogger(__name__)

KERNEL_RUNTIME_VIEW = "/run/kernel"
SANDBOX_UID = 1000
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_ENTRIES = (
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ssl",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/fonts",
)


class BwrapUnavailable(ConfigError):
    """The ``bwrap`` executable is missing: an operator setup error."""


def find_bwrap() -> str | None:
    """Path of the ``bwrap`` executable, or ``None`` when not installed."""
    return shutil.which("bwrap")


class BwrapSandboxProvider(SandboxProvider):
    """Run commands and kernels inside bubblewrap.

    Args:
        network: ``isolated`` (own network namespace, loopback only), ``open``
            (the host's network, including its loopback) or ``allowlist`` (own
            namespace; out only through ``egress``).
        python: Interpreter to expose; defaults to the server's own.
        bwrap: Path of the ``bwrap`` executable; looked up on ``PATH`` by default.
        egress: The egress proxy for ``allowlist`` mode; the provider owns it and
            closes it.  Default: a proxy with an empty allowlist (every host is
            asked about).
        limits: Process, memory and CPU-time caps of each command and kernel.
        environment: Extra variables inside (``sandbox.environment``).
        cgroups: Use per-launch cgroups when the server can create them.
        **kwargs: See :class:`SandboxProvider`.

    Raises:
        BwrapUnavailable: if bubblewrap is not installed.
    """

    name: ClassVar[str] = "bwrap"

    def __init__(
        self,
        *,
        network: NetworkMode = "isolated",
        python: PythonRuntime | None = None,
        bwrap: str | None = None,
        egress: EgressProxy | None = None,
        limits: ProcessLimits | None = None,
        environment: Mapping[str, str] | None = None,
        cgroups: bool = True,
        **kwargs: Any,  # SandboxProvider's
    ) -> None:
        super().__init__(**kwargs)
        if network not in ("isolated", "open", "allowlist"):
            raise ValueError(
                f"bwrap network mode must be 'isolated', 'open' or 'allowlist', not {network!r}"
            )
        found = bwrap or find_bwrap()
        if found is None:
            raise BwrapUnavailable(
                "the bwrap executable was not found; install bubblewrap "
                "(apt-get install bubblewrap) or use another sandbox provider",
                key="sandbox.use",
            )
        self.bwrap = found
        self.network: NetworkMode = network
        self.egress: EgressProxy | None = None
        if network == "allowlist":
            self.egress = egress or EgressProxy(NetworkGate(Allowlist()))
        self.python = python or PythonRuntime.current()
        self.limits = limits or ProcessLimits()
        self.environment = check_environment(environment or {})
        self.cgroups: CgroupLayout | None = detect_cgroups() if cgroups else None
        if self.cgroups is None and os.getuid() == 0 and self.limits.pids is not None:
            log.warning(
                "bwrap: no cgroup can be created and the server runs as root, so "
                "pids_limit cannot hold (RLIMIT_NPROC does not apply to uid 0)"
            )
        self._kernel_groups: dict[Path, LaunchCgroup] = {}  # by kernel runtime directory
        self._groups_lock = threading.Lock()
        self._shell = "/bin/bash" if Path("/usr/bin/bash").exists() else "/bin/sh"
        self._skeleton = Path(tempfile.mkdtemp(prefix="deerflow-bwrap-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._skeleton, True)
        self._write_skeleton()

    def close(self) -> None:
        """Stop the egress proxy, remove cgroups and skeleton files (idempotent)."""
        if self.egress is not None:
            self.egress.close()
        with self._groups_lock:
            groups, self._kernel_groups = list(self._kernel_groups.values()), {}
        for group in groups:
            group.remove()
        if self.cgroups is not None:
            remove_layout(self.cgroups)
        self._cleanup()

    def _write_skeleton(self) -> None:
        etc = self._skeleton / "etc"
        etc.mkdir()
        (etc / "passwd").write_text(
            f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/tmp:/bin/bash\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        )
        (etc / "group").write_text(f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n")
        self.python.write_skeleton(self._skeleton)

    def sandbox_env(self) -> dict[str, str]:
        """The complete environment inside the sandbox (the allowlist of :mod:`~deerflow.sandbox.execution.env`)."""
        return sandbox_env(
            path=f"{self.python.bin_dir}:{SYSTEM_PATH}",
            home="/tmp",
            host=os.environ,
            extra=self.environment,
            fixed={
                "USER": "sandbox",
                "LOGNAME": "sandbox",
                **self.python.env(),
                **(proxy_env() if self.network == "allowlist" else {}),
            },
        )

    def _namespace_args(self) -> list[str]:
        args = [
            "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--hostname", "sandbox", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
        ]  # fmt: skip
        if self.network != "open":
            args.append("--unshare-net")
        return args

    def _system_args(self) -> list[str]:
        args: list[str] = []
        for d in _SYSTEM_DIRS:
            if os.path.islink(d):
                args += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                args += ["--ro-bind", d, d]
        for entry in _ETC_ENTRIES:
            if os.path.exists(entry):
                args += ["--ro-bind", entry, entry]
        for name in ("passwd", "group"):
            args += ["--ro-bind", str(self._skeleton / "etc" / name), f"/etc/{name}"]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        return args + self.python.bwrap_args(self._skeleton)

    def open_mounts(self, paths: ThreadPaths) -> MountFds:
        """The thread's mount folders opened by descriptor, no link followed below its root.

        bwrap binds these descriptors (``--bind-fd``), not the paths, so a folder
        swapped for a link after the check cannot be mounted in its place
        (:mod:`deerflow.sandbox.execution.mount_fds`).

        Raises:
            UnsafeMount: a mount folder is a link, FIFO or file.
        """
        return open_mounts(paths, self.vfs(paths).mounts)

    def _env_args(self, env: dict[str, str]) -> list[str]:
        args = ["--clearenv"]
        for name, value in env.items():
            args += ["--setenv", name, value]
        return args

    def wrap(
        self,
        mounts: MountFds,
        argv: list[str],
        *,
        binds: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> list[str]:
        """The bwrap command line running ``argv`` in the thread's sandbox.

        Args:
            mounts: The thread's mount folders (:meth:`open_mounts`); the spawner
                passes their descriptors (``pass_fds``) and closes them after.
            argv: Command to run inside, resolved against the sandbox ``PATH``.
            binds: Extra bwrap mount arguments (placed before the root is sealed).
            env: Environment inside; :meth:`sandbox_env` by default.
        """
        return [
            self.bwrap,
            *self._namespace_args(),
            *self._system_args(),
            *mounts.bwrap_args(),
            *binds,
            "--remount-ro", "/",
            "--chdir", VIRTUAL_WORKSPACE,
            *self._env_args(self.sandbox_env() if env is None else env),
            "--",
            *argv,
        ]  # fmt: skip

    def _supervised(
        self, paths: ThreadPaths, argv: list[str], group: LaunchCgroup | None
    ) -> tuple[list[str], list[str]]:
        """``argv`` under the supervisor (rlimits; egress relay in ``allowlist`` mode), and its binds."""
        binds = ["--ro-bind", str(supervisor_source()), SUPERVISOR_VIEW]
        if self.egress is not None:
            binds += ["--ro-bind", str(self.egress.endpoint(paths.root)), EGRESS_VIEW]
        wrapped = supervised(self.python.executable, argv, relay=self.egress is not None)
        split = wrapped.index("--")
        rlimits = self.limits.rlimit_args(memory_in_cgroup=group is not None and group.has_memory)
        return [*wrapped[:split], *rlimits, *wrapped[split:]], binds

    def _new_group(self) -> LaunchCgroup | None:
        """A cgroup for one launch, or ``None`` (no cgroups here, or creating one failed)."""
        if self.cgroups is None:
            return None
        try:
            return self.cgroups.create(self.limits)
        except OSError as exc:
            log.warning("bwrap: could not create a cgroup for a sandbox: %s", exc)
            return None

    def _launch(self, paths: ThreadPaths, command: str, group: LaunchCgroup | None) -> Launch:
        mounts = self.open_mounts(paths)
        try:
            argv, binds = self._supervised(paths, [self._shell, "-c", command], group)
            outer = self.wrap(mounts, argv, binds=binds)
        except BaseException:
            mounts.close()
            raise
        return Launch(
            argv=group.wrap(outer) if group is not None else outer,
            env={"PATH": "/usr/bin:/bin"},
            cwd=self._skeleton,  # not a thread folder: the path may be a planted link
            held=mounts,
        )

    def command_launch(self, paths: ThreadPaths, command: str) -> Launch:
        """How to run ``command`` (without a cgroup: :meth:`execute` adds one)."""
        return self._launch(paths, command, None)

    def execute(
        self, paths: ThreadPaths, command: str, *, timeout: float | None = None
    ) -> ExecResult:
        """Run ``command`` in a fresh sandbox, inside a cgroup of its own where possible."""
        if not self.allows_bash:
            raise HostBashDisabled()
        ensure_thread(paths)
        group = self._new_group()
        try:
            launch = self._launch(paths, command, group)
            return run_command(
                launch.argv, env=launch.env, cwd=launch.cwd,
                timeout=self.command_timeout if timeout is None else timeout,
                max_output=self.max_output, pass_fds=launch.pass_fds, after_spawn=launch.release,
            )  # fmt: skip
        finally:
            if group is not None:
                group.remove()

    def kernel_launch(self, paths: ThreadPaths, runtime_dir: Path) -> KernelLaunch:
        env = {**self.sandbox_env(), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        inner = [
            self.python.executable,
            "-m",
            "ipykernel_launcher",
            "--HistoryManager.enabled=False",
        ]
        mounts = self.open_mounts(paths)  # first: a refused mount leaves no cgroup behind
        try:
            group = self._new_group()
            if group is not None:
                with self._groups_lock:
                    self._kernel_groups[runtime_dir] = group
            inner, binds = self._supervised(paths, inner, group)
            argv = self.wrap(
                mounts, inner, binds=["--bind", str(runtime_dir), KERNEL_RUNTIME_VIEW, *binds], env=env
            )
        except BaseException:
            mounts.close()
            raise
        return KernelLaunch(
            argv=group.wrap(argv) if group is not None else argv,
            env={"PATH": "/usr/bin:/bin"},
            cwd=self._skeleton,  # not a thread folder: the path may be a planted link
            runtime_view=KERNEL_RUNTIME_VIEW,
            held=mounts,
        )

    def kernel_stopped(self, paths: ThreadPaths) -> None:
        """Kill what is left of stopped kernels' sandboxes and remove their cgroups.

        A kernel's cgroup is keyed by its runtime directory, which the kernel
        removes when it stops, so a group whose directory is gone is finished.
        """
        del paths
        with self._groups_lock:
            done = [d for d in self._kernel_groups if not d.exists()]
            groups = [self._kernel_groups.pop(d) for d in done]
        for group in groups:
            group.remove()

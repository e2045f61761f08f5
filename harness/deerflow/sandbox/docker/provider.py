"""The ``docker`` provider: one container per thread; commands and kernels exec'd into it.

Design:

* **A container per user+thread.**  Its spec (mounts at the virtual paths,
  network, limits, hardening; :mod:`deerflow.sandbox.docker.spec`) is built
  from the thread's paths.  Containers are keyed by the thread's host root,
  which names user and thread, and are never handed to another key; a
  container whose spec no longer matches (a mount appeared, the config
  changed) is removed and recreated once it is idle — that is the "reset".
* **A small warm pool.**  A container is *busy* while a command holds a lease
  on it or a kernel runs in it (the kernel's runtime directory exists under
  the thread's run directory).  Idle containers stay running for their
  thread, newest first, up to ``warm_pool_size``; older idle ones are removed
  whenever a container is acquired or released.  ``warm_pool_size: 0`` means
  a container lives exactly as long as something runs in it.
* **Execution through a process.**  Commands and kernels run via the host
  shim :mod:`deerflow.sandbox.docker.exec_shim` (the Engine API, no CLI needed)
  and, inside, under :mod:`deerflow.sandbox.execution.supervisor`.  So the timeouts,
  output caps and kernel management of the other providers apply unchanged.
  A timeout kills the shim; the supervisor sees its stdin close and kills
  the command's process group, and the provider also kills that group from
  its pid file (the engine does not stop exec'd processes by itself).
* **One output stream.**  Without a tty the engine relays stdout and stderr
  as separate streams and loses their order, so each command runs with its
  stderr merged into stdout inside the container (``sh -c 'exec "$@" 2>&1'``).
* **Kernels over ipc.**  A running container cannot gain mounts, so kernel
  runtime directories are created inside the thread's run directory, bound
  at ``/run/deerflow``; ZMQ's ipc sockets cross the bind mount.  This needs
  the engine on the same Linux host (not Docker Desktop's VM).
* **The run directory is the sandbox's to change.**  Everything below it
  (``exec/``, ``kernels/``, each kernel's files) can be replaced by a link
  from inside the container at any moment, so the host reaches it only
  through :class:`~deerflow.threadfs.SafeDir`, anchored at descriptors it
  holds (the provider's ``run/`` folder, each slot's run directory): a link
  at ``kernels`` is removed and the folder made again before the next kernel,
  or the kernel start fails with one line; it is never followed.
* **Python.**  ``host`` mode binds the server's interpreter and packages
  read-only (same packages as the server, ipykernel included; needs a glibc
  image at least as new as the host's); ``image`` mode uses the image's
  ``python3``, which must have ipykernel installed.
* **Network.**  ``isolated`` and ``allowlist`` run with ``network_mode=none``;
  ``allowlist`` adds the provider's egress proxy exactly as bwrap does.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ConfigError
from deerflow.sandbox.docker.spec import (
    RUN_VIEW,
    ContainerPython,
    ContainerSpec,
    Limits,
    PythonMode,
    build_container_spec,
)
from deerflow.sandbox.execution.egress_bridge import supervised, supervisor_source
from deerflow.sandbox.execution.env import check_environment, scrub_env
from deerflow.sandbox.execution.mount_fds import (
    STAT_FORMAT,
    UnsafeMount,
    ensure_thread,
    open_mounts,
    read_mount_report,
)
from deerflow.sandbox.execution.process import ExecResult, run_command
from deerflow.sandbox.execution.provider import (
    VIRTUAL_WORKSPACE,
    KernelLaunch,
    KernelRuntime,
    Launch,
    NetworkMode,
    SandboxProvider,
)
from deerflow.sandbox.network.egress_proxy import EgressProxy
from deerflow.sandbox.network.policy import Allowlist, NetworkGate
from deerflow.threadfs import SafeDir, UnsafePath

logger = logging.getLogger(__name__)

_HOST_ENV = ("PATH", "HOME", "LANG")
_KILL_GROUP = "import os, signal, sys; os.killpg(int(sys.argv[1]), signal.SIGKILL)"
_MAX_PID_BYTES = 32
# A non-tty exec delivers stdout and stderr as two streams that the engine reads
# concurrently, so their relative order is lost; commands merge them inside.
_MERGE_STDERR = ("/bin/sh", "-c", 'exec "$@" 2>&1', "sh")


class DockerUnavailable(ConfigError):
    """The Docker SDK is missing or no engine answers: an operator setup error."""


def connect_docker() -> Any:
    """A Docker client for the engine named by the environment, checked with a ping.

    Raises:
        DockerUnavailable: the ``docker`` package is not installed, or no engine is reachable.
    """
    try:
        import docker
        from docker.errors import DockerException
        from requests.exceptions import RequestException
    except ImportError:
        raise DockerUnavailable("the docker provider needs the Docker SDK: "
                                "the 'docker' extra (pip install '.[docker]' in a clone)", key="sandbox.use") from None
    try:
        client = docker.from_env()
        client.ping()
    except (DockerException, RequestException) as exc:
        raise DockerUnavailable(f"no Docker engine reachable ({exc}); start Docker, set DOCKER_HOST, "
                                "or use another sandbox provider", key="sandbox.use") from None
    return client


def _docker_errors() -> tuple[type[BaseException], ...]:
    try:
        from docker.errors import DockerException
        from requests.exceptions import RequestException
    except ImportError:
        return (OSError,)
    return (DockerException, RequestException, OSError)


@dataclass
class _Slot:
    """One thread's container and who is using it."""

    key: Path
    container: Any
    fingerprint: str
    run_dir: Path
    leases: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    root: SafeDir = field(init=False, repr=False)
    """The run directory, held for the slot's life (its path is the provider's own, below it nothing is)."""
    held: InitVar[SafeDir | None] = None

    def __post_init__(self, held: SafeDir | None) -> None:
        self.root = held if held is not None else SafeDir.open(self.run_dir)

    @property
    def busy(self) -> bool:
        """A lease is held, or ``kernels/`` lists something (a kernel directory; whatever the
        sandbox put there keeps its own container up, nothing more; a link there is no kernel)."""
        if self.leases > 0:
            return True
        try:
            return bool(self.root.scandir("kernels"))
        except OSError:  # UnsafePath (a link there), or the slot was removed and its descriptor closed
            return False


class DockerSandboxProvider(SandboxProvider):
    """Run each thread's commands and kernel in its own container.

    Args:
        client: A ``docker.DockerClient``; default: :func:`connect_docker`.
        image: Image providing the userland.
        network: ``isolated`` (``none``), ``open`` (``bridge``) or ``allowlist``.
        limits: Memory, CPU and process limits per container.
        warm_pool_size: Idle thread containers kept running for reuse.
        python_mode: ``host`` (bind the server's interpreter) or ``image``.
        user: ``uid:gid`` inside the container; default: the server's.
        shell: The shell for ``bash`` commands inside the image.
        egress: The egress proxy for ``allowlist`` mode (the provider owns and closes it).
        **kwargs: See :class:`SandboxProvider`.
    """

    name: ClassVar[str] = "docker"
    MOUNT_CHECKS: ClassVar[int] = 4
    """How many times a started container is asked for its mounts before an incomplete report refuses."""

    def __init__(self, *, client: Any = None, image: str = "python:3.11-slim",
                 network: NetworkMode = "isolated", limits: Limits | None = None,
                 warm_pool_size: int = 0, python_mode: PythonMode = "host", user: str | None = None,
                 shell: str = "/bin/bash", egress: EgressProxy | None = None,
                 environment: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # SandboxProvider's
        if network not in ("isolated", "open", "allowlist"):
            raise ValueError(f"docker network mode must be 'isolated', 'open' or 'allowlist', not {network!r}")
        self.client = client if client is not None else connect_docker()
        self.image = image
        self.network: NetworkMode = network
        self.limits = limits or Limits()
        self.environment = check_environment(environment or {})
        self.warm_pool_size = warm_pool_size
        self.user = user or f"{os.getuid()}:{os.getgid()}"
        self.shell = shell
        self.instance = uuid.uuid4().hex[:8]
        self.egress = (egress or EgressProxy(NetworkGate(Allowlist()))) if network == "allowlist" else None
        tmp = SafeDir.open(tempfile.gettempdir())
        name = tmp.mkdtemp("deerflow-docker-")
        self._root = Path(tempfile.gettempdir()) / name
        self._runs = SafeDir.open(self._root / "run", create=True)
        self._cleanup = weakref.finalize(self, _remove_root, tmp, name, self._runs)
        self.python = ContainerPython.of_server() if python_mode == "host" else None
        if self.python is not None:
            self.python.write_skeleton(self._root / "skeleton")
        self._inner_python = self.python.executable if self.python is not None else "python3"
        self._slots: dict[Path, _Slot] = {}
        self._lock = threading.Lock()

    # -- the spec ---------------------------------------------------------------------

    def _key_hash(self, paths: ThreadPaths) -> str:
        return hashlib.sha256(str(paths.root).encode()).hexdigest()[:12]

    def run_dir(self, paths: ThreadPaths) -> Path:
        """The thread's host run directory (kernels, pid files), bound at ``/run/deerflow``.

        Only its path is handed on (to the engine, as a bind source); see :meth:`_open_run`.
        """
        self._open_run(paths).close()
        return self._root / "run" / self._key_hash(paths)

    def _open_run(self, paths: ThreadPaths) -> SafeDir:
        """The thread's run directory, held, with ``exec/`` and ``kernels/`` in it as folders.

        Whatever the sandbox left at either name that is not a folder (a link to a host folder)
        is removed, not followed, and the folder made again.
        """
        root = self._runs.subdir(self._key_hash(paths), create=True)
        try:
            for sub in ("exec", "kernels"):
                if root.kind(sub) not in (None, "dir"):
                    root.unlink(sub)
                try:
                    root.mkdir(sub)
                except UnsafePath as exc:
                    if exc.code != "exists":
                        raise
        except BaseException:
            root.close()
            raise
        return root

    def container_spec(self, paths: ThreadPaths) -> ContainerSpec:
        """The container thread ``paths`` runs in (pure data; nothing is started)."""
        key = self._key_hash(paths)
        return build_container_spec(
            image=self.image, name=f"deerflow-{self.instance}-{key}", user=self.user,
            thread_mounts=self.mounts(paths), run_dir=self.run_dir(paths), supervisor=supervisor_source(),
            network=self.network, limits=self.limits, python=self.python, skeleton=self._root / "skeleton",
            egress_dir=self.egress.endpoint(paths.root) if self.egress is not None else None,
            environment=self.environment,
            labels={"deerflow.sandbox": "1", "deerflow.provider": self.instance, "deerflow.thread": key},
        )  # fmt: skip

    # -- the pool ---------------------------------------------------------------------

    def acquire(self, paths: ThreadPaths, *, lease: bool) -> _Slot:
        """The thread's running container, started (or reset) if needed.

        Args:
            paths: The thread.
            lease: Hold the container busy until :meth:`release`.
        """
        ensure_thread(paths)
        spec = self.container_spec(paths)
        with self._lock:
            slot = self._slots.get(paths.root)
            if slot is not None and not slot.busy and (slot.fingerprint != spec.fingerprint()
                                                       or not self._running(slot)):
                self._remove(slot)
                slot = None
            if slot is None:
                container = self._start(paths, spec)
                slot = _Slot(paths.root, container, spec.fingerprint(), self.run_dir(paths),
                             held=self._open_run(paths))
                self._slots[paths.root] = slot
            if lease:
                slot.leases += 1
            self._trim(keep=slot)
            return slot

    def _start(self, paths: ThreadPaths, spec: ContainerSpec) -> Any:
        """Create and start the thread's container, then check what it mounted.

        The Engine binds by path and resolves the source itself, so the folders cannot be bound
        by descriptor as bwrap does.  Instead each folder is opened through SafeDir before the
        create (a link, FIFO or file refuses: :class:`UnsafeMount`) and held open; once the
        container runs (only its idle keep-alive: nothing of the agent's has run in it yet),
        ``stat`` inside it must report, at each mount point, the device and inode of the folder
        held for it.  A folder swapped for a link during the create, even if swapped back
        since, shows up as another folder: the container is removed and the launch refused.
        """
        with open_mounts(paths, self.vfs(paths).mounts) as held:
            expected = held.identities()
            container = self.client.containers.run(**spec.run_kwargs())
            refused = self._unconfirmed_mount(container, expected)
            if refused is not None:
                try:
                    container.remove(force=True)
                except _docker_errors() as exc:
                    logger.warning("could not remove sandbox container %s: %s", getattr(container, "id", "?"), exc)
                raise UnsafeMount(*refused)
        return container

    def _unconfirmed_mount(self, container: Any, expected: dict[str, tuple[int, int]]) -> tuple[str, str] | None:
        """(virtual path, reason) of the first mount the started container does not show to be
        the held folder; None when all are.  What cannot be checked is refused.  A report missing
        a path (the engine's exec stream can lose a short-lived process's output on a loaded
        host) is asked for again, :attr:`MOUNT_CHECKS` times in all; a swapped folder is not."""
        first = next(iter(expected), "/mnt/user-data")
        report = None
        for attempt in range(self.MOUNT_CHECKS):
            if attempt:
                time.sleep(0.1 * attempt)
            try:
                result = container.exec_run(["stat", "-c", STAT_FORMAT, *expected], user=self.user)
            except _docker_errors() as exc:
                logger.warning("could not check the mounts of sandbox container %s: %s",
                               getattr(container, "id", "?"), exc)
                return first, "could not be checked inside the container"
            output = result.output.decode("utf-8", "replace") if isinstance(result.output, bytes) else ""
            if result.exit_code != 0:
                logger.warning("could not check the mounts of sandbox container %s (its image needs `stat`): %s",
                               getattr(container, "id", "?"), output.strip()[:300])
                return first, "could not be checked inside the container (its image needs `stat`)"
            report = read_mount_report(expected, output)
            if report.wrong is not None:
                return report.wrong, "was not the folder the container mounted (replaced while it was created)"
            if report.missing is None:
                return None
            logger.warning("sandbox container %s reported its mounts incompletely (attempt %d): %r",
                           getattr(container, "id", "?"), attempt + 1, output[:300])
        assert report is not None and report.missing is not None
        return report.missing, "could not be confirmed inside the container (its report stayed incomplete)"

    def release(self, slot: _Slot) -> None:
        """End a lease; idle containers beyond the warm pool are removed."""
        with self._lock:
            slot.leases -= 1
            slot.idle_since = time.monotonic()
            self._trim()

    def kernel_stopped(self, paths: ThreadPaths) -> None:
        """The thread's kernel is gone: its container is idle now, and beyond the warm pool it goes."""
        with self._lock:
            slot = self._slots.get(paths.root)
            if slot is not None and not slot.busy:
                slot.idle_since = time.monotonic()
                self._trim()

    def containers(self) -> dict[Path, Any]:
        """The running containers by thread root (for tests and diagnostics)."""
        with self._lock:
            return {key: slot.container for key, slot in self._slots.items()}

    def _trim(self, keep: _Slot | None = None) -> None:
        idle = [s for s in self._slots.values() if s is not keep and not s.busy]
        idle.sort(key=lambda s: s.idle_since, reverse=True)
        for slot in idle[self.warm_pool_size:]:
            self._remove(slot)

    def _running(self, slot: _Slot) -> bool:
        try:
            slot.container.reload()
        except _docker_errors():
            return False
        return slot.container.status == "running"

    def _remove(self, slot: _Slot) -> None:
        self._slots.pop(slot.key, None)
        slot.root.close()
        try:
            slot.container.remove(force=True)
        except _docker_errors() as exc:
            logger.warning("could not remove sandbox container %s: %s", getattr(slot.container, "id", "?"), exc)

    # -- execution --------------------------------------------------------------------

    def _host_env(self) -> dict[str, str]:
        """Environment of the host-side shim: how to reach the engine, nothing more."""
        return scrub_env({k: v for k, v in os.environ.items() if k.startswith("DOCKER_") or k in _HOST_ENV})

    def exec_argv(self, slot: _Slot, inner: list[str], *, pidfile: str) -> list[str]:
        """The host command line running ``inner`` in ``slot``'s container, supervised."""
        return [
            sys.executable, "-m", "deerflow.sandbox.docker.exec_shim", "--container", str(slot.container.id),
            "--workdir", VIRTUAL_WORKSPACE, "--",
            *supervised(self._inner_python, inner, relay=self.network == "allowlist", pidfile=pidfile,
                        watch_stdin=True),
        ]  # fmt: skip

    def _command(self, paths: ThreadPaths, slot: _Slot, command: str, exec_id: str) -> Launch:
        argv = self.exec_argv(slot, [*_MERGE_STDERR, self.shell, "-c", command],
                              pidfile=f"{RUN_VIEW}/exec/{exec_id}.pid")
        return Launch(argv=argv, env=self._host_env(), cwd=paths.workspace)

    def command_launch(self, paths: ThreadPaths, command: str) -> Launch:
        return self._command(paths, self.acquire(paths, lease=False), command, uuid.uuid4().hex)

    def execute(self, paths: ThreadPaths, command: str, *, timeout: float | None = None) -> ExecResult:
        """Run ``command`` in the thread's container, holding it busy meanwhile."""
        slot = self.acquire(paths, lease=True)
        exec_id = uuid.uuid4().hex
        try:
            launch = self._command(paths, slot, self.translate_in(paths, command), exec_id)
            result = run_command(launch.argv, env=launch.env, cwd=launch.cwd,
                                 timeout=self.command_timeout if timeout is None else timeout,
                                 max_output=self.max_output)
            if result.timed_out:
                self._kill_exec(slot, exec_id)
            return result
        finally:
            self.release(slot)

    def _kill_exec(self, slot: _Slot, exec_id: str) -> None:
        """Kill a timed-out command's process group inside the container, by its pid file.

        The run directory is bound read-write at ``/run/deerflow``, so the pid file is the
        sandboxed code's to replace: it is read through a :class:`SafeDir` (a link to a host file
        or a FIFO planted at its name is refused, never followed nor waited on), bounded, and
        must hold a process group id, which alone is passed into the container.
        """
        name = f"exec/{exec_id}.pid"
        try:
            try:
                pgid = slot.root.read_bytes(name, max_bytes=_MAX_PID_BYTES).decode("ascii", "replace").strip()
            finally:
                slot.root.unlink(name)
        except UnsafePath as exc:
            if exc.code != "not_found":  # not_found: the supervisor already cleaned up (its stdin closed)
                logger.warning("not killing a timed-out command in %s: its pid file %s", slot.container.id, exc)
            return
        if not (pgid.isascii() and pgid.isdigit()):
            logger.warning("not killing a timed-out command in %s: its pid file holds no process id", slot.container.id)
            return
        try:
            slot.container.exec_run([self._inner_python, "-c", _KILL_GROUP, pgid], user=self.user)
        except _docker_errors() as exc:
            logger.warning("could not kill timed-out command in %s: %s", slot.container.id, exc)

    def kernel_runtime(self, paths: ThreadPaths) -> KernelRuntime:
        """A kernel directory inside the thread's run directory (it keeps the container busy).

        Made under an unguessable name through the held ``kernels/`` folder (``acquire`` just
        replaced a link there by a folder; one raced in since fails with ``UnsafePath``).
        """
        slot = self.acquire(paths, lease=True)  # held until the directory makes it busy
        try:
            kernels = slot.root.subdir("kernels", label=f"{RUN_VIEW}/kernels")
            try:
                name = kernels.mkdtemp("k")
            except BaseException:
                kernels.close()
                raise
        finally:
            self.release(slot)
        return KernelRuntime(slot.run_dir / "kernels" / name, kernels, name)

    def kernel_launch(self, paths: ThreadPaths, runtime_dir: Path) -> KernelLaunch:
        slot = self.acquire(paths, lease=False)
        view = f"{RUN_VIEW}/kernels/{runtime_dir.name}"
        inner = [self._inner_python, "-m", "ipykernel_launcher", "--HistoryManager.enabled=False"]
        return KernelLaunch(argv=self.exec_argv(slot, inner, pidfile=f"{view}/kernel.pid"),
                            env=self._host_env(), cwd=paths.workspace, runtime_view=view)

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Remove every container of this provider, stop the egress proxy, delete run dirs."""
        with self._lock:
            for slot in list(self._slots.values()):
                self._remove(slot)
        if self.egress is not None:
            self.egress.close()
        self._cleanup()


def _remove_root(tmp: SafeDir, name: str, runs: SafeDir) -> None:
    """Delete the provider's private root ``name`` in the temporary directory, following no link."""
    runs.close()
    try:
        tmp.rmtree(name)
    except UnsafePath as exc:
        logger.warning("could not remove the docker provider's run directories: %s", exc)
    finally:
        tmp.close()


__all__ = ["DockerSandboxProvider", "DockerUnavailable", "connect_docker"]

"""The container a thread's Docker sandbox runs in, as plain data.

:func:`build_container_spec` turns a thread's mounts and the provider's
settings into a :class:`ContainerSpec`; :meth:`ContainerSpec.run_kwargs` is
exactly what goes to ``client.containers.run``.  Keeping the spec pure makes
the security-relevant choices testable without an engine:

* **mounts** — the thread's virtual mounts at their virtual paths with the
  file tools' access (uploads, skills, ACP read-only; workspace and outputs
  read-write); a per-thread host *run directory* at ``/run/deerflow`` (kernel
  connection files and ZMQ ipc sockets, command pid files: a running
  container cannot gain mounts, so everything that comes and goes lives
  there); the supervisor script and, in ``host`` Python mode, the server's
  interpreter and site-packages, all read-only; in ``allowlist`` mode the
  thread's egress proxy socket directory, read-only;
* **network** — ``isolated`` and ``allowlist`` → ``none`` (loopback only),
  ``open`` → ``bridge``;
* **limits** — memory, CPUs (``nano_cpus``), process count;
* **hardening** — read-only root filesystem with a private ``/tmp`` tmpfs, all
  capabilities dropped, ``no-new-privileges``, an init process reaping zombies,
  the server's own uid/gid (files written appear as the server's, and are
  never root-owned unless the server runs as root);
* **environment** — built from the allowlist of :mod:`deerflow.sandbox.execution.env`
  (never from the server's), plus the operator's ``sandbox.environment``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from deerflow.sandbox.execution.egress_bridge import EGRESS_VIEW, SUPERVISOR_VIEW, proxy_env
from deerflow.sandbox.execution.env import SYSTEM_PATH, sandbox_env
from deerflow.sandbox.execution.provider import VIRTUAL_WORKSPACE, NetworkMode
from deerflow.sandbox.execution.python_runtime import (
    SANDBOX_PYTHON_HOME,
    SANDBOX_VENV,
    PythonRuntime,
)
from deerflow.sandbox.files.virtual_paths import Mount

RUN_VIEW = "/run/deerflow"
KEEPALIVE = ("sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done")
TMPFS_OPTIONS = "rw,nosuid,nodev,size=512m"

PythonMode = Literal["host", "image"]


class ContainerPython(PythonRuntime):
    """The server's interpreter as a container sees it: always relocated.

    Inside an image, ``/usr`` is the image's, so even a system interpreter
    must be bound at ``/opt/deerflow/python``.
    """

    @property
    def relocated(self) -> bool:
        return True

    @classmethod
    def of_server(cls) -> ContainerPython:
        """The interpreter running this process, as a container sees it."""
        base = PythonRuntime.current()
        return cls(base.base_prefix, base.site_packages, base.version, base.full_version)


@dataclass(frozen=True)
class BindMount:
    """A host directory or file bound into the container."""

    source: str
    target: str
    read_only: bool

    def to_api(self) -> dict[str, Any]:
        """The Engine API mount object (what ``docker.types.Mount`` builds)."""
        return {"Target": self.target, "Source": self.source, "Type": "bind", "ReadOnly": self.read_only}


@dataclass(frozen=True)
class Limits:
    """Resource limits of one container (``None``: the engine's default)."""

    memory: str | None = None
    cpus: float | None = None
    pids: int | None = 512

    @property
    def nano_cpus(self) -> int | None:
        return None if self.cpus is None else int(self.cpus * 1_000_000_000)


@dataclass(frozen=True)
class ContainerSpec:
    """Everything ``containers.run`` gets for one thread's container."""

    image: str
    name: str
    user: str
    environment: dict[str, str]
    mounts: tuple[BindMount, ...]
    network_mode: str
    limits: Limits
    labels: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = KEEPALIVE
    working_dir: str = VIRTUAL_WORKSPACE
    hostname: str = "sandbox"
    read_only: bool = True
    tmpfs: dict[str, str] = field(default_factory=lambda: {"/tmp": TMPFS_OPTIONS})
    cap_drop: tuple[str, ...] = ("ALL",)
    security_opt: tuple[str, ...] = ("no-new-privileges",)
    init: bool = True

    def mount_at(self, target: str) -> BindMount | None:
        """The mount whose target is ``target``, if any."""
        return next((m for m in self.mounts if m.target == target), None)

    def fingerprint(self) -> str:
        """A digest of what the container *is* (not what it is called); reuse needs a match."""
        data = asdict(self)
        data.pop("name")
        data.pop("labels")
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def run_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``client.containers.run(detach=True, **kwargs)``."""
        kwargs: dict[str, Any] = {
            "image": self.image, "command": list(self.command), "name": self.name, "user": self.user,
            "environment": dict(self.environment), "mounts": [m.to_api() for m in self.mounts],
            "network_mode": self.network_mode, "labels": {**self.labels, "deerflow.spec": self.fingerprint()},
            "working_dir": self.working_dir, "hostname": self.hostname, "read_only": self.read_only,
            "tmpfs": dict(self.tmpfs), "cap_drop": list(self.cap_drop), "security_opt": list(self.security_opt),
            "init": self.init, "detach": True, "stdin_open": False, "tty": False,
        }  # fmt: skip
        if self.limits.memory is not None:
            kwargs["mem_limit"] = self.limits.memory
            kwargs["memswap_limit"] = self.limits.memory  # no swap beyond the limit
        if self.limits.nano_cpus is not None:
            kwargs["nano_cpus"] = self.limits.nano_cpus
        if self.limits.pids is not None:
            kwargs["pids_limit"] = self.limits.pids
        return kwargs


def docker_network_mode(network: NetworkMode) -> str:
    """The Docker network of a sandbox network mode (``allowlist`` goes out via the proxy)."""
    return "bridge" if network == "open" else "none"


def python_mounts(python: ContainerPython, skeleton: Path) -> list[BindMount]:
    """Read-only binds exposing the server's interpreter (and venv) in the container."""
    mounts = [BindMount(str(python.base_prefix), SANDBOX_PYTHON_HOME, True)]
    if python.site_packages is not None:
        site_view = f"{SANDBOX_VENV}/lib/python{python.version}/site-packages"
        mounts.append(BindMount(str(skeleton / "venv"), SANDBOX_VENV, True))
        mounts.append(BindMount(str(python.site_packages), site_view, True))
    return mounts


def container_env(
    python: ContainerPython | None,
    *,
    network: NetworkMode,
    extra: Mapping[str, str] | None = None,
    host: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The complete environment of the container: the allowlist, ``extra``, what Python needs.

    Args:
        python: The bound server interpreter, or ``None`` (the image's).
        network: The sandbox network mode (``allowlist`` adds the proxy variables).
        extra: The operator's ``sandbox.environment``.
        host: The server's environment; only locale variables are read (default: none).
    """
    bin_dir = f"{python.bin_dir}:" if python is not None else ""
    return sandbox_env(
        path=bin_dir + SYSTEM_PATH,
        home="/tmp",
        host=host or {},
        extra=extra,
        fixed={
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            **(python.env() if python is not None else {}),
            **(proxy_env() if network == "allowlist" else {}),
        },
    )


def build_container_spec(
    *,
    image: str,
    name: str,
    user: str,
    thread_mounts: Sequence[Mount],
    run_dir: Path,
    supervisor: Path,
    network: NetworkMode,
    limits: Limits,
    python: ContainerPython | None,
    skeleton: Path,
    egress_dir: Path | None = None,
    labels: Mapping[str, str] | None = None,
    environment: Mapping[str, str] | None = None,
) -> ContainerSpec:
    """The container of one thread.

    Args:
        image: The image providing the userland (and Python in ``image`` mode).
        name: Container name (unique per provider and thread).
        user: ``uid:gid`` the container runs as.
        thread_mounts: The thread's existing virtual mounts (from the provider's VFS).
        run_dir: The thread's host run directory, bound at ``/run/deerflow``.
        supervisor: The host copy of :mod:`deerflow.sandbox.execution.supervisor`.
        network: The sandbox network mode.
        limits: Memory, CPU and process limits.
        python: The server interpreter to bind (``host`` mode), or ``None`` to use the image's.
        skeleton: The provider directory holding the synthetic venv.
        egress_dir: The thread's egress socket directory (``allowlist`` mode only).
        labels: Labels identifying the owner and the thread.
        environment: The operator's extra variables (``sandbox.environment``).
    """
    mounts = [BindMount(str(m.host), str(m.virtual), not m.writable) for m in thread_mounts]
    mounts.append(BindMount(str(run_dir), RUN_VIEW, False))
    mounts.append(BindMount(str(supervisor), SUPERVISOR_VIEW, True))
    if python is not None:
        mounts += python_mounts(python, skeleton)
    if network == "allowlist":
        if egress_dir is None:
            raise ValueError("allowlist mode needs the thread's egress socket directory")
        mounts.append(BindMount(str(egress_dir), EGRESS_VIEW, True))
    return ContainerSpec(
        image=image, name=name, user=user, environment=container_env(python, network=network, extra=environment),
        mounts=tuple(mounts), network_mode=docker_network_mode(network), limits=limits,
        labels=dict(labels or {}),
    )  # fmt: skip


__all__ = [
    "RUN_VIEW", "BindMount", "ContainerPython", "ContainerSpec", "Limits", "PythonMode",
    "build_container_spec", "container_env", "docker_network_mode", "python_mounts",
]

"""Building the execution services from the ``sandbox`` config section.

The host (server extension, CLI) calls these once, puts the results in
``RunContext.services`` (``"sandbox"`` and ``"kernels"``) and closes them on
shutdown.  Unsupported combinations are user errors, reported once here
rather than as tool failures on every call.

``network: allowlist`` gives the provider an egress proxy built from
``allowed_hosts`` and ``egress_hosts``; the provider owns it and closes it.
The ``local`` provider cannot cut the network, so it refuses that mode.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from deerflow.errors import ConfigError
from deerflow.runtime.services import HostServices
from deerflow.sandbox.execution.bwrap import BwrapSandboxProvider
from deerflow.sandbox.execution.limits import ProcessLimits
from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.sandbox.execution.provider import SandboxProvider
from deerflow.sandbox.kernels.kernel_pool import KernelPool
from deerflow.sandbox.network.egress_proxy import EgressProxy, SystemResolver
from deerflow.sandbox.network.policy import Allowlist, NetworkGate

if TYPE_CHECKING:
    from deerflow.config.schema import AppConfig, SandboxConfig


def make_provider(config: SandboxConfig, *, skills_dir: Path | None = None) -> SandboxProvider:
    """The provider named by ``sandbox.use``.

    Raises:
        ConfigError: for providers or network modes this build does not run.
    """
    if config.use == "local":
        if config.network == "allowlist":
            raise ConfigError(
                "network mode 'allowlist' needs a sandbox that can cut the network; the local "
                "provider runs on the host. Use sandbox.use: bwrap (or docker)",
                key="sandbox.network",
            )
        return LocalSandboxProvider(
            allow_host_bash=config.allow_host_bash,
            environment=config.environment,
            command_timeout=config.command_timeout,
            skills_dir=skills_dir,
        )
    if config.use == "bwrap":
        return _with_egress(
            config,
            lambda egress: BwrapSandboxProvider(
                network=config.network,
                egress=egress,
                limits=ProcessLimits(
                    pids=config.pids_limit,
                    memory=config.memory_limit,
                    cpu_seconds=config.cpu_time_limit,
                ),
                environment=config.environment,
                command_timeout=config.command_timeout,
                skills_dir=skills_dir,
            ),
        )
    if config.use == "docker":
        return _make_docker(config, skills_dir=skills_dir)
    raise ConfigError(
        f"sandbox provider {config.use!r} is not available in this build", key="sandbox.use"
    )


def make_egress_proxy(config: SandboxConfig) -> EgressProxy:
    """The egress proxy of ``allowlist`` mode, from ``allowed_hosts`` and ``egress_hosts``.

    Raises:
        ConfigError: an entry of either list is malformed (the key names it).
    """
    gate = NetworkGate(Allowlist.from_entries(config.allowed_hosts))
    return EgressProxy(gate, resolver=SystemResolver(config.egress_hosts))


def _with_egress(
    config: SandboxConfig, build: Callable[[EgressProxy | None], SandboxProvider]
) -> SandboxProvider:
    """Build a provider, handing it an egress proxy in ``allowlist`` mode (closed if it fails)."""
    egress = make_egress_proxy(config) if config.network == "allowlist" else None
    try:
        return build(egress)
    except BaseException:
        if egress is not None:
            egress.close()
        raise


def _make_docker(config: SandboxConfig, *, skills_dir: Path | None) -> SandboxProvider:
    """The Docker provider; a missing SDK or engine is a ConfigError raised here."""
    from deerflow.sandbox.docker.provider import DockerSandboxProvider, connect_docker
    from deerflow.sandbox.docker.spec import Limits

    client = connect_docker()
    limits = Limits(memory=config.memory_limit, cpus=config.cpu_limit, pids=config.pids_limit)
    return _with_egress(
        config,
        lambda egress: DockerSandboxProvider(
            client=client,
            image=config.image,
            network=config.network,
            limits=limits,
            warm_pool_size=config.warm_pool_size,
            python_mode=config.docker_python,
            environment=config.environment,
            egress=egress,
            command_timeout=config.command_timeout,
            skills_dir=skills_dir,
        ),
    )


def make_kernel_pool(provider: SandboxProvider, config: SandboxConfig) -> KernelPool:
    """A kernel pool for ``provider`` with the configured timeouts."""
    return KernelPool(
        provider,
        default_timeout=config.python_timeout,
        idle_timeout=config.kernel_idle_timeout,
    )


def open_execution_services(config: AppConfig, stack: AsyncExitStack) -> HostServices:
    """The sandbox provider and kernel pool of a host; ``stack`` closes them (kernels first)."""
    provider = make_provider(config.sandbox)
    close_provider = getattr(provider, "close", None)
    if close_provider is not None:
        stack.callback(close_provider)
    kernels = make_kernel_pool(provider, config.sandbox)
    stack.push_async_callback(kernels.aclose)
    return HostServices(sandbox=provider, kernels=kernels)

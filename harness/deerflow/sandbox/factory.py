"""Building the execution services from the ``sandbox`` config section.

The host (server extension, CLI) calls these once, puts the results in
``RunContext.services`` (``"sandbox"`` and ``"kernels"``) and closes them on
shutdown.  Unsupported combinations are user errors, reported once here
rather than as tool failures on every call.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from deerflow.errors import ConfigError
from deerflow.sandbox.bwrap import BwrapSandboxProvider
from deerflow.sandbox.kernel_pool import KernelPool
from deerflow.sandbox.local import LocalSandboxProvider
from deerflow.sandbox.provider import SandboxProvider

if TYPE_CHECKING:
    from deerflow.config.schema import SandboxConfig


def make_provider(config: SandboxConfig, *, skills_dir: Path | None = None) -> SandboxProvider:
    """The provider named by ``sandbox.use``.

    Raises:
        ConfigError: for providers or network modes this build does not run.
    """
    if config.use == "local":
        return LocalSandboxProvider(
            allow_host_bash=config.allow_host_bash,
            command_timeout=config.command_timeout,
            skills_dir=skills_dir,
        )
    if config.use == "bwrap":
        if config.network not in ("isolated", "open"):
            raise ConfigError(
                f"network mode {config.network!r} needs the allowlist proxy, which the bwrap "
                "provider does not have; use 'isolated' or 'open'",
                key="sandbox.network",
            )
        return BwrapSandboxProvider(
            network=config.network,
            command_timeout=config.command_timeout,
            skills_dir=skills_dir,
        )
    raise ConfigError(
        f"sandbox provider {config.use!r} is not available in this build", key="sandbox.use"
    )


def make_kernel_pool(provider: SandboxProvider, config: SandboxConfig) -> KernelPool:
    """A kernel pool for ``provider`` with the configured timeouts."""
    return KernelPool(
        provider,
        default_timeout=config.python_timeout,
        idle_timeout=config.kernel_idle_timeout,
    )

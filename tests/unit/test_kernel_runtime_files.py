"""The host writes a kernel's files only through the runtime directory's descriptor.

In a long-lived container (the docker provider) the sandboxed code sees a kernel's runtime
directory as soon as it exists, before the host has written ``kernel.json`` and ``kernel.log``
into it.  A link raced in at either name must make the start fail with one line, never carry
the host's write to a host file.  The kernel is never actually launched here: the planted link
stops the start first.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.sandbox.execution.provider import KernelRuntime
from deerflow.sandbox.kernels.kernel import KernelStartError, ThreadKernel


class PlantingProvider(LocalSandboxProvider):
    """Hands out runtime directories in which ``name`` is already a link to ``target``."""

    def __init__(self, name: str, target: Path) -> None:
        super().__init__()
        self.plant, self.target = name, target
        self.made: list[Path] = []
        self.stopped = 0

    def kernel_runtime(self, paths: ThreadPaths) -> KernelRuntime:
        runtime = super().kernel_runtime(paths)
        (runtime.path / self.plant).symlink_to(self.target)
        self.made.append(runtime.path)
        return runtime

    def kernel_stopped(self, paths: ThreadPaths) -> None:
        self.stopped += 1


@pytest.mark.parametrize("name", ["kernel.json", "kernel.log"])
def test_a_link_planted_in_the_runtime_directory_fails_the_start_and_writes_nothing_through_it(
        tmp_path: Path, name: str) -> None:
    secret = tmp_path / "host-file"
    secret.write_text("keep me")
    provider = PlantingProvider(name, secret)
    kernel = ThreadKernel(provider, ThreadPaths(tmp_path / "thread").ensure())
    with pytest.raises(KernelStartError) as failed:
        asyncio.run(kernel.start())
    message = str(failed.value)
    assert "tampered" in message and name in message and "\n" not in message
    assert str(tmp_path) not in message
    assert secret.read_text() == "keep me"
    assert not provider.made[0].exists() and provider.stopped == 1  # cleaned up, through no link
    assert secret.exists()

"""The Docker provider: code in the container swaps a kernel's socket for a link to a host socket.

Kernel runtime folders live in the thread's run directory, bound read-write at ``/run/deerflow``,
so code in the container sees a new kernel's ``k-N`` sockets as soon as the kernel binds them.
A link put there names a path the *host* resolves: ZMQ followed it, and the host's requests,
signed with the kernel's key, went to whatever socket that was.  Here a process in the container
waits for the next kernel's shell socket and replaces it with a link to a host "victim" socket;
the victim must hear nothing (the start fails with one line, or, had the host already opened
the real socket, the kernel works).  Skipped without an engine, as test_docker_sandbox.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.kernels.kernel import KernelStartError
from deerflow.sandbox.kernels.kernel_pool import KernelPool
from fixtures.zmq_victim import victim_fixture  # noqa: F401  (registers the fixture)

docker = pytest.importorskip("docker", reason="the docker SDK is not installed (pip install '.[docker]')")
from docker.errors import DockerException, ImageNotFound  # noqa: E402
from requests.exceptions import RequestException  # noqa: E402

from deerflow.sandbox.docker.provider import DockerSandboxProvider  # noqa: E402

IMAGE = os.environ.get("DEERFLOW_TEST_DOCKER_IMAGE", "python:3.11-slim")


def _engine_problem() -> str | None:
    try:
        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
    except ImageNotFound:
        return f"the test image {IMAGE} is not present (see tests/fixtures/docker/build_sandbox_image.sh)"
    except (DockerException, RequestException) as exc:
        return f"no Docker engine reachable (DOCKER_HOST): {type(exc).__name__}"
    return None


PROBLEM = _engine_problem()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")]

# Runs in the container: the first shell socket of a kernel that appears becomes a link to $1.
WATCHER = ("for _ in $(seq 20000); do for s in /run/deerflow/kernels/*/k-1; do "
           "if [ -S \"$s\" ]; then ln -s \"$1\" \"$s.x\" && mv -f \"$s.x\" \"$s\"; exit 0; fi; done; "
           "sleep 0.002; done")


def test_a_kernel_socket_swapped_from_the_container_is_never_connected_through(tmp_path: Path, victim) -> None:
    target, sock = victim
    paths = ThreadPaths(tmp_path / "home" / "users" / "u" / "threads" / "t1").ensure()
    provider = DockerSandboxProvider(image=IMAGE, warm_pool_size=1, command_timeout=30)
    engine = docker.from_env()
    try:
        assert provider.execute(paths, "true").exit_code == 0  # the thread's container is up
        [container] = engine.containers.list(filters={"label": f"deerflow.provider={provider.instance}"})
        container.exec_run(["sh", "-c", WATCHER, "watcher", str(target)], user=provider.user, detach=True)
        with KernelPool(provider) as kernels:
            try:
                cell = kernels.run_sync(paths, "print(6 * 7)")
                outcome = cell.text if cell.error is None else f"{cell.error}: {cell.text}"
            except KernelStartError as exc:
                outcome = str(exc)
    finally:
        provider.close()
    assert sock.poll(1000) == 0, f"the host's request reached the socket the link named ({outcome})"
    assert "42" in outcome or "tampered" in outcome, outcome

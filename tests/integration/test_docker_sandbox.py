"""The Docker provider against a real engine (skipped when none is reachable).

The image defaults to ``python:3.11-slim`` (override with
``DEERFLOW_TEST_DOCKER_IMAGE``); it must already be present, since tests
cannot reach the internet.  The server's interpreter is bound into it
(``python_mode="host"``), so the kernel has ipykernel without installing it.
"""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import SandboxConfig
from deerflow.sandbox.kernel_pool import KernelPool

docker = pytest.importorskip("docker", reason="the docker SDK is not installed (pip install '.[docker]')")
from docker.errors import DockerException, ImageNotFound  # noqa: E402
from requests.exceptions import RequestException  # noqa: E402

from deerflow.sandbox.docker_provider import DockerSandboxProvider  # noqa: E402
from deerflow.sandbox.factory import make_egress_proxy  # noqa: E402

IMAGE = os.environ.get("DEERFLOW_TEST_DOCKER_IMAGE", "python:3.11-slim")


def _engine_problem() -> str | None:
    try:
        client = docker.from_env()
        client.ping()
    except (DockerException, RequestException):
        return "no Docker engine reachable"
    try:
        client.images.get(IMAGE)
    except ImageNotFound:
        return f"the test image {IMAGE} is not present (tests cannot pull)"
    return None


PROBLEM = _engine_problem()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")]


@pytest.fixture
def paths(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "home" / "users" / "u" / "threads" / "t1").ensure()


@pytest.fixture
def provider() -> Iterator[DockerSandboxProvider]:
    sandbox = DockerSandboxProvider(image=IMAGE, warm_pool_size=1, command_timeout=30)
    yield sandbox
    sandbox.close()


@pytest.fixture
def host_server() -> Iterator[int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"outside-page"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_files_written_in_the_container_appear_in_the_thread(provider: DockerSandboxProvider,
                                                             paths: ThreadPaths) -> None:
    (paths.uploads / "data.csv").write_text("a,b\n")
    result = provider.execute(paths, "pwd; id -u; echo draft > notes.txt; echo final > "
                              "/mnt/user-data/outputs/report.md; echo x >> /mnt/user-data/uploads/data.csv")
    assert result.output.splitlines()[:2] == ["/mnt/user-data/workspace", str(os.getuid())]
    assert "Read-only file system" in result.output
    assert (paths.workspace / "notes.txt").read_text() == "draft\n"
    assert (paths.outputs / "report.md").read_text() == "final\n"
    assert (paths.uploads / "data.csv").read_text() == "a,b\n"


def test_the_container_is_reused_by_its_thread(provider: DockerSandboxProvider, paths: ThreadPaths) -> None:
    first = provider.execute(paths, "hostname; cat /proc/1/cgroup | tail -1")
    second = provider.execute(paths, "hostname; cat /proc/1/cgroup | tail -1")
    assert first.output == second.output
    assert len(provider.containers()) == 1


def test_isolated_containers_cannot_reach_the_host(provider: DockerSandboxProvider, paths: ThreadPaths,
                                                   host_server: int) -> None:
    fetch = f"python -c \"import urllib.request; urllib.request.urlopen('http://172.17.0.1:{host_server}', timeout=3)\""
    result = provider.execute(paths, fetch)
    assert result.exit_code != 0 and "outside-page" not in result.output


def test_a_timeout_kills_the_command_and_what_it_started(provider: DockerSandboxProvider,
                                                         paths: ThreadPaths) -> None:
    result = provider.execute(paths, "sleep 300 & sleep 300", timeout=2)
    assert result.timed_out
    # Exactly `sleep 300`: the container's keep-alive loop runs `sleep 3600`, and this very
    # command's shell (and its supervisor) have "sleep 300" inside a longer command line.
    left = provider.execute(paths, "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null"
                            " | grep -x 'sleep 300 ' || true")
    assert left.output.strip() == ""


def test_the_python_kernel_runs_in_the_container(provider: DockerSandboxProvider, paths: ThreadPaths) -> None:
    with KernelPool(provider) as kernels:
        cell = kernels.run_sync(paths, "import os\nopen('k.txt', 'w').write('from kernel')\nos.getcwd()")
    assert cell.error is None and "/mnt/user-data/workspace" in cell.text
    assert (paths.workspace / "k.txt").read_text() == "from kernel"
    assert (paths.workspace / "agent.ipynb").exists()


def test_allowlist_containers_go_out_through_the_proxy(paths: ThreadPaths, host_server: int) -> None:
    egress = make_egress_proxy(SandboxConfig(network="allowlist", allowed_hosts=["allowed.test"],
                                             egress_hosts={"allowed.test": "127.0.0.1"}))
    sandbox = DockerSandboxProvider(image=IMAGE, network="allowlist", egress=egress)
    try:
        from deerflow.sandbox.network_policy import CallScope

        with egress.scope(paths.root, CallScope("run-1", True)) as handle:
            result = sandbox.execute(paths, "python -c \"import urllib.request; print(urllib.request.urlopen("
                                     f"'http://allowed.test:{host_server}/', timeout=5).read().decode())\"")
    finally:
        sandbox.close()
    assert "outside-page" in result.output, result.output
    assert handle.report.targets("allowed") == [f"allowed.test:{host_server}"]

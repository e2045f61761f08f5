"""The Docker provider against a real engine (skipped, with the reason, when none is reachable).

The engine is the one the environment names (``DOCKER_HOST``).  The image
defaults to ``python:3.11-slim`` (override with ``DEERFLOW_TEST_DOCKER_IMAGE``);
it must already be present, since tests cannot pull.  Without a registry:

    tests/fixtures/docker/start_dockerd.sh /tmp/deerflow-dockerd
    export DOCKER_HOST=unix:///tmp/deerflow-dockerd/docker.sock
    tests/fixtures/docker/build_sandbox_image.sh deerflow-sandbox:test
    export DEERFLOW_TEST_DOCKER_IMAGE=deerflow-sandbox:test

(``.ci/run`` does this.)  The server's interpreter is bound into the image
(``python_mode="host"``), so the kernel has ipykernel without installing it;
the ``image`` mode test needs ``python3`` with ipykernel in the image.

The "outside" is an HTTP server on the host's address on the engine's default
bridge: what an ``open`` container reaches, and an ``isolated`` one must not.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import SandboxConfig
from deerflow.errors import ToolFailure
from deerflow.sandbox.kernels.kernel_pool import KernelPool
from deerflow.sandbox.network.policy import CallScope
from fixtures.web_server import serve, text

docker = pytest.importorskip("docker", reason="the docker SDK is not installed (pip install '.[docker]')")
from docker.errors import ContainerError, DockerException, ImageNotFound, NotFound  # noqa: E402
from requests.exceptions import RequestException  # noqa: E402

from deerflow.sandbox.docker import exec_shim as docker_exec  # noqa: E402
from deerflow.sandbox.docker.provider import DockerSandboxProvider  # noqa: E402
from deerflow.sandbox.factory import make_egress_proxy, make_provider  # noqa: E402

IMAGE = os.environ.get("DEERFLOW_TEST_DOCKER_IMAGE", "python:3.11-slim")
FETCH = "python -c \"import urllib.request; print(urllib.request.urlopen('http://{host}:{port}/', timeout=3).read().decode())\""


def _engine_problem() -> str | None:
    where = os.environ.get("DOCKER_HOST") or "the default socket (set DOCKER_HOST)"
    try:
        client = docker.from_env()
        client.ping()
    except (DockerException, RequestException) as exc:
        return f"no Docker engine reachable at {where}: {type(exc).__name__}"
    try:
        client.images.get(IMAGE)
    except ImageNotFound:
        return (f"the test image {IMAGE} is not present (tests cannot pull; build one with "
                "tests/fixtures/docker/build_sandbox_image.sh and set DEERFLOW_TEST_DOCKER_IMAGE)")
    return None


PROBLEM = _engine_problem()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")]


@pytest.fixture(scope="module")
def engine() -> Any:
    return docker.from_env()


@pytest.fixture
def paths(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "home" / "users" / "u" / "threads" / "t1").ensure()


@pytest.fixture
def provider() -> Iterator[DockerSandboxProvider]:
    sandbox = DockerSandboxProvider(image=IMAGE, warm_pool_size=1, command_timeout=30)
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="module")
def gateway(engine: Any) -> str:
    """The host's address on the default bridge (what a bridged container routes to)."""
    try:
        config = engine.networks.get("bridge").attrs["IPAM"]["Config"][0]
    except (NotFound, LookupError):
        pytest.skip("the engine has no default bridge network")
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


@pytest.fixture
def host_server(gateway: str) -> Iterator[int]:
    """An HTTP server on the host's bridge address answering ``outside-page``; its port."""
    with ExitStack() as stack:
        try:
            web = stack.enter_context(serve({"/": text("outside-page")}, host=gateway))
        except OSError as exc:  # the engine is not on this host
            pytest.skip(f"cannot listen on the bridge address {gateway}: {exc}")
        yield web.port


def _engine_containers(engine: Any, sandbox: DockerSandboxProvider) -> list[Any]:
    """The provider's containers as the engine lists them (running or not)."""
    return engine.containers.list(all=True, filters={"label": f"deerflow.provider={sandbox.instance}"})


# -- files, reuse, output -----------------------------------------------------------------


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


def test_stdout_and_stderr_arrive_in_the_order_they_were_written(provider: DockerSandboxProvider,
                                                                  paths: ThreadPaths) -> None:
    result = provider.execute(paths, "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done; exit 3")
    assert result.output == "".join(f"out{i}\nerr{i}\n" for i in range(1, 6))
    assert result.exit_code == 3


@pytest.mark.parametrize("client", ["plain", "sdk"])
def test_the_exec_shim_relays_output_and_status_with_either_client(
    provider: DockerSandboxProvider, paths: ThreadPaths, client: str, monkeypatch: pytest.MonkeyPatch,
    capfdbinary: pytest.CaptureFixture[bytes],
) -> None:
    container = provider.acquire(paths, lease=False).container
    if client == "sdk":  # what TLS or ssh engines use
        monkeypatch.setattr(docker_exec.PlainEngine, "from_env", classmethod(lambda cls, env=None: None))
    code = docker_exec.main(["--container", container.id, "--workdir", "/tmp", "--",
                             "sh", "-c", "pwd; echo oops >&2; head -c 100000 /dev/zero | tr '\\0' x; exit 4"])
    out, err = capfdbinary.readouterr()
    assert (code, out, err) == (4, b"/tmp\n" + b"x" * 100000, b"oops\n")


def test_the_container_is_reused_by_its_thread(provider: DockerSandboxProvider, paths: ThreadPaths) -> None:
    first = provider.execute(paths, "hostname; cat /proc/1/cgroup | tail -1")
    second = provider.execute(paths, "hostname; cat /proc/1/cgroup | tail -1")
    assert first.output == second.output
    assert len(provider.containers()) == 1


def test_the_root_filesystem_is_read_only_and_capabilities_are_dropped(provider: DockerSandboxProvider,
                                                                        paths: ThreadPaths) -> None:
    result = provider.execute(paths, "touch /etc/x 2>&1; touch /tmp/x && echo tmp-ok; grep CapEff /proc/self/status")
    assert "Read-only file system" in result.output and "tmp-ok" in result.output
    assert "CapEff:\t0000000000000000" in result.output


def test_a_timeout_kills_the_command_and_what_it_started(provider: DockerSandboxProvider,
                                                         paths: ThreadPaths) -> None:
    result = provider.execute(paths, "sleep 300 & sleep 300", timeout=2)
    assert result.timed_out
    # Exactly `sleep 300`: the container's keep-alive loop runs `sleep 3600`, and this very
    # command's shell (and its supervisor) have "sleep 300" inside a longer command line.
    left = provider.execute(paths, "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null"
                            " | grep -x 'sleep 300 ' || true")
    assert left.output.strip() == ""


# -- kernels ------------------------------------------------------------------------------


def test_the_python_kernel_runs_in_the_container(provider: DockerSandboxProvider, paths: ThreadPaths) -> None:
    with KernelPool(provider) as kernels:
        cell = kernels.run_sync(paths, "import os\nopen('k.txt', 'w').write('from kernel')\nos.getcwd()")
    assert cell.error is None and "/mnt/user-data/workspace" in cell.text
    assert (paths.workspace / "k.txt").read_text() == "from kernel"
    assert (paths.workspace / "agent.ipynb").exists()


def test_a_runaway_cell_is_interrupted_or_its_kernel_replaced_in_the_container(
    provider: DockerSandboxProvider, paths: ThreadPaths
) -> None:
    kernels_alive = ("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null"
                     " | grep -c '^[^ ]*python[^ ]* -m ipykernel_launcher' || true")
    with KernelPool(provider) as kernels:
        kernels.run_sync(paths, "x = 41")
        slow = kernels.run_sync(paths, "import time\ntime.sleep(60)", timeout=2)
        kept = kernels.run_sync(paths, "x + 1")
        stubborn = kernels.run_sync(paths, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                    "while True: time.sleep(0.1)", timeout=2)
        fresh = kernels.run_sync(paths, "'x' in dir()")
        alive = provider.execute(paths, kernels_alive).output.strip()
    assert slow.recovery == "interrupted" and kept.text.strip() == "42"
    assert stubborn.recovery == "restarted" and fresh.text.strip() == "False"
    assert alive == "1"  # the replaced kernel is gone from the container, not just from the host


def test_in_image_mode_the_kernel_is_the_images_python(engine: Any, paths: ThreadPaths) -> None:
    try:
        engine.containers.run(IMAGE, ["python3", "-c", "import ipykernel"], remove=True, network_mode="none")
    except ContainerError:
        pytest.skip(f"the test image {IMAGE} has no python3 with ipykernel")
    sandbox = make_provider(SandboxConfig(use="docker", image=IMAGE, docker_python="image"))
    try:
        with KernelPool(sandbox) as kernels:
            cell = kernels.run_sync(paths, "import sys\nprint(sys.executable)")
    finally:
        sandbox.close()
    assert cell.error is None and "/opt/deerflow" not in cell.text and "python" in cell.text


# -- network ------------------------------------------------------------------------------


def test_isolated_containers_cannot_reach_the_host(provider: DockerSandboxProvider, paths: ThreadPaths,
                                                   gateway: str, host_server: int) -> None:
    result = provider.execute(paths, FETCH.format(host=gateway, port=host_server))
    assert result.exit_code != 0 and "outside-page" not in result.output


def test_open_containers_are_on_the_bridge(paths: ThreadPaths, gateway: str, host_server: int) -> None:
    sandbox = DockerSandboxProvider(image=IMAGE, network="open")
    try:
        result = sandbox.execute(paths, FETCH.format(host=gateway, port=host_server))
    finally:
        sandbox.close()
    assert result.exit_code == 0 and "outside-page" in result.output, result.output


def test_allowlist_containers_go_out_through_the_proxy(paths: ThreadPaths, gateway: str, host_server: int) -> None:
    egress = make_egress_proxy(SandboxConfig(network="allowlist", allowed_hosts=["allowed.test"],
                                             egress_hosts={"allowed.test": gateway, "other.test": gateway}))
    sandbox = DockerSandboxProvider(image=IMAGE, network="allowlist", egress=egress)
    try:
        with egress.scope(paths.root, CallScope("run-1", True)) as allowed:
            command = sandbox.execute(paths, FETCH.format(host="allowed.test", port=host_server))
            with KernelPool(sandbox) as kernels:
                cell = kernels.run_sync(paths, "import urllib.request\nurllib.request.urlopen("
                                        f"'http://allowed.test:{host_server}/', timeout=5).read()")
        direct = sandbox.execute(paths, FETCH.format(host=gateway, port=host_server).replace(
            "urllib.request.urlopen", "urllib.request.build_opener(urllib.request.ProxyHandler({})).open"))
        with egress.scope(paths.root, CallScope("run-1", False, "unattended")) as denied:
            other = sandbox.execute(paths, FETCH.format(host="other.test", port=host_server))
    finally:
        sandbox.close()
    assert "outside-page" in command.output, command.output
    assert cell.error is None and "outside-page" in cell.text
    assert allowed.report.targets("allowed") == [f"allowed.test:{host_server}"]
    assert direct.exit_code != 0 and "outside-page" not in direct.output
    assert other.exit_code != 0 and "outside-page" not in other.output
    assert denied.report.targets("denied") == [f"other.test:{host_server}"]


# -- limits and the pool ------------------------------------------------------------------


def test_configured_limits_bind_the_container(engine: Any, paths: ThreadPaths) -> None:
    sandbox = make_provider(SandboxConfig(use="docker", image=IMAGE, memory_limit="128m", cpu_limit=0.5,
                                          pids_limit=64, warm_pool_size=1))
    spawn = ("python -c \"import subprocess\nprocs = []\ntry:\n    for _ in range(200): "
             "procs.append(subprocess.Popen(['sleep', '30']))\nexcept OSError:\n    print('refused', len(procs))\n"
             "for p in procs: p.kill()\"")
    try:
        hog = sandbox.execute(paths, "python -c \"b = bytearray(512 * 2**20); b[::4096] = b'x' * len(b[::4096])\"")
        forks = sandbox.execute(paths, spawn)
        (container,) = _engine_containers(engine, sandbox)
        host_config = container.attrs["HostConfig"]
    finally:
        sandbox.close()
    assert hog.exit_code == 137, hog.output  # SIGKILL from the memory cgroup
    assert forks.output.startswith("refused"), forks.output
    assert int(forks.output.split()[1]) < 64
    assert (host_config["Memory"], host_config["MemorySwap"]) == (128 * 2**20, 128 * 2**20)
    assert (host_config["NanoCpus"], host_config["PidsLimit"]) == (500_000_000, 64)


def test_idle_containers_beyond_the_warm_pool_are_removed(engine: Any, tmp_path: Path) -> None:
    threads = [ThreadPaths(tmp_path / "users" / "u" / "threads" / name).ensure() for name in ("a", "b")]
    pooled = DockerSandboxProvider(image=IMAGE, warm_pool_size=1)
    unpooled = DockerSandboxProvider(image=IMAGE, warm_pool_size=0)
    try:
        for thread in threads:
            pooled.execute(thread, "true")
        (kept,) = _engine_containers(engine, pooled)
        unpooled.execute(threads[0], "true")
        left_unpooled = _engine_containers(engine, unpooled)
    finally:
        pooled.close()
        unpooled.close()
    assert kept.labels["deerflow.thread"] == pooled._key_hash(threads[1]) and kept.status == "running"
    assert left_unpooled == []
    assert _engine_containers(engine, pooled) == []


def test_without_a_warm_pool_the_container_goes_when_its_kernel_stops(engine: Any, paths: ThreadPaths) -> None:
    sandbox = DockerSandboxProvider(image=IMAGE, warm_pool_size=0)
    try:
        with KernelPool(sandbox) as kernels:
            assert kernels.run_sync(paths, "print(6 * 7)").text.strip() == "42"
            running = _engine_containers(engine, sandbox)
            kernels.shutdown_thread(paths)
            assert len(running) == 1 and _engine_containers(engine, sandbox) == []
    finally:
        sandbox.close()


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_link_planted_at_kernels_never_takes_a_kernel_folder_to_the_host(
        provider: DockerSandboxProvider, paths: ThreadPaths, tmp_path: Path) -> None:
    """The run directory is bound read-write at /run/deerflow: code in the container replaces
    ``kernels`` with a link to a host folder (its host path, which the host would resolve) before a
    kernel starts, and again from a kernel's own cell before the next one.  The host must create
    no folder and write no connection file or log there; the kernel starts anyway."""
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep.txt").write_text("untouched")
    os.utime(canary, ns=(10**9, 10**9))  # any entry made or removed there since shows as a new mtime
    plant = f"mv /run/deerflow/kernels /run/deerflow/kernels.aside && ln -s {canary} /run/deerflow/kernels"
    assert provider.execute(paths, plant).exit_code == 0
    with KernelPool(provider) as kernels:
        try:
            first = kernels.run_sync(paths, "print(6 * 7)")
        finally:  # checked first: the old code made its folder there (removed again when the kernel failed)
            assert _listing(canary) == ["keep.txt"] and canary.stat().st_mtime_ns == 10**9
        assert first.error is None and first.text.strip() == "42", first.text
        replant = kernels.run_sync(paths, f"import subprocess\nsubprocess.run({plant!r}.replace('.aside', '.aside2'), "
                                          "shell=True, check=True)")
        assert replant.error is None, replant.text
        kernels.shutdown_thread(paths)
        second = kernels.run_sync(paths, "print(7 * 6)")
        assert second.error is None and second.text.strip() == "42", second.text
    assert _listing(canary) == ["keep.txt"] and (canary / "keep.txt").read_text() == "untouched"
    assert canary.stat().st_mtime_ns == 10**9


# -- the mounts are the folders the host checked --------------------------------------------


def test_a_folder_swapped_and_back_during_the_create_is_caught_in_the_container(
        provider: DockerSandboxProvider, paths: ThreadPaths, tmp_path: Path, engine: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine binds by path: the outputs folder is swapped for a link to a host folder while the
    container is created and swapped back right after, so the host path names the checked folder
    again; ``stat`` inside the container still shows the host folder mounted, and nothing runs."""
    host = tmp_path / "host-secrets"
    host.mkdir()
    (host / "key").write_text("secret")
    collection = type(provider.client.containers)  # the SDK makes a new collection at each access
    create = collection.run

    def racing_create(self: Any, **kwargs: Any) -> Any:
        paths.outputs.rename(paths.outputs.with_name("outputs.aside"))
        paths.outputs.symlink_to(host, target_is_directory=True)
        try:
            return create(self, **kwargs)
        finally:
            paths.outputs.unlink()
            paths.outputs.with_name("outputs.aside").rename(paths.outputs)

    monkeypatch.setattr(collection, "run", racing_create)
    with pytest.raises(ToolFailure) as refused:
        provider.execute(paths, "cat /mnt/user-data/outputs/key; echo pwned > /mnt/user-data/outputs/key")
    assert refused.value.code == "unsafe_mount" and "/mnt/user-data/outputs" in refused.value.message
    assert (host / "key").read_text() == "secret"
    assert _engine_containers(engine, provider) == []  # the container was removed
    monkeypatch.setattr(collection, "run", create)
    result = provider.execute(paths, "echo ok > /mnt/user-data/outputs/r.txt; cat /mnt/user-data/outputs/r.txt")
    assert result.output == "ok\n"

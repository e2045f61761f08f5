"""The Docker provider without an engine: the container spec it builds and how it pools containers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from docker.errors import NotFound

from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import SandboxConfig
from deerflow.errors import ConfigError
from deerflow.sandbox.docker import provider as docker_provider
from deerflow.sandbox.docker.provider import DockerSandboxProvider
from deerflow.sandbox.docker.spec import Limits
from deerflow.sandbox.execution.mount_fds import STAT_FORMAT
from deerflow.sandbox.execution.process import ExecResult
from deerflow.sandbox.factory import make_provider
from deerflow.threadfs import UnsafePath


class FakeContainer:
    """A started container: its bind sources resolved by path at the create, as the engine does;
    ``stat`` inside it reports those folders (the provider's mount check), other execs are recorded."""

    def __init__(self, number: int, kwargs: dict[str, Any]) -> None:
        self.id = f"container-{number}"
        self.kwargs = kwargs
        self.status = "running"
        self.exec_calls: list[list[str]] = []
        self.mounted = {m["Target"]: os.stat(m["Source"]) for m in kwargs["mounts"]}

    def reload(self) -> None:
        if self.status == "removed":
            raise NotFound("no such container")

    def remove(self, force: bool = False) -> None:
        assert force
        self.status = "removed"

    def exec_run(self, cmd: list[str], user: str | None = None) -> SimpleNamespace:
        if cmd[:3] == ["stat", "-c", STAT_FORMAT]:
            lines = [f"{t} {self.mounted[t].st_dev} {self.mounted[t].st_ino}" for t in cmd[3:]]
            return SimpleNamespace(exit_code=0, output="".join(f"{line}\n" for line in lines).encode())
        self.exec_calls.append(cmd)
        return SimpleNamespace(exit_code=0, output=b"")


class FakeContainers:
    def __init__(self) -> None:
        self.started: list[FakeContainer] = []

    def run(self, **kwargs: Any) -> FakeContainer:
        container = FakeContainer(len(self.started), kwargs)
        self.started.append(container)
        return container


class FakeClient:
    def __init__(self) -> None:
        self.containers = FakeContainers()


@pytest.fixture
def client() -> FakeClient:
    return FakeClient()


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    path = tmp_path / "skills"
    path.mkdir()
    return path


def _provider(client: FakeClient, skills: Path | None = None, **options: Any) -> DockerSandboxProvider:
    return DockerSandboxProvider(client=client, skills_dir=skills, **options)


@pytest.fixture
def provider(client: FakeClient, skills: Path) -> Iterator[DockerSandboxProvider]:
    sandbox = _provider(client, skills)
    yield sandbox
    sandbox.close()


def _thread(tmp_path: Path, name: str = "t1") -> ThreadPaths:
    return ThreadPaths(tmp_path / "home" / "users" / "u" / "threads" / name).ensure()


def test_thread_directories_are_mounted_at_their_virtual_paths_with_file_tool_access(
    provider: DockerSandboxProvider, tmp_path: Path, skills: Path
) -> None:
    paths = _thread(tmp_path)
    paths.acp_workspace.mkdir()
    spec = provider.container_spec(paths)
    expected = {
        "/mnt/user-data/uploads": (paths.uploads, True),
        "/mnt/user-data/workspace": (paths.workspace, False),
        "/mnt/user-data/outputs": (paths.outputs, False),
        "/mnt/skills": (skills, True),
        "/mnt/acp-workspace": (paths.acp_workspace, True),
    }
    for target, (source, read_only) in expected.items():
        mount = spec.mount_at(target)
        assert mount is not None, target
        assert (Path(mount.source), mount.read_only) == (source, read_only), target
    writable = {m.target for m in spec.mounts if not m.read_only}
    assert writable == {"/mnt/user-data/workspace", "/mnt/user-data/outputs", "/run/deerflow"}
    sources = [Path(m.source) for m in spec.mounts]
    assert paths.root not in sources and paths.user_data not in sources  # nothing wider than needed
    assert spec.run_kwargs()["mounts"][0] == {"Target": "/mnt/user-data/uploads", "Source": str(paths.uploads),
                                              "Type": "bind", "ReadOnly": True}


def test_the_container_runs_hardened_as_the_server_user_in_the_workspace(
    provider: DockerSandboxProvider, tmp_path: Path
) -> None:
    kwargs = provider.container_spec(_thread(tmp_path)).run_kwargs()
    assert kwargs["user"] == f"{os.getuid()}:{os.getgid()}"
    assert kwargs["working_dir"] == "/mnt/user-data/workspace"
    assert kwargs["read_only"] is True and set(kwargs["tmpfs"]) == {"/tmp"}
    assert kwargs["cap_drop"] == ["ALL"] and kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["init"] is True and kwargs["detach"] is True
    assert kwargs["image"] == "python:3.11-slim"


@pytest.mark.parametrize(("mode", "docker_network"), [("isolated", "none"), ("open", "bridge"), ("allowlist", "none")])
def test_network_modes_map_to_docker_networks(client: FakeClient, tmp_path: Path, mode: str, docker_network: str) -> None:
    sandbox = _provider(client, network=mode)
    try:
        spec = sandbox.container_spec(_thread(tmp_path))
    finally:
        sandbox.close()
    assert spec.network_mode == docker_network
    assert (spec.mount_at("/run/egress") is not None) == (mode == "allowlist")
    assert ("HTTPS_PROXY" in spec.environment) == (mode == "allowlist")


def test_allowlist_mode_reaches_out_only_through_the_threads_proxy_socket(client: FakeClient, tmp_path: Path) -> None:
    sandbox = _provider(client, network="allowlist")
    try:
        paths = _thread(tmp_path)
        spec = sandbox.container_spec(paths)
        egress = spec.mount_at("/run/egress")
        assert egress is not None and egress.read_only
        assert (Path(egress.source) / "proxy.sock").exists()
        assert spec.environment["HTTPS_PROXY"] == spec.environment["http_proxy"] == "http://127.0.0.1:3128"
        other = sandbox.container_spec(_thread(tmp_path, "t2")).mount_at("/run/egress")
        assert other is not None and other.source != egress.source  # one socket per thread
    finally:
        sandbox.close()


def test_resource_limits_come_from_the_config(client: FakeClient, tmp_path: Path) -> None:
    sandbox = _provider(client, limits=Limits(memory="2g", cpus=1.5, pids=128))
    try:
        kwargs = sandbox.container_spec(_thread(tmp_path)).run_kwargs()
    finally:
        sandbox.close()
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == "2g"
    assert kwargs["nano_cpus"] == 1_500_000_000
    assert kwargs["pids_limit"] == 128
    unlimited = DockerSandboxProvider(client=client, limits=Limits(pids=None))
    try:
        assert not {"mem_limit", "nano_cpus", "pids_limit"} & set(unlimited.container_spec(_thread(tmp_path)).run_kwargs())
    finally:
        unlimited.close()


def test_server_secrets_never_reach_the_container_environment(
    provider: DockerSandboxProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("HARMLESS_SETTING", "also-not-passed")
    env = provider.container_spec(_thread(tmp_path)).environment
    assert "sk-do-not-leak" not in env.values() and "also-not-passed" not in env.values()
    assert set(env) == {"PATH", "HOME", "LANG", "TERM", "PYDEVD_DISABLE_FILE_VALIDATION", "LD_LIBRARY_PATH"}
    assert env["PATH"].startswith("/opt/deerflow/venv/bin:")
    assert "OPENAI_API_KEY" not in provider.command_launch(_thread(tmp_path), "true").env


def test_the_server_python_is_bound_read_only_unless_the_image_brings_its_own(
    provider: DockerSandboxProvider, client: FakeClient, tmp_path: Path
) -> None:
    spec = provider.container_spec(_thread(tmp_path))
    python = spec.mount_at("/opt/deerflow/python")
    assert python is not None and python.read_only
    image_mode = _provider(client, python_mode="image")
    try:
        own = image_mode.container_spec(_thread(tmp_path, "t2"))
        launch = image_mode.command_launch(_thread(tmp_path, "t2"), "true")
    finally:
        image_mode.close()
    assert own.mount_at("/opt/deerflow/python") is None and "LD_LIBRARY_PATH" not in own.environment
    assert launch.argv[launch.argv.index("--") + 1] == "python3"


def test_commands_run_supervised_through_the_exec_shim(provider: DockerSandboxProvider, tmp_path: Path) -> None:
    argv = provider.command_launch(_thread(tmp_path), "echo hi").argv
    assert argv[1:6] == ["-m", "deerflow.sandbox.docker.exec_shim", "--container", "container-0", "--workdir"]
    inner = argv[argv.index("--") + 1:]
    assert inner[1:4] == ["-I", "-S", "/opt/deerflow/supervisor.py"] and "--watch-stdin" in inner
    assert inner[inner.index("--pidfile") + 1].startswith("/run/deerflow/exec/")
    assert inner[-3:] == ["/bin/bash", "-c", "echo hi"]
    assert inner[-7:-3] == ["/bin/sh", "-c", 'exec "$@" 2>&1', "sh"]  # stderr merged in order, inside
    assert "--relay" not in inner


def test_a_container_is_reused_only_by_its_own_thread(provider: DockerSandboxProvider, client: FakeClient,
                                                      tmp_path: Path) -> None:
    provider.warm_pool_size = 2
    first, second = _thread(tmp_path, "t1"), _thread(tmp_path, "t2")
    slot = provider.acquire(first, lease=True)
    provider.release(slot)
    assert provider.acquire(first, lease=False).container is slot.container
    assert provider.acquire(second, lease=False).container is not slot.container
    assert len(client.containers.started) == 2
    labels = [c.kwargs["labels"]["deerflow.thread"] for c in client.containers.started]
    assert len(set(labels)) == 2


def test_idle_containers_beyond_the_warm_pool_are_removed_oldest_first(
    provider: DockerSandboxProvider, client: FakeClient, tmp_path: Path
) -> None:
    provider.warm_pool_size = 1
    slots = [provider.acquire(_thread(tmp_path, f"t{i}"), lease=True) for i in range(3)]
    assert all(c.status == "running" for c in client.containers.started)  # busy: never removed
    for slot in slots:
        provider.release(slot)
    assert [c.status for c in client.containers.started] == ["removed", "removed", "running"]


def test_without_a_warm_pool_a_container_lives_as_long_as_something_runs_in_it(
    provider: DockerSandboxProvider, client: FakeClient, tmp_path: Path
) -> None:
    paths = _thread(tmp_path)
    runtime = provider.kernel_runtime(paths)
    kernel_dir = runtime.path
    assert kernel_dir.parent == provider.run_dir(paths) / "kernels"
    launch = provider.kernel_launch(paths, kernel_dir)
    assert launch.runtime_view == f"/run/deerflow/kernels/{kernel_dir.name}"
    slot = provider.acquire(paths, lease=True)
    provider.release(slot)
    (container,) = client.containers.started
    assert container.status == "running"  # the kernel keeps it
    runtime.remove()  # what ThreadKernel.shutdown does
    provider.release(provider.acquire(paths, lease=True))
    assert container.status == "removed"


def test_a_container_whose_spec_changed_is_recreated_once_idle(
    provider: DockerSandboxProvider, client: FakeClient, tmp_path: Path
) -> None:
    provider.warm_pool_size = 1
    paths = _thread(tmp_path)
    provider.release(provider.acquire(paths, lease=True))
    paths.acp_workspace.mkdir()  # a new mount appears
    provider.acquire(paths, lease=False)
    old, new = client.containers.started
    assert old.status == "removed" and new.status == "running"
    assert any(m["Target"] == "/mnt/acp-workspace" for m in new.kwargs["mounts"])


def test_a_timed_out_command_has_its_process_group_killed_inside_the_container(
    provider: DockerSandboxProvider, client: FakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _thread(tmp_path)

    def hanging_command(argv: list[str], **_: object) -> ExecResult:
        view = argv[argv.index("--pidfile") + 1]
        host = provider.run_dir(paths) / "exec" / Path(view).name
        host.write_text("4242")  # what the in-container supervisor records
        return ExecResult(output="", exit_code=None, timed_out=True)

    monkeypatch.setattr(docker_provider, "run_command", hanging_command)
    result = provider.execute(paths, "sleep 999", timeout=1)
    assert result.timed_out
    (container,) = client.containers.started
    (kill,) = container.exec_calls
    assert "killpg" in kill[-2] and kill[-1] == "4242"
    assert container.status == "removed"  # the lease ended; no warm pool
    assert not any((provider.run_dir(paths) / "exec").iterdir())


def test_close_removes_every_container(client: FakeClient, tmp_path: Path) -> None:
    sandbox = _provider(client, warm_pool_size=5)
    for name in ("a", "b"):
        sandbox.release(sandbox.acquire(_thread(tmp_path, name), lease=True))
    sandbox.close()
    assert [c.status for c in client.containers.started] == ["removed", "removed"]


def test_the_docker_provider_without_an_engine_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(ConfigError, match="no Docker engine reachable") as raised:
        make_provider(SandboxConfig(use="docker"))
    assert raised.value.key == "sandbox.use"


# -- the run directory is the container's to change ----------------------------------------


def _plant_kernels_link(provider: DockerSandboxProvider, paths: ThreadPaths, target: Path) -> Path:
    """What code in the container can do: ``kernels`` (bound at /run/deerflow) becomes a link."""
    kernels = provider.run_dir(paths) / "kernels"
    kernels.rename(kernels.with_name("kernels.aside"))
    kernels.symlink_to(target, target_is_directory=True)
    return kernels


def test_a_link_at_kernels_is_replaced_by_a_folder_before_a_kernel_directory_is_made(
    provider: DockerSandboxProvider, tmp_path: Path
) -> None:
    paths = _thread(tmp_path)
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "k-planted").mkdir()  # a listing through the link would make the container look busy
    slot = provider.acquire(paths, lease=False)
    kernels = _plant_kernels_link(provider, paths, canary)
    assert not slot.busy
    runtime = provider.kernel_runtime(paths)
    with runtime.open() as folder:
        folder.create_exclusive("kernel.json", b"{}")
    assert not kernels.is_symlink() and runtime.path.parent == kernels
    assert (runtime.path / "kernel.json").read_bytes() == b"{}"
    assert sorted(p.name for p in canary.iterdir()) == ["k-planted"]
    runtime.remove()
    assert not runtime.path.exists() and (canary / "k-planted").is_dir()


def test_a_link_raced_in_at_kernels_after_the_check_fails_the_kernel_directory_and_follows_nothing(
    provider: DockerSandboxProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _thread(tmp_path)
    canary = tmp_path / "canary"
    canary.mkdir()
    acquire = provider.acquire

    def acquire_then_plant(p: ThreadPaths, *, lease: bool) -> Any:
        slot = acquire(p, lease=lease)
        _plant_kernels_link(provider, p, canary)
        return slot

    monkeypatch.setattr(provider, "acquire", acquire_then_plant)
    with pytest.raises(UnsafePath) as refused:
        provider.kernel_runtime(paths)
    assert refused.value.code == "symlink" and str(tmp_path) not in str(refused.value)
    assert list(canary.iterdir()) == []

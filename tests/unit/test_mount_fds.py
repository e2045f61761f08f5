"""Thread mount folders held by descriptor (mount_fds) and the Docker provider's check around create.

The Docker engine cannot be reached here: a stand-in client plays it, and the race (a folder swapped
for a link while the container is created) is played inside its ``containers.run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.sandbox.docker.provider import DockerSandboxProvider
from deerflow.sandbox.execution.mount_fds import open_mounts
from deerflow.sandbox.files.virtual_paths import VirtualFS


@pytest.fixture
def paths(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "threads" / "t1").ensure()


def _swap_for_link(folder: Path, target: Path) -> None:
    folder.rename(folder.with_name(folder.name + ".aside"))
    folder.symlink_to(target, target_is_directory=True)


def test_bwrap_args_bind_each_existing_mount_by_descriptor(paths: ThreadPaths) -> None:
    with open_mounts(paths, VirtualFS(paths).mounts) as held:
        args = held.bwrap_args()
        fds = held.fds
    assert [str(m.virtual) for m in held.mounts] == []  # closed: nothing held any more
    assert args == [
        "--ro-bind-fd", str(fds[0]), "/mnt/user-data/uploads",
        "--bind-fd", str(fds[1]), "/mnt/user-data/workspace",
        "--bind-fd", str(fds[2]), "/mnt/user-data/outputs",
    ]  # fmt: skip  (no acp-workspace folder: left out, as before)


def test_moved_names_a_folder_swapped_after_it_was_opened(paths: ThreadPaths, tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    with open_mounts(paths, VirtualFS(paths).mounts) as held:
        assert held.moved(paths) is None
        _swap_for_link(paths.outputs, host)
        assert held.moved(paths) == "/mnt/user-data/outputs"


class _Container:
    def __init__(self) -> None:
        self.removed = False
        self.id = "c1"

    def remove(self, *, force: bool = False) -> None:
        self.removed = force


class _Engine:
    """Stands in for the Docker client: ``containers.run`` runs ``during_create`` (the race)."""

    def __init__(self, during_create: Any = None) -> None:
        self.during_create = during_create
        self.created: list[_Container] = []
        self.containers = self

    def run(self, **kwargs: Any) -> _Container:
        if self.during_create is not None:
            self.during_create()
        self.created.append(_Container())
        return self.created[-1]


def test_docker_refuses_a_folder_swapped_during_the_create(paths: ThreadPaths, tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    engine = _Engine(lambda: _swap_for_link(paths.workspace, host))
    provider = DockerSandboxProvider(client=engine, python_mode="image")
    with pytest.raises(ToolFailure) as refused:
        provider.acquire(paths, lease=False)
    provider.close()
    assert refused.value.code == "unsafe_mount" and "/mnt/user-data/workspace" in refused.value.message
    assert engine.created[0].removed
    assert list(host.iterdir()) == []


def test_docker_refuses_a_link_before_creating_anything(paths: ThreadPaths, tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    engine = _Engine()
    provider = DockerSandboxProvider(client=engine, python_mode="image")
    paths.outputs.rmdir()
    paths.outputs.symlink_to(host, target_is_directory=True)
    with pytest.raises(ToolFailure) as refused:
        provider.acquire(paths, lease=False)
    provider.close()
    assert refused.value.code == "unsafe_mount"
    assert engine.created == []

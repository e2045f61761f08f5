"""Thread mount folders held by descriptor (mount_fds) and the Docker provider's check around create.

A stand-in client plays the Docker engine (``test_docker_sandbox.py`` has the real one): the race (a
folder swapped for a link while the container is created, and back) is played inside its
``containers.run``, which binds by path as the engine does.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.sandbox.docker.provider import DockerSandboxProvider
from deerflow.sandbox.execution.mount_fds import (
    STAT_FORMAT,
    MountReport,
    open_mounts,
    read_mount_report,
)
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


def test_identities_are_the_held_folders_whatever_their_paths_name_later(paths: ThreadPaths, tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    with open_mounts(paths, VirtualFS(paths).mounts) as held:
        outputs = os.stat(paths.outputs)
        _swap_for_link(paths.outputs, host)
        identities = held.identities()
    assert identities["/mnt/user-data/outputs"] == (outputs.st_dev, outputs.st_ino)
    assert sorted(identities) == ["/mnt/user-data/outputs", "/mnt/user-data/uploads", "/mnt/user-data/workspace"]


@pytest.mark.parametrize(("report", "wrong"), [
    ("/mnt/a 1 2\n/mnt/b 1 3\n", None),
    ("/mnt/b 1 3\n/mnt/a 1 2\n", None),  # any order
    ("/mnt/b 1 3\n/mnt/a 1 2", "/mnt/a"),  # the last line cut short: not confirmed
    ("/mnt/a 1 2\n/mnt/b 1 4\n", "/mnt/b"),  # another folder mounted there
    ("/mnt/a 1 2\n", "/mnt/b"),  # not reported: not confirmed
    ("/mnt/a 1 2\n/mnt/b 1 x\n", "/mnt/b"),  # unparsable
    ("stat: cannot stat '/mnt/b': No such file or directory\n/mnt/a 1 2\n", "/mnt/b"),
    ("", "/mnt/a"),
])
def test_the_report_confirms_each_mount_or_names_it(report: str, wrong: str | None) -> None:
    assert read_mount_report({"/mnt/a": (1, 2), "/mnt/b": (1, 3)}, report).refused == wrong


def test_a_report_cut_short_is_missing_not_another_folder() -> None:
    """An inode cut short (``1 3`` read as ``1 ``... or ``3`` of ``31``) must not read as a swap,
    and a swap must not hide behind a path the report left out."""
    expected = {"/mnt/a": (1, 2), "/mnt/b": (1, 31)}
    assert read_mount_report(expected, "/mnt/a 1 2\n/mnt/b 1 3") == MountReport(None, "/mnt/b")
    assert read_mount_report(expected, "/mnt/b 1 30\n") == MountReport("/mnt/b", "/mnt/a")


class _Container:
    """What the engine started: its mounts are the folders each source path named at the create."""

    def __init__(self, mounted: dict[str, tuple[int, int]], stat_exit: int = 0, lost_reports: int = 0) -> None:
        self.mounted = mounted
        self.stat_exit = stat_exit
        self.lost_reports = lost_reports  # stat's output the engine's exec stream drops (exit 0)
        self.checks = 0
        self.removed = False
        self.id = "c1"

    def exec_run(self, cmd: list[str], **kwargs: Any) -> Any:
        assert cmd[:3] == ["stat", "-c", STAT_FORMAT]
        self.checks += 1
        if self.checks <= self.lost_reports:
            return SimpleNamespace(exit_code=0, output=b"")
        if self.stat_exit:
            return SimpleNamespace(exit_code=self.stat_exit, output=b"sh: stat: not found\n")
        lines = [f"{target} {dev} {ino}" for target, (dev, ino) in self.mounted.items() if target in cmd[3:]]
        return SimpleNamespace(exit_code=0, output="".join(f"{line}\n" for line in lines).encode())

    def remove(self, *, force: bool = False) -> None:
        self.removed = force


class _Engine:
    """Stands in for the Docker client: ``containers.run`` binds each source *by path* (links
    followed, as the engine does) at the moment ``during_create`` (the race) has left them."""

    def __init__(self, during_create: Any = None, after_create: Any = None, stat_exit: int = 0,
                 lost_reports: int = 0) -> None:
        self.during_create = during_create
        self.after_create = after_create
        self.stat_exit = stat_exit
        self.lost_reports = lost_reports
        self.created: list[_Container] = []
        self.containers = self

    def run(self, **kwargs: Any) -> _Container:
        if self.during_create is not None:
            self.during_create()
        mounted = {}
        for mount in kwargs["mounts"]:
            st = os.stat(mount["Source"])  # follows links, as the engine resolving a bind source
            mounted[mount["Target"]] = (st.st_dev, st.st_ino)
        if self.after_create is not None:
            self.after_create()
        self.created.append(_Container(mounted, self.stat_exit, self.lost_reports))
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
    assert engine.created[0].removed and engine.created[0].checks == 1  # a swap is not asked about twice
    assert list(host.iterdir()) == []


def test_docker_refuses_a_folder_swapped_and_swapped_back_during_the_create(paths: ThreadPaths,
                                                                           tmp_path: Path) -> None:
    """The gap a check of the host path after the create left open: by then the path names the
    held folder again, but the container has the host folder mounted."""
    host = tmp_path / "host"
    host.mkdir()

    def swap_back() -> None:
        paths.outputs.unlink()
        paths.outputs.with_name("outputs.aside").rename(paths.outputs)

    engine = _Engine(lambda: _swap_for_link(paths.outputs, host), after_create=swap_back)
    provider = DockerSandboxProvider(client=engine, python_mode="image")
    with pytest.raises(ToolFailure) as refused:
        provider.acquire(paths, lease=False)
    provider.close()
    assert refused.value.code == "unsafe_mount" and "/mnt/user-data/outputs" in refused.value.message
    assert engine.created[0].removed and paths.outputs.is_dir() and not paths.outputs.is_symlink()


def test_docker_starts_a_container_whose_mounts_are_the_held_folders(paths: ThreadPaths) -> None:
    engine = _Engine()
    provider = DockerSandboxProvider(client=engine, python_mode="image")
    try:
        provider.acquire(paths, lease=False)
        assert not engine.created[0].removed
    finally:
        provider.close()


def test_docker_asks_again_when_the_engine_loses_the_mount_report(paths: ThreadPaths) -> None:
    """Seen in CI under load: ``stat`` exited 0 and its output never arrived, which read as the
    first mount swapped; a lost report is asked for again, a swapped folder is not."""
    engine = _Engine(lost_reports=DockerSandboxProvider.MOUNT_CHECKS - 1)
    provider = DockerSandboxProvider(client=engine, python_mode="image")
    try:
        provider.acquire(paths, lease=False)
        assert not engine.created[0].removed and engine.created[0].checks == DockerSandboxProvider.MOUNT_CHECKS
    finally:
        provider.close()


def test_docker_refuses_a_report_that_never_comes(paths: ThreadPaths) -> None:
    engine = _Engine(lost_reports=DockerSandboxProvider.MOUNT_CHECKS)
    provider = DockerSandboxProvider(client=engine, python_mode="image")
    with pytest.raises(ToolFailure) as refused:
        provider.acquire(paths, lease=False)
    provider.close()
    assert refused.value.code == "unsafe_mount" and "stayed incomplete" in refused.value.message
    assert engine.created[0].removed and engine.created[0].checks == DockerSandboxProvider.MOUNT_CHECKS


def test_docker_refuses_what_it_cannot_check(paths: ThreadPaths) -> None:
    engine = _Engine(stat_exit=127)
    provider = DockerSandboxProvider(client=engine, python_mode="image")
    with pytest.raises(ToolFailure) as refused:
        provider.acquire(paths, lease=False)
    provider.close()
    assert refused.value.code == "unsafe_mount" and "needs `stat`" in refused.value.message
    assert engine.created[0].removed


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

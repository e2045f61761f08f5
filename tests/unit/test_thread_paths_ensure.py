"""``ThreadPaths.ensure`` makes the thread's folders without following what the sandbox planted there.

Everything below a thread's root is attacker-controlled: the agent's code can replace
``user-data`` or ``workspace`` with a link to a host directory (or a FIFO, or a file).
``ensure`` runs on the host before every sandbox and tool call; it must refuse, never
create folders at the link's target.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.threadfs import UnsafePath


def _thread(tmp_path: Path) -> ThreadPaths:
    return HomePaths(tmp_path / "home").thread("alice", "t1")


def test_ensure_creates_the_folders_and_is_idempotent(tmp_path: Path) -> None:
    paths = _thread(tmp_path)
    assert paths.ensure() is paths
    (paths.workspace / "kept.txt").write_text("x")
    paths.ensure()
    for folder in (paths.uploads, paths.workspace, paths.outputs):
        assert folder.is_dir() and not folder.is_symlink()
    assert (paths.workspace / "kept.txt").read_text() == "x"


@pytest.mark.parametrize("planted", ["user-data", "user-data/workspace", "user-data/outputs"])
def test_a_folder_swapped_for_a_link_to_the_host_is_refused(tmp_path: Path, planted: str) -> None:
    paths = _thread(tmp_path).ensure()
    host = tmp_path / "host-secrets"
    host.mkdir()
    victim = paths.root / planted
    os.rename(victim, tmp_path / "moved-away")  # the sandbox moves the folder away...
    victim.symlink_to(host, target_is_directory=True)  # ...and plants a link in its place

    with pytest.raises(UnsafePath) as caught:
        paths.ensure()

    assert caught.value.code == "symlink"
    assert list(host.iterdir()) == []  # nothing was created on the host
    assert str(tmp_path) not in str(caught.value)  # the message names no host path


def test_a_link_to_a_missing_host_folder_is_not_created_through(tmp_path: Path) -> None:
    paths = _thread(tmp_path).ensure()
    target = tmp_path / "host" / "would-be-created"
    (tmp_path / "host").mkdir()
    os.rmdir(paths.outputs)
    paths.outputs.symlink_to(target)  # dangling: mkdir(parents=True, exist_ok=True) would create it

    with pytest.raises(UnsafePath):
        paths.ensure()

    assert not target.exists()


@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_a_non_directory_in_place_of_a_folder_is_refused(tmp_path: Path, kind: str) -> None:
    paths = _thread(tmp_path).ensure()
    os.rmdir(paths.uploads)
    if kind == "fifo":
        os.mkfifo(paths.uploads)
    else:
        paths.uploads.write_text("not a folder")

    with pytest.raises(UnsafePath) as caught:
        paths.ensure()  # must not block on the FIFO either

    assert caught.value.code in {"not_dir", "exists"}

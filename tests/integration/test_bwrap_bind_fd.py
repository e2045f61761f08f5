"""Real bubblewrap: a thread's mount folders are bound by descriptor, never by path.

The attack: a thread's ``workspace`` or ``outputs`` folder is replaced by a symbolic link to a
host directory between the host's check (``ThreadPaths.ensure()``) and bubblewrap's mount, so the
next sandbox would get the host directory mounted writable.  From inside a bwrap sandbox the swap
itself is out of reach (the mount folders' parent is the sandbox's read-only root: the first test
shows it); an attacker who can write the thread's folders from elsewhere (a shared
``thread_files_root`` volume, another host-side process) can make it.  These tests make the swap
at the worst moment — after the provider opened the folders, before bubblewrap mounts them —
through a provider whose ``open_mounts`` runs the attacker right after the real one, then run a
real command or kernel that writes into the mount: the host directory must stay untouched and the
write must land in the folder that was checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.sandbox.execution.bwrap import BwrapSandboxProvider, find_bwrap
from deerflow.sandbox.execution.mount_fds import MountFds
from deerflow.sandbox.kernels.kernel import ThreadKernel
from fixtures.canary import host_canary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap (bwrap) is not installed"),
]

WS = "/mnt/user-data/workspace"
OUT = "/mnt/user-data/outputs"
SECRET = "host-canary-bindfd"


class RacingProvider(BwrapSandboxProvider):
    """The real provider, with an attacker run right after the thread's folders are opened."""

    attack: Callable[[ThreadPaths], None] | None = None

    def open_mounts(self, paths: ThreadPaths) -> MountFds:
        mounts = super().open_mounts(paths)
        if self.attack is not None:
            self.attack(paths)
        return mounts


@pytest.fixture
def paths(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "home" / "users" / "u" / "threads" / "t1").ensure()


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """A host directory outside the thread, with a secret file in it."""
    return host_canary(tmp_path, SECRET, "secret.txt")


@pytest.fixture
def provider() -> Iterator[RacingProvider]:
    sandbox = RacingProvider(network="isolated")
    yield sandbox
    sandbox.close()


def _swap_for_link(folder: Path, target: Path) -> Path:
    """Move ``folder`` aside and put a link to ``target`` in its place; returns the moved folder."""
    aside = folder.with_name(folder.name + ".checked")
    folder.rename(aside)
    folder.symlink_to(target, target_is_directory=True)
    return aside


def _assert_untouched(canary: Path) -> None:
    assert sorted(p.name for p in canary.iterdir()) == ["secret.txt"]
    assert (canary / "secret.txt").read_text() == SECRET


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _leaked_since(before: set[str], settle_s: float = 10.0) -> list[str]:
    """Descriptors opened since ``before`` that stay open: what each points to.

    A kernel's own sockets and pipes (and a background thread's) close a moment after the call
    returns on a loaded machine, so the set is read until it settles or ``settle_s`` passes; a
    mount descriptor the spawn kept would stay, and fail the check with its target named.
    """
    deadline = time.monotonic() + settle_s
    while True:
        extra = sorted(_open_fds() - before)
        if not extra or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    targets = []
    for fd in extra:
        with contextlib.suppress(OSError):
            targets.append(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
    return targets


def test_the_sandbox_cannot_swap_its_own_mount_folders(provider: RacingProvider, paths: ThreadPaths,
                                                       canary: Path) -> None:
    result = provider.execute(paths, f"mv {WS} /mnt/user-data/w2; ln -s {canary} /mnt/user-data/x; "
                                     f"rmdir {OUT}; echo done")
    assert result.output.count("Read-only file system") == 3, result.output
    assert paths.workspace.is_dir() and not paths.workspace.is_symlink()
    assert paths.outputs.is_dir() and not paths.outputs.is_symlink()


def test_a_workspace_swapped_for_a_link_after_the_check_is_not_mounted(
    provider: RacingProvider, paths: ThreadPaths, canary: Path
) -> None:
    moved: list[Path] = []
    provider.attack = lambda p: moved.append(_swap_for_link(p.workspace, canary))
    before = _open_fds()
    result = provider.execute(paths, f"echo pwned > {WS}/pwned.txt; ls {WS}; cat {WS}/secret.txt")
    provider.attack = None
    assert result.exit_code == 1, result.output  # cat: no secret.txt in the mounted workspace
    assert SECRET not in result.output
    _assert_untouched(canary)
    assert (moved[0] / "pwned.txt").read_text() == "pwned\n"  # the folder that was checked
    assert _leaked_since(before) == []  # the mount descriptors were closed after the spawn
    # The next sandbox finds the link and refuses, with a one-line reason for the model.
    with pytest.raises(ToolFailure) as refused:
        provider.execute(paths, f"echo again > {WS}/again.txt")
    assert refused.value.code == "unsafe_mount"
    assert "\n" not in refused.value.message and str(paths.root) not in refused.value.message
    _assert_untouched(canary)


def test_outputs_swapped_for_a_link_after_the_check_is_not_mounted_in_a_kernel(
    provider: RacingProvider, paths: ThreadPaths, canary: Path
) -> None:
    moved: list[Path] = []
    provider.attack = lambda p: moved.append(_swap_for_link(p.outputs, canary))
    before = _open_fds()

    async def run() -> str:
        kernel = ThreadKernel(provider, paths)
        await kernel.start()
        try:
            cell = await kernel.execute(
                f"import os\nopen('{OUT}/pwned.txt', 'w').write('pwned')\nprint(sorted(os.listdir('{OUT}')))",
                timeout=60,
            )
        finally:
            await kernel.shutdown(now=True)
        return "".join(o.get("text", "") for o in cell.outputs)

    text = asyncio.run(run())
    provider.attack = None
    assert "['pwned.txt']" in text, text
    _assert_untouched(canary)
    assert (moved[0] / "pwned.txt").read_text() == "pwned"
    assert _leaked_since(before) == []


@pytest.mark.parametrize("kind", ["link", "fifo", "file"])
def test_a_mount_folder_that_is_not_a_directory_is_refused(
    provider: RacingProvider, paths: ThreadPaths, canary: Path, kind: str
) -> None:
    paths.outputs.rmdir()
    if kind == "link":
        paths.outputs.symlink_to(canary, target_is_directory=True)
    elif kind == "fifo":
        os.mkfifo(paths.outputs)
    else:
        paths.outputs.write_text("not a folder")
    before = _open_fds()
    with pytest.raises(ToolFailure) as refused:  # command_launch: the check the spawn relies on
        provider.command_launch(paths, f"echo pwned > {OUT}/pwned.txt")
    assert refused.value.code == "unsafe_mount"
    assert OUT in refused.value.message and str(paths.root) not in refused.value.message

    async def start() -> None:
        await ThreadKernel(provider, paths).start()

    with pytest.raises(ToolFailure) as kernel_refused:
        asyncio.run(start())
    assert kernel_refused.value.code == "unsafe_mount"
    assert _leaked_since(before) == []
    _assert_untouched(canary)


def test_no_host_directory_descriptor_reaches_the_sandbox(provider: RacingProvider,
                                                          paths: ThreadPaths) -> None:
    # Every descriptor the command holds: its stdio and the one ``ls`` opens on /proc/self/fd.
    # A leaked --bind-fd descriptor would be a way out (its ``..`` is the host's folder).
    listing = provider.execute(paths, "ls /proc/self/fd").output.split()
    assert sorted(listing) == ["0", "1", "2", "3"], listing
    check = (
        "import os, stat\n"
        "dirs = [n for n in os.listdir('/proc/self/fd')\n"
        "        if os.path.exists(f'/proc/self/fd/{n}') and stat.S_ISDIR(os.stat(f'/proc/self/fd/{n}').st_mode)]\n"
        "print('dirs', [os.readlink(f'/proc/self/fd/{n}') for n in dirs])"
    )

    async def run() -> str:
        kernel = ThreadKernel(provider, paths)
        await kernel.start()
        try:
            cell = await kernel.execute(check, timeout=60)
        finally:
            await kernel.shutdown(now=True)
        return "".join(o.get("text", "") for o in cell.outputs)

    text = asyncio.run(run())
    assert text.startswith("dirs ["), text
    assert "user-data" not in text and "threads" not in text, text

"""A kernel's ipc socket swapped for a link: the host never connects through it.

The kernel binds ``k-1`` … ``k-5`` in its runtime directory, which code in the sandbox can
change (in a long-lived container it sees every kernel's directory).  ZMQ connects by path and
follows links, so a ``k-N`` replaced by a link after the kernel bound it carried the host's
requests, signed with the kernel's key, to whatever socket the link named.  Here the attacker
swaps the shell socket for a link to a "victim" socket the moment the kernel has made it, just
before the host connects; the start must fail with one line and the victim hear nothing.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.sandbox.kernels.ipc import HeldSockets
from deerflow.sandbox.kernels.kernel import KernelStartError, ThreadKernel
from deerflow.threadfs import SafeDir, UnsafePath
from fixtures.zmq_victim import victim_fixture  # noqa: F401  (registers the fixture)

STARTUP_S = 20.0


def _plant(shell: str, target: Path) -> None:
    os.symlink(target, f"{shell}.planted")
    os.replace(f"{shell}.planted", shell)  # atomic: the kernel's socket one moment, a link the next


class Attacker:
    """Code in the sandbox: swaps the shell socket for a link the moment the kernel made it.

    A thread polling the runtime folder (as a process in the container would), and, so the old
    client always loses, the same swap again just as the host creates its client.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, target: Path) -> None:
        self.target = target
        self.swapped: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        client = AsyncKernelManager.client

        def swapping_client(km: Any, **kwargs: Any) -> Any:
            shell = f"{km.ip}-{km.shell_port}"
            deadline = time.monotonic() + STARTUP_S
            while not os.path.lexists(shell) and time.monotonic() < deadline:
                time.sleep(0.05)  # the kernel is still starting
            if os.path.exists(shell) and not os.path.islink(shell):
                _plant(shell, self.target)
                self.swapped.append(shell)
            return client(km, **kwargs)

        monkeypatch.setattr(AsyncKernelManager, "client", swapping_client)
        launch = AsyncKernelManager._async_launch_kernel

        async def watched_launch(km: Any, kernel_cmd: Any, **kw: Any) -> None:
            await launch(km, kernel_cmd, **kw)
            self._thread = threading.Thread(target=self._race, args=(f"{km.ip}-{km.shell_port}",), daemon=True)
            self._thread.start()

        monkeypatch.setattr(AsyncKernelManager, "_async_launch_kernel", watched_launch)

    def _race(self, shell: str) -> None:
        while not self._stop.is_set():
            if os.path.exists(shell) and not os.path.islink(shell):
                _plant(shell, self.target)
                self.swapped.append(shell)
                return
            time.sleep(0.001)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


async def _start_and_use(kernel: ThreadKernel) -> str | None:
    """Start the kernel and run a cell; ``None`` when the start was refused (the expected end)."""
    try:
        await kernel.start()
    except KernelStartError as exc:
        return str(exc)
    try:  # the swap came after the host held the sockets: it must be talking to the real kernel
        result = await kernel.execute("6 * 7", timeout=STARTUP_S)
        assert result.outputs and "42" in str(result.outputs[-1])
    finally:
        await kernel.shutdown()
    return None


def test_a_socket_swapped_for_a_link_is_never_connected_through(tmp_path: Path, victim, monkeypatch) -> None:
    target, sock = victim
    attacker = Attacker(monkeypatch, target)
    kernel = ThreadKernel(LocalSandboxProvider(), ThreadPaths(tmp_path / "thread").ensure(), startup_timeout=STARTUP_S)
    try:
        refused = asyncio.run(_start_and_use(kernel))
    finally:
        attacker.stop()
    assert attacker.swapped, "the kernel never made its shell socket"
    assert sock.poll(500) == 0, "the host's request reached the socket the link named"
    if refused is not None:
        assert "tampered" in refused and "\n" not in refused and str(tmp_path) not in refused
    assert not kernel.started


def test_held_sockets_open_only_real_sockets_never_links(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(runtime / "k-1"))
    listener.listen()
    (runtime / "k-2").symlink_to(runtime / "k-1")
    (runtime / "k-3").write_text("not a socket")
    with SafeDir.open(runtime) as held_dir:
        held = HeldSockets(held_dir)
        try:
            url = held.url(1)
            assert url.startswith("ipc:///proc/self/fd/")
            with socket.socket(socket.AF_UNIX) as probe:  # the descriptor reaches the socket itself
                probe.connect(url.removeprefix("ipc://"))
            for port, code in ((2, "symlink"), (3, "not_socket"), (4, "not_found")):
                with pytest.raises(UnsafePath) as refused:
                    held.url(port)
                assert refused.value.code == code
        finally:
            held.close()
            listener.close()

"""Reaching a kernel's ZMQ ipc sockets without following a link the sandbox planted.

The kernel binds its five sockets as ``k-1`` … ``k-5`` in its runtime directory, which the
sandboxed code can change (in a long-lived container it sees every kernel's directory).  ZMQ
connects by path and follows links, so a ``k-N`` swapped for a link after the kernel bound it
would carry the host's messages, signed with the kernel's key, to whatever socket the link
names: another thread's kernel, a host service.  Resolving through the held directory
(``/proc/self/fd/<dir>/k-N``) guards the folders above, not the last name.

So the host connects through descriptors: once the kernel has made its sockets,
:class:`HeldSockets` opens each ``k-N`` with ``O_PATH`` beneath the held directory, no link
followed (:meth:`SafeDir.open_socket <deerflow.threadfs.SafeDir.open_socket>`: a socket, one
link), and hands ZMQ ``ipc:///proc/self/fd/<that descriptor>``, which names that very socket
for as long as the descriptor is open, reconnects included.  The manager and client classes
below ask it for every URL; the manager's control socket, which ``jupyter_client`` connects
right after the launch (before the kernel made it), connects on first use instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import stat
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from deerflow.threadfs import SafeDir

if TYPE_CHECKING:
    from jupyter_client.asynchronous.client import AsyncKernelClient
    from jupyter_client.manager import AsyncKernelManager
SOCKET_PREFIX = "k"
"""The kernel's sockets are ``k-<port>`` in its runtime directory (``ip`` is ``<dir>/k``)."""
_WAIT_STEP_S = 0.05


class HeldSockets:
    """``O_PATH`` descriptors of one kernel's socket files, opened once, closed with the kernel.

    Args:
        runtime: The kernel's runtime directory, held (not owned) while the kernel runs.
    """

    def __init__(self, runtime: SafeDir) -> None:
        self._dir = runtime
        self._fds: dict[int, int] = {}

    def url(self, port: int) -> str:
        """The ZMQ URL of socket ``k-<port>``, through its descriptor.

        Raises:
            UnsafePath: ``symlink`` (a link at the name), ``not_socket``, ``not_found``.
        """
        fd = self._fds.get(port)
        if fd is None:
            fd = self._fds[port] = self._dir.open_socket(f"{SOCKET_PREFIX}-{port}")
        return f"ipc:///proc/self/fd/{fd}"

    def made(self, ports: list[int]) -> bool:
        """Whether every ``k-<port>`` is there as something other than a link (not yet checked further)."""
        for port in ports:
            st = self._dir.lstat(f"{SOCKET_PREFIX}-{port}")
            if st is None:
                return False
            if stat.S_ISLNK(st.st_mode):
                return True  # not the kernel's: let url() refuse it with its one line
        return True

    async def open_when_made(self, ports: list[int], *, timeout: float,
                             alive: Callable[[], Awaitable[bool]]) -> None:
        """Wait until the kernel has made its sockets, then open all of them (off the loop), before
        any channel exists: a refusal leaves nothing half-connected.

        Raises:
            TimeoutError: past ``timeout``, or the kernel exited first.
            UnsafePath: as :meth:`url`.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not await asyncio.to_thread(self.made, ports):
            if loop.time() > deadline or not await alive():
                raise TimeoutError("the kernel did not create its sockets")
            await asyncio.sleep(_WAIT_STEP_S)
        await asyncio.to_thread(lambda: [self.url(port) for port in ports])

    def close(self) -> None:
        """Close the descriptors (after every ZMQ socket using them was closed)."""
        fds, self._fds = list(self._fds.values()), {}
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


class _HeldUrls:
    """Mixed into the manager and the client: every ipc URL comes from :class:`HeldSockets`."""

    held: HeldSockets | None = None

    def _make_url(self, channel: str) -> str:
        if self.held is None:
            return super()._make_url(channel)  # pyright: ignore[reportAttributeAccessIssue]
        return self.held.url(getattr(self, f"{channel}_port"))


def held_manager(held: HeldSockets, **traits: Any) -> AsyncKernelManager:
    """An ``AsyncKernelManager`` (``traits`` as its own) whose sockets, and its clients', are
    reached through ``held``."""
    manager_class, _ = _held_classes()
    km = manager_class(**traits)
    km.held = held
    return km


@functools.cache
def _held_classes() -> tuple[type[Any], type[Any]]:
    """The manager and client classes (defined on first kernel start: ``jupyter_client`` is
    imported then, not with this module)."""
    from jupyter_client.asynchronous.client import AsyncKernelClient
    from jupyter_client.manager import AsyncKernelManager

    class HeldClient(_HeldUrls, AsyncKernelClient):
        pass

    class HeldManager(_HeldUrls, AsyncKernelManager):
        def client(self, **kwargs: Any) -> AsyncKernelClient:
            self.client_factory = HeldClient
            kc = super().client(**kwargs)
            if isinstance(kc, HeldClient):
                kc.held = self.held
            return kc

        async def _async_post_start_kernel(self, **kw: Any) -> None:
            # Not connecting the control socket now, before the kernel made it: it connects
            # on first use (shutdown, interrupt), through the held descriptor.
            self.start_restarter()
            assert self.provisioner is not None
            await self.provisioner.post_launch(**kw)

    return HeldManager, HeldClient


__all__ = ["SOCKET_PREFIX", "HeldSockets", "held_manager"]

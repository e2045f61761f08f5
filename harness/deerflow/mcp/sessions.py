"""Live MCP sessions, reused per (server, user, thread) and closed when idle.

A run's first call to a server opens the session (a stdio server process is
spawned in that thread's workspace); later calls, in this run or the next,
reuse it.  A reaper task closes sessions that nobody used for
``idle_timeout`` seconds; :meth:`SessionPool.aclose` (called by
``RunManager.close``) closes the rest.  A session that failed or died is
replaced on next use, and tearing down a failed one happens in the
background so a hung server never delays a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

from deerflow.mcp.transport import ConnectSpec, McpConnection, ServerUnavailable, SessionKey


@dataclass
class _Slot:
    connection: McpConnection
    leases: int = 0


@dataclass
class SessionPool:
    """Owns every live session of one MCP manager."""

    idle_timeout: float = 600.0
    _slots: dict[SessionKey, _Slot] = field(default_factory=dict)
    _locks: dict[SessionKey, asyncio.Lock] = field(default_factory=dict)
    _closing: set[asyncio.Task[None]] = field(default_factory=set)
    _reaper: asyncio.Task[None] | None = None
    opened: int = 0

    def keys(self) -> list[SessionKey]:
        return list(self._slots)

    @contextlib.asynccontextmanager
    async def lease(self, key: SessionKey, make_spec: Callable[[], ConnectSpec]) -> AsyncIterator[McpConnection]:
        """A live session for ``key`` (opened with ``make_spec()`` when needed), held while in use.

        Raises:
            ServerUnavailable: the server could not be started or reached.
        """
        slot = await self._slot(key, make_spec)
        slot.leases += 1
        try:
            yield slot.connection
        finally:
            slot.leases -= 1
            slot.connection.last_used = time.monotonic()
            if not slot.connection.alive:
                self._discard(key, slot)

    async def _slot(self, key: SessionKey, make_spec: Callable[[], ConnectSpec]) -> _Slot:
        slot = self._slots.get(key)
        if slot is not None and slot.connection.alive:
            return slot
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            slot = self._slots.get(key)
            if slot is not None and slot.connection.alive:
                return slot
            if slot is not None:
                self._discard(key, slot)
            connection = McpConnection(make_spec())
            try:
                await connection.start()
            except ServerUnavailable:
                self._close_later(connection)
                raise
            self.opened += 1
            slot = self._slots[key] = _Slot(connection)
            self._ensure_reaper()
            return slot

    def _discard(self, key: SessionKey, slot: _Slot) -> None:
        if self._slots.get(key) is slot:
            del self._slots[key]
            lock = self._locks.get(key)
            if lock is not None and not lock.locked():
                del self._locks[key]
        self._close_later(slot.connection)

    def _close_later(self, connection: McpConnection) -> None:
        task = asyncio.get_running_loop().create_task(connection.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def close_where(self, predicate: Callable[[SessionKey], bool]) -> int:
        """Close (in the background) the sessions whose key matches; returns how many."""
        doomed = [(k, s) for k, s in self._slots.items() if predicate(k)]
        for key, slot in doomed:
            self._discard(key, slot)
        return len(doomed)

    def close_servers(self, servers: Iterable[str]) -> int:
        names = set(servers)
        return self.close_where(lambda key: key.server in names)

    def reap(self, now: float | None = None) -> int:
        """Close idle sessions not in use; returns how many."""
        now = time.monotonic() if now is None else now
        idle = [k for k, s in self._slots.items()
                if s.leases == 0 and (now - s.connection.last_used >= self.idle_timeout or not s.connection.alive)]
        return self.close_where(lambda key: key in idle)

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever(), name="mcp-session-reaper")

    async def _reap_forever(self) -> None:
        interval = max(0.05, min(self.idle_timeout / 2, 30.0))
        while self._slots:
            await asyncio.sleep(interval)
            self.reap()

    async def aclose(self) -> None:
        """Close every session and wait for the servers to stop."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        self.close_where(lambda key: True)
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)

    async def settle(self) -> None:
        """Wait for background closes (tests and shutdown)."""
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)


__all__ = ["ServerUnavailable", "SessionKey", "SessionPool"]

"""Live view: JPEG frames of a session's page for one viewer.

A :class:`LiveFeed` attaches as the session's single viewer (which pins the
session), then a producer task on the browser loop captures a JPEG of the
viewport every ``interval`` seconds and hands it to the viewer's own loop
when it differs from the last frame sent, or when ``keepalive`` seconds
passed without one (so a viewer can notice a closed connection or a stop
request on a page that does not change).  The hand-over keeps just
the newest frame: a slow viewer skips frames instead of queueing them, and
capture never waits for the viewer.  Frames stop when the viewer closes the
feed or the session is closed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from deerflow.errors import ToolFailure

if TYPE_CHECKING:
    from deerflow.browser.manager import BrowserSessionManager
    from deerflow.browser.session import BrowserSession


class LiveFeed:
    """One viewer's frames of one thread's page.

    Args:
        manager: The session manager.
        thread_id: The thread to watch.
        owner: The user asking; must be the session's exact owner.
        interval: Seconds between captures (the rate limit).
        quality: JPEG quality (1-100).
        keepalive: Seconds after which an unchanged frame is sent again.
    """

    def __init__(self, manager: BrowserSessionManager, thread_id: str, owner: str, *, interval: float,
                 quality: int, keepalive: float = 2.0) -> None:
        self.manager = manager
        self.thread_id = thread_id
        self.owner = owner
        self.interval = interval
        self.quality = max(1, min(100, quality))
        self.keepalive = keepalive
        self._token = object()
        self._session: BrowserSession | None = None
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=1)
        self._consumer: asyncio.AbstractEventLoop | None = None
        self._producer: concurrent.futures.Future[None] | None = None

    async def open(self) -> None:
        """Attach as the viewer and start capturing (ToolFailure if not allowed)."""
        self._consumer = asyncio.get_running_loop()
        self._session = await self.manager.run(
            self.manager._attach_viewer(self.thread_id, self.owner, self._token))
        self._producer = self.manager._thread().submit(self._produce(self._session))

    async def frames(self) -> AsyncIterator[bytes]:
        """Frames as they change, until the session or the feed is closed."""
        while True:
            frame = await self._queue.get()
            if frame is None:
                return
            yield frame

    async def aclose(self) -> None:
        if self._producer is not None:
            self._producer.cancel()
            self._producer = None
        if self._session is not None:
            session, self._session = self._session, None
            with contextlib.suppress(ToolFailure):  # a browser already shut down has nothing to detach
                await self.manager.run(self.manager._detach_viewer(session, self._token))

    async def _produce(self, session: BrowserSession) -> None:
        loop = asyncio.get_running_loop()
        last: bytes | None = None
        sent_at = loop.time()
        try:
            while session.viewer is self._token and self.manager._sessions.get(session.thread_id) is session:
                started = loop.time()
                try:
                    frame = await session.screenshot(full_page=False, ref=None, jpeg_quality=self.quality)
                except ToolFailure:
                    frame = None  # mid-navigation or a closing page: try again next tick
                if frame is not None and (frame != last or loop.time() - sent_at >= self.keepalive):
                    last, sent_at = frame, loop.time()
                    self._offer(frame)
                await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))
        finally:
            self._offer(None)

    def _offer(self, frame: bytes | None) -> None:
        if self._consumer is not None and not self._consumer.is_closed():
            self._consumer.call_soon_threadsafe(self._put_latest, frame)

    def _put_latest(self, frame: bytes | None) -> None:
        if self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(frame)

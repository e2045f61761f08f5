"""A thread's live browser page over HTTP.

* ``GET /threads/{id}/browser/frame`` — one JPEG of the page now;
* ``GET /threads/{id}/browser/live`` — an MJPEG stream
  (``multipart/x-mixed-replace``) of the page as it changes, at most one frame
  per ``interval`` seconds (``?interval=0.5``), until the client disconnects
  or ``max_frames`` were sent.

A retained page may hold logged-in state, so access needs the exact owner:
the thread must be the caller's (else 404, as everywhere) and the browser
session must have been opened by that same user (else 403).  One live viewer
per session: a second one gets 409.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from deerflow.errors import ToolFailure
from deerflow_jupyter.handlers.base import DeerFlowHandler

BOUNDARY = "deerflow-frame"


class _BrowserHandler(DeerFlowHandler):
    async def _frames(self, thread_id: str, *, max_frames: int | None) -> tuple[bytes, AsyncGenerator[bytes, None]]:
        """The first frame (errors become HTTP statuses before any header is sent) and the rest."""
        manager = await self.manager()
        await manager.athread(thread_id, self.user_id)
        try:
            interval = float(self.get_argument("interval", "0.5"))
        except ValueError:
            raise web.HTTPError(400, "interval must be a number of seconds") from None
        frames = manager.browser_frames(thread_id, self.user_id, interval=interval, max_frames=max_frames)
        try:
            return await anext(frames), frames
        except ToolFailure:
            await frames.aclose()
            raise  # its code decides the status (error_response)
        except StopAsyncIteration:
            raise web.HTTPError(404, "the browser session closed") from None


class BrowserFrameHandler(_BrowserHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        frame, frames = await self._frames(thread_id, max_frames=1)
        await frames.aclose()
        self.set_header("Cache-Control", "no-store")
        self.finish(frame, set_content_type="image/jpeg")


class BrowserLiveHandler(_BrowserHandler):
    _pump: asyncio.Task[None] | None = None

    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        limit = self.get_argument("max_frames", None)
        frame, frames = await self._frames(thread_id, max_frames=int(limit) if limit and limit.isdigit() else None)
        self.set_header("Content-Type", f"multipart/x-mixed-replace; boundary={BOUNDARY}")
        self.set_header("Cache-Control", "no-store")
        self._pump = asyncio.ensure_future(self._send(frame, frames))
        try:
            await self._pump
        except (asyncio.CancelledError, StreamClosedError):
            pass  # the viewer went away
        finally:
            await frames.aclose()
        with contextlib.suppress(StreamClosedError):
            self.finish()

    async def _send(self, first: bytes, frames: AsyncIterator[bytes]) -> None:
        await self._write_frame(first)
        async for frame in frames:
            await self._write_frame(frame)

    async def _write_frame(self, frame: bytes) -> None:
        self.write(f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(frame)}\r\n\r\n".encode())
        self.write(frame)
        self.write(b"\r\n")
        await self.flush()

    def on_connection_close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()

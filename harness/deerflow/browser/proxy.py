"""A loopback forward proxy that applies the URL guard to everything a browser fetches.

Playwright's request routing cannot guard a browser on its own: Chromium
follows redirects without showing the hops to route handlers, and after a
routed request is continued Chromium resolves the name again itself.  So each
browser session gets its own :class:`GuardedProxy` (the browser context's
proxy, loopback not bypassed), and every network request the page makes —
navigations, every redirect hop, subresources, iframes, workers, WebSockets —
reaches the network only through it:

* ``CONNECT host:port`` (https, wss): the host is checked, the tunnel is
  opened to the *checked* address, TLS stays end to end;
* ``GET http://host/...`` (plain http, ws): the URL is checked, the request is
  sent in origin form to the checked address with ``Connection: close``, and
  the client connection is closed after the response, so a kept-alive
  connection can never carry a second, unchecked request.

A refused request gets ``403`` with a short explanation and is reported to
``on_blocked`` (the session keeps a log the tools show to the model).
Request bodies are forwarded by ``Content-Length``; chunked uploads are
refused (browsers do not send them for ordinary forms).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from deerflow.web.url_guard import CheckedUrl, UrlGuard, UrlRejected

logger = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
HOP_BY_HOP = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                        "proxy-authenticate", "te", "trailer", "upgrade"})
OnBlocked = Callable[[str, str], None]


@dataclass(frozen=True)
class _Head:
    method: str
    target: str
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)


class GuardedProxy:
    """One session's proxy.

    Args:
        guard: The policy every request must pass.
        on_blocked: Called with ``(url, reason)`` for each refused request.
        connect_timeout: Seconds to reach an upstream server.
    """

    def __init__(self, guard: UrlGuard, *, on_blocked: OnBlocked, connect_timeout: float = 15.0) -> None:
        self.guard = guard
        self.on_blocked = on_blocked
        self.connect_timeout = connect_timeout
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        """Listen on a free loopback port; returns the proxy URL for the browser."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, limit=MAX_HEAD)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            head = await _read_head(reader)
            if head is not None:
                await self._serve(head, reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _serve(self, head: _Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if head.method == "CONNECT":
            url = _connect_url(head.target)
        else:
            url = head.target
            if urlsplit(url).scheme != "http":
                await _reply(writer, 400, "the proxy only forwards absolute http:// requests")
                return
        try:
            checked = await self.guard.acheck(url)
        except UrlRejected as exc:
            self.on_blocked(exc.url, exc.reason)
            await _reply(writer, 403, f"Blocked by DeerFlow's URL guard: {exc.reason}")
            return
        upstream = await self._connect(checked, writer)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        try:
            if head.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
                await _splice(reader, writer, up_reader, up_writer)
            else:
                await self._forward(head, checked, reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()

    async def _connect(self, checked: CheckedUrl, writer: asyncio.StreamWriter
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            async with asyncio.timeout(self.connect_timeout):
                return await asyncio.open_connection(checked.addresses[0], checked.port)
        except (OSError, TimeoutError) as exc:
            await _reply(writer, 502, f"cannot reach {checked.host}:{checked.port} ({type(exc).__name__})")
            return None

    async def _forward(self, head: _Head, checked: CheckedUrl, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter, up_reader: asyncio.StreamReader,
                       up_writer: asyncio.StreamWriter) -> None:
        if (head.header("transfer-encoding") or "").lower() not in ("", "identity"):
            await _reply(writer, 411, "chunked request bodies are not supported")
            return
        parts = urlsplit(head.target)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"{head.method} {path} HTTP/1.1"]
        lines += [f"{k}: {v}" for k, v in head.headers if k.lower() not in HOP_BY_HOP]
        lines.append("Connection: close")
        up_writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        length = int(head.header("content-length") or 0)
        if length:
            up_writer.write(await reader.readexactly(length))
        await up_writer.drain()
        while data := await up_reader.read(65536):
            writer.write(data)
            await writer.drain()


async def _read_head(reader: asyncio.StreamReader) -> _Head | None:
    try:
        async with asyncio.timeout(30):
            raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
        return None
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return None
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.append((name.strip(), value.strip()))
    return _Head(parts[0].upper(), parts[1], headers)


def _connect_url(target: str) -> str:
    """A URL for the guard from a CONNECT target (``host:port`` or ``[v6]:port``)."""
    host, _, port = target.rpartition(":")
    scheme = "http" if port == "80" else "https"
    return f"{scheme}://{host}:{port}/" if host else f"https://{target}/"


async def _reply(writer: asyncio.StreamWriter, status: int, message: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 411: "Length Required", 502: "Bad Gateway"}[status]
    body = (f"<!doctype html><title>{reason}</title><h1>{reason}</h1><p>{_escape(message)}</p>").encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    with contextlib.suppress(ConnectionError, OSError):
        await writer.drain()


async def _splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
    """Copy bytes both ways until either side closes."""
    tasks = {asyncio.create_task(_copy(reader, up_writer)), asyncio.create_task(_copy(up_reader, writer))}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

"""One live MCP session over stdio, SSE or streamable HTTP, on the official SDK.

The SDK's transports and ``ClientSession`` are anyio context managers: they
must be exited by the task that entered them.  A session is reused by many
runs (different asyncio tasks), so each :class:`McpConnection` owns one
*holder task* that enters the transport and the session, reports readiness,
then waits for :meth:`McpConnection.aclose`.  Calls from any task go through
the session's memory streams, which are task-agnostic.

stdio servers start in the thread's workspace with the harness's scrubbed
environment (no inherited API keys) plus their configured ``env``; their
stderr goes to a per-server log file, not the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from pydantic import ValidationError

from deerflow.mcp.config import McpServerConfig
from deerflow.mcp.credentials import ResolvedCredentials
from deerflow.sandbox.execution.env import scrub_env

if TYPE_CHECKING:  # the MCP SDK loads with the first session (over a second of imports), not with the host
    import mcp_types
    from mcp import ClientSession

logger = logging.getLogger(__name__)

HTTP_TIMEOUT = 30.0
SSE_READ_TIMEOUT = 300.0


@cache
def transport_errors() -> tuple[type[BaseException], ...]:
    """What a broken server, a dead process or a refused connection raise through the SDK.

    A function, not a constant: the tuple names the SDK's ``MCPError``, and the SDK is
    imported when a session is first opened (an ``except`` evaluates it only on an error).
    """
    from mcp.shared.exceptions import MCPError

    return (OSError, MCPError, httpx2.HTTPError, anyio.ClosedResourceError, anyio.BrokenResourceError,
            anyio.EndOfStream, ValidationError, RuntimeError, ValueError, TimeoutError)


def _client_info() -> mcp_types.Implementation:
    import mcp_types

    return mcp_types.Implementation(name="deerflow-notebook", version="0.1.0")


class ServerUnavailable(Exception):
    """The server could not be reached, or its session ended; the message is safe to show."""


@dataclass(frozen=True)
class SessionKey:
    """Sessions are reused per (server, user, thread)."""

    server: str
    user_id: str
    thread_id: str


@dataclass
class ConnectSpec:
    """Everything needed to open one session."""

    server: str
    config: McpServerConfig
    credentials: ResolvedCredentials
    cwd: Path | None = None
    errlog: Path | None = None


def describe(exc: BaseException) -> str:
    """A one-line, traceback-free description of a transport failure (groups unwrapped)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from the server"
    if isinstance(exc, httpx2.HTTPError):
        return f"{type(exc).__name__}: cannot reach the server"
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _expected(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_expected(e) for e in exc.exceptions)
    return isinstance(exc, transport_errors())


class McpConnection:
    """A session to one server for one (user, thread), held open by its own task."""

    def __init__(self, spec: ConnectSpec) -> None:
        self.spec = spec
        self.session: ClientSession | None = None
        self.last_used = time.monotonic()
        self.failure: str | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.session is not None and self.failure is None and self._task is not None \
            and not self._task.done()

    async def start(self) -> None:
        """Spawn/connect and complete the handshake within ``session_init_timeout``.

        Raises:
            ServerUnavailable: the server failed to start, refused, or timed out.
            CredentialError: the OAuth token could not be obtained (nothing was started).
        """
        await self.spec.credentials.ready()
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._ready.add_done_callback(_retrieve)
        self._task = loop.create_task(self._hold(), name=f"mcp-session-{self.spec.server}")
        self._task.add_done_callback(_log_crash)
        timeout = self.spec.config.session_init_timeout
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._ready)
        except TimeoutError:
            self.failure = f"no answer to the handshake within {timeout:g}s"
            raise ServerUnavailable(self.failure) from None
        except ServerUnavailable as exc:
            self.failure = str(exc)
            raise

    async def _hold(self) -> None:
        """Enter the transport and the session, then keep them open until :meth:`aclose`."""
        from mcp import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                session = await stack.enter_async_context(ClientSession(read, write, client_info=_client_info()))
                await session.initialize()
                self.session = session
                self._settle(None)
                await self._stop.wait()
        except asyncio.CancelledError:
            self._settle(ServerUnavailable("the session was closed while starting"))
        except (*transport_errors(), BaseExceptionGroup) as exc:
            if not _expected(exc):
                logger.error("MCP server %s: unexpected error in its session", self.spec.server, exc_info=exc)
            self._settle(ServerUnavailable(describe(exc)))
        finally:
            self.session = None
            self._settle(ServerUnavailable("the session ended"))

    def _settle(self, error: ServerUnavailable | None) -> None:
        """Tell :meth:`start` how the handshake went, or record why a live session ended."""
        assert self._ready is not None
        if not self._ready.done():
            if error is None:
                self._ready.set_result(None)
            else:
                self._ready.set_exception(error)
        elif error is not None and self.failure is None:
            self.failure = str(error)

    def _transport(self, stack: contextlib.AsyncExitStack) -> contextlib.AbstractAsyncContextManager[Any]:
        config, creds = self.spec.config, self.spec.credentials
        if config.type == "stdio":
            return self._stdio(stack)
        if config.type == "sse":
            from mcp.client.sse import sse_client

            return sse_client(config.url or "", headers=creds.headers or None, timeout=HTTP_TIMEOUT,
                              sse_read_timeout=SSE_READ_TIMEOUT, auth=creds.auth)
        return self._http()

    def _stdio(self, stack: contextlib.AsyncExitStack) -> contextlib.AbstractAsyncContextManager[Any]:
        config, spec = self.spec.config, self.spec
        if spec.cwd is not None:
            spec.cwd.mkdir(parents=True, exist_ok=True)
        errlog: Any = None
        if spec.errlog is not None:
            spec.errlog.parent.mkdir(parents=True, exist_ok=True)
            errlog = stack.enter_context(spec.errlog.open("a", encoding="utf-8"))
        from mcp import StdioServerParameters, stdio_client

        env = {**scrub_env(os.environ), **spec.credentials.env}
        params = StdioServerParameters(command=config.command or "", args=list(config.args), env=env,
                                       cwd=str(spec.cwd) if spec.cwd else None)
        return stdio_client(params, errlog=errlog) if errlog is not None else stdio_client(params)

    @contextlib.asynccontextmanager
    async def _http(self) -> AsyncIterator[Any]:
        from mcp.client.streamable_http import streamable_http_client

        creds = self.spec.credentials
        client = httpx2.AsyncClient(headers=creds.headers or None, auth=creds.auth,
                                    timeout=httpx2.Timeout(HTTP_TIMEOUT, read=SSE_READ_TIMEOUT))
        async with client, streamable_http_client(self.spec.config.url or "", http_client=client) as streams:
            yield streams

    async def list_tools(self) -> list[mcp_types.Tool]:
        """Every tool the server lists (all pages)."""
        import mcp_types

        session = self._live_session()
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server that paginates forever cannot hang discovery
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.last_used = time.monotonic()
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any], *, timeout: float) -> mcp_types.CallToolResult:
        """Call one tool; ``MCPError`` (timeouts included) and transport errors propagate."""
        import mcp_types
        from mcp.shared.exceptions import MCPError

        session = self._live_session()
        self.last_used = time.monotonic()
        try:
            return await session.call_tool(name, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self.failure = describe(exc)
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError) as exc:
            self.failure = describe(exc)
            raise
        finally:
            self.last_used = time.monotonic()

    def _live_session(self) -> ClientSession:
        if not self.alive or self.session is None:
            raise ServerUnavailable(self.failure or "the session is closed")
        return self.session

    async def aclose(self) -> None:
        """End the session (the SDK stops a stdio server: stdin closed, then SIGTERM/SIGKILL)."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if self.session is None:  # still starting (e.g. a handshake that never answers)
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task})


def _retrieve(future: asyncio.Future[None]) -> None:
    """Mark a late handshake failure as seen (the waiter may have timed out already)."""
    if not future.cancelled():
        future.exception()


def _log_crash(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        logger.error("MCP session task %s ended with an unexpected error", task.get_name(), exc_info=exc)

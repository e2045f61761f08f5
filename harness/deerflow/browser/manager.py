"""The browser session manager: one browser, one session per thread, a hard cap.

One :class:`BrowserSessionManager` per host, owned by the run manager
(``RunContext.services.browser``) and closed with it; no globals.  It
owns a private :class:`~deerflow.browser.loop.LoopThread` on which
Playwright, the browser and every session live, so a thread's session
survives across runs whichever loop (or no loop) the caller uses: callers
use :meth:`BrowserSessionManager.run` from async code and
:meth:`BrowserSessionManager.run_sync` from plain threads.

Admission is a hard ``max_sessions`` cap.  A session is *pinned* while an
action runs on it or a live viewer watches it; pinned sessions are never
evicted.  When a new thread needs a session and the cap is reached, the
least recently used unpinned session is closed; when every session is
pinned the new thread is refused with a message the model can act on.
Sessions idle longer than ``idle_timeout`` are closed in the background.
A thread whose session was closed (idle, evicted) is told so the next time
it uses the browser.

``cdp_url`` attaches to an existing browser instead of launching one; its
traffic cannot be routed through the guard, so it is refused at startup
unless ``allow_unguarded_cdp: true`` (see :mod:`deerflow.browser.launch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from deerflow.browser.launch import LAUNCH_ARGS, check_cdp, find_executable, import_playwright
from deerflow.browser.loop import LoopThread
from deerflow.browser.proxy import GuardedProxy
from deerflow.browser.session import BrowserSession
from deerflow.config.schema import BrowserConfig
from deerflow.errors import ConfigError, ToolFailure
from deerflow.web.url_guard import UrlGuard

logger = logging.getLogger(__name__)
T = TypeVar("T")
VIEWPORT = {"width": 1280, "height": 800}


class LiveViewBusy(ToolFailure):
    """Another viewer already watches this session (one live viewer per session)."""


class BrowserSessionManager:
    """Sessions of one host's browser.

    Args:
        config: The ``browser`` section.
        guard: The URL guard for every session (default: from ``allow_private_addresses``).
        config_file: For error messages.
    """

    def __init__(self, config: BrowserConfig, *, guard: UrlGuard | None = None,
                 config_file: str | None = None) -> None:
        self.config = config
        self.guard = guard or UrlGuard(allow_private_addresses=config.allow_private_addresses)
        self.config_file = config_file
        self.guarded = not config.cdp_url
        self._loop: LoopThread | None = None
        self._playwright: Any = None
        self._browser: Any = None
        self._sessions: dict[str, BrowserSession] = {}
        self._closed_reasons: dict[str, str] = {}
        self._admission: asyncio.Lock | None = None
        self._reaper: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        """Load Playwright and start the browser; ConfigError when that is impossible."""
        check_cdp(self.config, config_file=self.config_file)
        import_playwright(config_file=self.config_file)
        executable = None if self.config.cdp_url else find_executable(self.config, config_file=self.config_file)
        self._loop = LoopThread()
        try:
            await self._loop.arun(self._start(executable))
        except ConfigError:
            await self.aclose()
            raise

    async def _start(self, executable: str | None) -> None:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import async_playwright

        self._admission = asyncio.Lock()
        try:
            self._playwright = await async_playwright().start()
            if self.config.cdp_url:
                logger.warning("browser attached over CDP at %s: requests are NOT screened by the URL guard",
                               self.config.cdp_url)
                self._browser = await self._playwright.chromium.connect_over_cdp(self.config.cdp_url)
            else:
                self._browser = await self._playwright.chromium.launch(
                    executable_path=executable, headless=self.config.headless, args=list(LAUNCH_ARGS))
        except PlaywrightError as exc:
            where = self.config.cdp_url or executable
            first = (str(exc).strip().splitlines() or ["unknown error"])[0]
            raise ConfigError(f"the browser could not be started ({where}): {first}",
                              file=self.config_file, key="browser") from None
        self._reaper = asyncio.create_task(self._reap_idle())

    async def aclose(self) -> None:
        """Close every session, the browser and the loop thread (from any loop)."""
        if self._loop is None:
            return
        if self._loop.running:
            await self._loop.arun(self._shutdown())
            await asyncio.to_thread(self._loop.stop)
        self._loop = None

    def close(self) -> None:
        """Synchronous :meth:`aclose` for plain threads."""
        if self._loop is None:
            return
        if self._loop.running:
            self._loop.run(self._shutdown())
            self._loop.stop()
        self._loop = None

    async def _shutdown(self) -> None:
        from playwright.async_api import Error as PlaywrightError

        if self._reaper is not None:
            self._reaper.cancel()
        for session in list(self._sessions.values()):
            await session.close()
        self._sessions.clear()
        with contextlib.suppress(PlaywrightError):
            if self._browser is not None:
                await self._browser.close()
            if self._playwright is not None:
                await self._playwright.stop()

    # -- calling into the loop -----------------------------------------------------
    def _thread(self) -> LoopThread:
        if self._loop is None or not self._loop.running:
            raise ToolFailure("the browser is not running in this session.", code="browser_unavailable")
        return self._loop

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the browser loop from any event loop."""
        return await self._thread().arun(coro)

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the browser loop from a thread without a running loop."""
        return self._thread().run(coro)

    async def act(self, thread_id: str, owner: str, action: Callable[[BrowserSession], Awaitable[T]], *,
                  create: bool = True) -> tuple[T, list[str]]:
        """Run ``action`` on the thread's session (on the browser loop), pinned and serialized.

        Returns:
            The action's result and notes for the model (a session that was
            closed since the thread last used it).
        """
        return await self.run(self._act(thread_id, owner, action, create=create))

    async def _act(self, thread_id: str, owner: str, action: Callable[[BrowserSession], Awaitable[T]], *,
                   create: bool) -> tuple[T, list[str]]:
        session, notes = await self._acquire(thread_id, owner, create=create)
        async with session.pinned():
            return await action(session), notes

    # -- admission -----------------------------------------------------------------
    async def _acquire(self, thread_id: str, owner: str, *, create: bool) -> tuple[BrowserSession, list[str]]:
        assert self._admission is not None
        async with self._admission:
            session = self._sessions.get(thread_id)
            if session is not None:
                _check_owner(session, owner)
                return session, []
            reason = self._closed_reasons.pop(thread_id, None)  # told once, on the next use
            if not create:
                before = f"this thread's previous browser session was closed ({reason}), so " if reason else ""
                raise ToolFailure(f"{before}this thread has no open browser page; call browser_navigate first.",
                                  code="no_browser_session")
            notes = [f"This thread's previous browser session was closed ({reason}); a new, empty session "
                     "was started: pages, logins and refs from before are gone."] if reason else []
            await self._make_room(thread_id)
            session = await self._open_session(thread_id, owner)
            self._sessions[thread_id] = session
            return session, notes

    async def _make_room(self, thread_id: str) -> None:
        while len(self._sessions) >= self.config.max_sessions:
            idle = [s for s in self._sessions.values() if s.pins == 0 and s.viewer is None]
            if not idle:
                raise ToolFailure(
                    f"the browser is at its limit of {self.config.max_sessions} session(s) and every one is in "
                    "use by another thread right now. Try again later, or continue without the browser "
                    "(web_fetch reads pages without one).", code="browser_busy")
            victim = min(idle, key=lambda s: s.last_used)
            logger.info("closing the browser session of thread %s to make room for %s", victim.thread_id, thread_id)
            await self._close(victim, reason="closed to make room for another thread's session")

    async def _open_session(self, thread_id: str, owner: str) -> BrowserSession:
        options: dict[str, Any] = {"viewport": VIEWPORT, "accept_downloads": False, "service_workers": "block"}
        blocked: list[BrowserSession] = []  # the proxy reports to the session created below
        proxy = None
        if self.guarded:
            proxy = GuardedProxy(self.guard, on_blocked=lambda url, reason: blocked[0].record_blocked(url, reason))
            options["proxy"] = {"server": await proxy.start(), "bypass": "<-loopback>"}
        try:
            context = await self._browser.new_context(**options)
        except BaseException:
            if proxy is not None:
                await proxy.close()
            raise
        session = BrowserSession(thread_id, owner, context, proxy=proxy,
                                 navigation_timeout=self.config.navigation_timeout)
        blocked.append(session)
        await session.open()
        return session

    async def _close(self, session: BrowserSession, *, reason: str) -> None:
        self._sessions.pop(session.thread_id, None)
        self._closed_reasons[session.thread_id] = reason
        await session.close()

    async def _reap_idle(self) -> None:
        period = max(1.0, min(60.0, self.config.idle_timeout / 4))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for session in list(self._sessions.values()):
                if session.pins == 0 and session.viewer is None and now - session.last_used > self.config.idle_timeout:
                    await self._close(session, reason=f"idle for more than {self.config.idle_timeout:g}s")

    # -- explicit closing and inspection -------------------------------------------
    async def close_session(self, thread_id: str, owner: str) -> bool:
        """Close the thread's session; False when it had none."""
        return await self.run(self._close_session(thread_id, owner))

    async def _close_session(self, thread_id: str, owner: str) -> bool:
        session = self._sessions.get(thread_id)
        if session is None:
            return False
        _check_owner(session, owner)
        if session.viewer is not None:
            session.viewer = None
        self._sessions.pop(thread_id, None)
        self._closed_reasons.pop(thread_id, None)
        await session.close()
        return True

    def session_threads(self) -> list[str]:
        """Threads that have an open session (most recently used last)."""
        return [s.thread_id for s in sorted(self._sessions.values(), key=lambda s: s.last_used)]

    # -- live view -----------------------------------------------------------------
    async def live_frames(self, thread_id: str, owner: str, *, interval: float = 0.5,
                          quality: int = 60, keepalive: float = 2.0) -> AsyncGenerator[bytes, None]:
        """JPEG frames of the thread's page, refreshed in the background, from any loop.

        Only the exact owner of the session may watch, one viewer at a time;
        the session is pinned (never evicted or reaped) while watched.  A
        frame is sent when the page looks different, at most every
        ``interval`` seconds (≥ 0.1).  Closing the generator stops the capture.

        Raises:
            ToolFailure: no session, wrong owner, or ``LiveViewBusy``.
        """
        from deerflow.browser.live import LiveFeed

        feed = LiveFeed(self, thread_id, owner, interval=max(0.1, interval), quality=quality, keepalive=keepalive)
        await feed.open()
        try:
            async for frame in feed.frames():
                yield frame
        finally:
            await feed.aclose()

    async def _attach_viewer(self, thread_id: str, owner: str, token: object) -> BrowserSession:
        session = self._sessions.get(thread_id)
        if session is None:
            raise ToolFailure("this thread has no open browser session to watch.", code="no_browser_session")
        _check_owner(session, owner)
        if session.viewer is not None:
            raise LiveViewBusy("another live viewer is already watching this thread's browser.",
                               code="live_view_busy")
        session.viewer = token
        return session

    async def _detach_viewer(self, session: BrowserSession, token: object) -> None:
        if session.viewer is token:
            session.viewer = None
            session.last_used = time.monotonic()


def _check_owner(session: BrowserSession, owner: str) -> None:
    """Pages may hold authenticated state: only the exact, non-empty owner may use a session."""
    if not owner or session.owner != owner:
        raise ToolFailure("this browser session belongs to another user.", code="forbidden")

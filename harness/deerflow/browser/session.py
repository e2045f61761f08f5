"""One thread's browser session: a private browser context, its current page, its refs.

Everything here runs on the session manager's loop thread.  A session is a
Playwright ``BrowserContext`` of its own (cookies and storage never shared
between threads) whose traffic goes through the session's
:class:`~deerflow.browser.proxy.GuardedProxy`.  Each action returns an
:class:`ActionResult`: what happened, the requests the guard blocked while
it ran, and a fresh :class:`~deerflow.browser.snapshot.PageSnapshot`.

Playwright failures the model can do something about (an element not
clickable, a navigation timeout, a stale ref) become :class:`ToolFailure`
with the first line of Playwright's message, never its call log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from deerflow.browser.snapshot import SNAPSHOT_JS, PageSnapshot
from deerflow.errors import ToolFailure

if TYPE_CHECKING:
    from deerflow.browser.proxy import GuardedProxy

SNAPSHOT_CHARS = 12_000
ACTION_TIMEOUT_MS = 10_000
SETTLE_TIMEOUT_MS = 3_000
MAX_REMEMBERED_REFS = 5_000


@dataclass(frozen=True)
class BlockedRequest:
    url: str
    reason: str


@dataclass
class ActionResult:
    """What an action did and what the page looks like after it.

    Attributes:
        message: One line for the model (``Clicked [4] button "Next".``).
        snapshot: The page after the action.
        blocked: Requests the guard refused while the action ran.
        notes: Extra facts (a new session replaced an idle one...).
    """

    message: str
    snapshot: PageSnapshot
    blocked: list[BlockedRequest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def playwright_failure(exc: Exception, *, doing: str, code: str = "browser_error") -> ToolFailure:
    """A Playwright error as a short message for the model."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return ToolFailure(f"{doing} failed: {first}", code=code)


class BrowserSession:
    """The browser state of one thread.

    Args:
        thread_id: The thread it belongs to.
        owner: The user owning the thread (exact match required for live access).
        context: Its Playwright browser context.
        proxy: Its guarded proxy (None for an unguarded CDP browser).
        navigation_timeout: Seconds a navigation may take.
    """

    def __init__(self, thread_id: str, owner: str, context: Any, *, proxy: GuardedProxy | None,
                 navigation_timeout: float) -> None:
        self.thread_id = thread_id
        self.owner = owner
        self.context = context
        self.proxy = proxy
        self.page: Any = None
        self.navigation_timeout_ms = int(navigation_timeout * 1000)
        self.lock = asyncio.Lock()
        self.pins = 0
        self.viewer: object | None = None
        self.last_used = time.monotonic()
        self.next_ref = 1
        self.doc_start = 1
        self.doc_token = ""
        self.issued: dict[int, str] = {}
        self.blocked: deque[BlockedRequest] = deque(maxlen=200)
        self.blocked_total = 0
        context.on("page", self._on_page)

    # -- lifecycle -----------------------------------------------------------------
    async def open(self) -> None:
        self.page = await self.context.new_page()

    def _on_page(self, page: Any) -> None:
        """A popup or ``target=_blank`` link becomes the page the agent works on."""
        self.page = page

    async def current_page(self) -> Any:
        if self.page is None or self.page.is_closed():
            open_pages = [p for p in self.context.pages if not p.is_closed()]
            self.page = open_pages[-1] if open_pages else await self.context.new_page()
        return self.page

    async def close(self) -> None:
        from playwright.async_api import Error as PlaywrightError

        with contextlib.suppress(PlaywrightError):  # the browser may already be gone
            await self.context.close()
        if self.proxy is not None:
            await self.proxy.close()

    def record_blocked(self, url: str, reason: str) -> None:
        """Called by the proxy for each refused request."""
        self.blocked.append(BlockedRequest(url, reason))
        self.blocked_total += 1

    @contextlib.asynccontextmanager
    async def pinned(self) -> AsyncIterator[BrowserSession]:
        """Hold the session for one action: serialized, never evicted meanwhile."""
        self.pins += 1
        try:
            async with self.lock:
                yield self
        finally:
            self.pins -= 1
            self.last_used = time.monotonic()

    # -- observing -----------------------------------------------------------------
    async def snapshot(self) -> PageSnapshot:
        page = await self.current_page()
        args = {"start": self.next_ref, "docStart": self.doc_start, "docToken": self.doc_token,
                "maxChars": SNAPSHOT_CHARS}
        data = await self._evaluate(page, SNAPSHOT_JS, args)
        self.next_ref, self.doc_start, self.doc_token = data["next"], data["docStart"], data["document"]
        refs = {int(k): str(v) for k, v in data["refs"].items()}
        self.issued.update(refs)
        while len(self.issued) > MAX_REMEMBERED_REFS:
            self.issued.pop(next(iter(self.issued)))
        return PageSnapshot(url=data["url"], title=data["title"], text=data["text"], refs=refs,
                            truncated=bool(data["truncated"]))

    async def _evaluate(self, page: Any, script: str, args: Any) -> Any:
        from playwright.async_api import Error as PlaywrightError

        for attempt in range(3):
            try:
                return await page.evaluate(script, args)
            except PlaywrightError as exc:
                if attempt == 2 or "context was destroyed" not in str(exc).lower():
                    raise playwright_failure(exc, doing="reading the page") from None
                await self._settle(page)
        raise AssertionError("unreachable")

    async def _settle(self, page: Any) -> None:
        """Give a navigation the action started a moment to load; never fails."""
        from playwright.async_api import Error as PlaywrightError

        with contextlib.suppress(PlaywrightError):
            await page.wait_for_load_state("load", timeout=SETTLE_TIMEOUT_MS)

    def blocked_since(self, mark: int) -> list[BlockedRequest]:
        count = self.blocked_total - mark
        return list(self.blocked)[-count:] if count > 0 else []

    async def result(self, message: str, mark: int) -> ActionResult:
        return ActionResult(message, await self.snapshot(), self.blocked_since(mark))

    # -- acting --------------------------------------------------------------------
    async def locate(self, ref: int) -> Any:
        """The element carrying ``ref``; ToolFailure when unknown or stale."""
        page = await self.current_page()
        locator = page.locator(f'[data-df-ref="{int(ref)}"]')
        if await locator.count() == 1:
            return locator
        known = self.issued.get(int(ref))
        if known is None:
            raise ToolFailure(f"ref {ref} was never shown in a snapshot of this session; use a ref from "
                              "the latest snapshot (call browser_snapshot).", code="unknown_ref")
        fresh = await self.snapshot()
        raise ToolFailure(f"ref {ref} ({known}) is stale: that element is no longer on the page (the page "
                          f"navigated or changed). Use a ref from this fresh snapshot of {fresh.url}:\n\n"
                          f"{fresh.render()}", code="stale_ref")

    async def navigate(self, url: str) -> ActionResult:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        page = await self.current_page()
        mark = self.blocked_total
        try:
            response = await page.goto(url, wait_until="domcontentloaded", timeout=self.navigation_timeout_ms)
        except PlaywrightTimeout:
            raise ToolFailure(f"loading {url} took longer than {self.navigation_timeout_ms // 1000}s; "
                              "the page may be partly loaded: call browser_snapshot to see it.",
                              code="navigation_timeout") from None
        except PlaywrightError as exc:
            self._raise_if_blocked(url, mark, chain=[url], failed=True)
            raise playwright_failure(exc, doing=f"opening {url}", code="navigation_failed") from None
        self._raise_if_blocked(url, mark, chain=_redirect_chain(response) or [url])
        await self._settle(page)
        status = f" (HTTP {response.status})" if response is not None else ""
        return await self.result(f"Navigated to {page.url}{status}.", mark)

    def _raise_if_blocked(self, url: str, mark: int, *, chain: list[str], failed: bool = False) -> None:
        """A navigation whose document the guard refused is an error naming the hop.

        The proxy sees ``host:port`` only for https (CONNECT), so hops are matched by origin.
        """
        blocked = self.blocked_since(mark)
        for hop, request_url in enumerate(chain):
            hit = next((b for b in blocked if _origin(b.url) == _origin(request_url)), None)
            if hit is None:
                continue
            if hop == 0:
                raise ToolFailure(f"opening {url} was blocked: {hit.reason}.", code="url_blocked")
            raise ToolFailure(f"{url} redirected to {request_url} (hop {hop}), which was blocked: {hit.reason}. "
                              "The redirect target was not contacted.", code="url_blocked")
        if failed and blocked:
            raise ToolFailure(f"opening {url} led to {blocked[0].url} (a redirect or a request of the page), "
                              f"which was blocked: {blocked[0].reason}. It was not contacted.", code="url_blocked")

    async def click(self, ref: int) -> ActionResult:
        from playwright.async_api import Error as PlaywrightError

        locator = await self.locate(ref)
        label = self.issued.get(int(ref), "element")
        mark = self.blocked_total
        try:
            await locator.click(timeout=ACTION_TIMEOUT_MS)
        except PlaywrightError as exc:
            raise playwright_failure(exc, doing=f"clicking [{ref}] {label}") from None
        await self._settle(await self.current_page())
        return await self.result(f"Clicked [{ref}] {label}.", mark)

    async def type_text(self, ref: int, text: str, *, submit: bool) -> ActionResult:
        from playwright.async_api import Error as PlaywrightError

        locator = await self.locate(ref)
        label = self.issued.get(int(ref), "element")
        mark = self.blocked_total
        try:
            if await locator.evaluate("e => e.tagName") == "SELECT":
                await locator.select_option(label=text, timeout=ACTION_TIMEOUT_MS)
            else:
                await locator.fill(text, timeout=ACTION_TIMEOUT_MS)
            if submit:
                await locator.press("Enter", timeout=ACTION_TIMEOUT_MS)
        except PlaywrightError as exc:
            raise playwright_failure(exc, doing=f"typing into [{ref}] {label}") from None
        if submit:
            await self._settle(await self.current_page())
        done = f"Typed {len(text)} characters into [{ref}] {label}" + (" and pressed Enter." if submit else ".")
        return await self.result(done, mark)

    async def back(self) -> ActionResult:
        from playwright.async_api import Error as PlaywrightError

        page = await self.current_page()
        before, mark = page.url, self.blocked_total
        try:
            response = await page.go_back(wait_until="domcontentloaded", timeout=self.navigation_timeout_ms)
        except PlaywrightError as exc:
            raise playwright_failure(exc, doing="going back") from None
        if response is None and page.url == before:
            raise ToolFailure("there is no previous page in this tab's history.", code="no_history")
        await self._settle(page)
        return await self.result(f"Went back to {page.url}.", mark)

    async def text(self, ref: int | None) -> tuple[str, str, str]:
        """``(url, title, visible text)`` of the page or of one element."""
        from playwright.async_api import Error as PlaywrightError

        page = await self.current_page()
        try:
            if ref is None:
                body = await page.inner_text("body", timeout=ACTION_TIMEOUT_MS)
            else:
                body = await (await self.locate(ref)).inner_text(timeout=ACTION_TIMEOUT_MS)
        except PlaywrightError as exc:
            raise playwright_failure(exc, doing="reading the text") from None
        return page.url, await page.title(), body

    async def screenshot(self, *, full_page: bool, ref: int | None, jpeg_quality: int | None = None) -> bytes:
        from playwright.async_api import Error as PlaywrightError

        page = await self.current_page()
        kind: dict[str, Any] = {"type": "jpeg", "quality": jpeg_quality} if jpeg_quality else {"type": "png"}
        try:
            if ref is not None:
                return await (await self.locate(ref)).screenshot(timeout=ACTION_TIMEOUT_MS, **kind)
            return await page.screenshot(full_page=full_page, timeout=ACTION_TIMEOUT_MS, **kind)
        except PlaywrightError as exc:
            raise playwright_failure(exc, doing="taking the screenshot") from None


def _redirect_chain(response: Any) -> list[str]:
    """URLs from the first request to the final one, for a navigation response."""
    if response is None:
        return []
    chain, request = [], response.request
    while request is not None:
        chain.append(request.url)
        request = request.redirected_from
    return list(reversed(chain))


def _origin(url: str) -> tuple[str, int | None]:
    """``(host, port)`` of a URL, default ports filled in: what the proxy can see of a request."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return (parts.hostname or "", port or {"http": 80, "https": 443}.get(parts.scheme))

"""Fetching one URL for the model: guarded, capped, redirect by redirect.

:func:`fetch` follows redirects itself (up to :attr:`FetchLimits.max_redirects`)
so each hop is checked by the guard *and* reported: a public page that
redirects to ``169.254.169.254`` fails at that hop, with the hop named, and
the private address is never contacted.  The body is read as a stream and
cut at ``max_bytes`` (decoded bytes, so a compressed bomb stops early), and
the whole fetch, redirects included, is bounded by ``timeout``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from urllib.parse import urljoin

import httpx

from deerflow.errors import ToolFailure
from deerflow.web.transport import guarded_client
from deerflow.web.url_guard import UrlGuard, UrlRejected

USER_AGENT = "Mozilla/5.0 (compatible; DeerFlowNotebook/0.1; research agent)"
ACCEPT = "text/html,application/xhtml+xml,application/pdf;q=0.9,text/*;q=0.8,application/json;q=0.8,*/*;q=0.5"


@dataclass(frozen=True)
class FetchLimits:
    """Caps of one fetch.

    Attributes:
        max_bytes: Body bytes kept (decoded); the rest is not read.
        timeout: Seconds for the whole fetch, redirects included.
        max_redirects: Redirect hops followed.
    """

    max_bytes: int = 2_000_000
    timeout: float = 20.0
    max_redirects: int = 5


@dataclass
class FetchResult:
    """What came back.

    Attributes:
        requested: The URL asked for.
        final_url: The URL that answered (after redirects).
        status: HTTP status of the final response.
        content_type: Its ``Content-Type`` (may be empty).
        charset: The declared charset, if any.
        data: Body bytes, at most ``max_bytes``.
        truncated: The body was longer than ``max_bytes``.
        redirects: The hops followed, in order (excluding ``requested``).
        fetched_at: ISO-8601 UTC time the final response arrived.
    """

    requested: str
    final_url: str
    status: int
    content_type: str
    charset: str | None
    data: bytes
    truncated: bool
    redirects: list[str] = field(default_factory=list)
    fetched_at: str = ""


def utc_now() -> str:
    """Now, as the provenance timestamp the model sees."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


async def fetch(url: str, *, guard: UrlGuard, limits: FetchLimits, verify: bool | str = True) -> FetchResult:
    """GET ``url`` through the guard.

    Raises:
        ToolFailure: ``url_blocked`` (the URL or a redirect hop is refused),
            ``fetch_timeout``, ``fetch_failed`` (network, too many redirects, HTTP errors).
    """
    try:
        async with asyncio.timeout(limits.timeout):
            async with guarded_client(guard, timeout=limits.timeout, verify=verify,
                                      headers={"User-Agent": USER_AGENT, "Accept": ACCEPT}) as client:
                return await _follow(client, guard, url, limits)
    except TimeoutError:
        raise ToolFailure(f"fetching {url} timed out after {limits.timeout:g}s.", code="fetch_timeout") from None
    except httpx.HTTPError as exc:
        raise ToolFailure(f"could not fetch {url}: {type(exc).__name__}: {exc}".rstrip(": "),
                          code="fetch_failed") from None


async def _follow(client: httpx.AsyncClient, guard: UrlGuard, url: str, limits: FetchLimits) -> FetchResult:
    current, hops = url, []
    for _ in range(limits.max_redirects + 1):
        try:
            guard.precheck(current)
            async with client.stream("GET", current) as response:
                if response.is_redirect and "location" in response.headers:
                    current = urljoin(current, response.headers["location"])
                    hops.append(current)
                    continue
                return await _read(response, url, hops, limits)
        except UrlRejected as exc:
            raise _blocked(url, hops, exc) from None
    raise ToolFailure(f"{url} redirected more than {limits.max_redirects} times; giving up.", code="fetch_failed")


def _blocked(url: str, hops: list[str], exc: UrlRejected) -> ToolFailure:
    if not hops:
        return ToolFailure(f"{exc}. Only public http(s) URLs can be fetched.", code="url_blocked")
    return ToolFailure(f"{url} redirected to {exc.url} (hop {len(hops)}), which was blocked: {exc.reason}. "
                       "The redirect target was not contacted.", code="url_blocked")


async def _read(response: httpx.Response, requested: str, hops: list[str], limits: FetchLimits) -> FetchResult:
    if response.status_code >= 400:
        raise ToolFailure(f"{hops[-1] if hops else requested} answered HTTP {response.status_code} "
                          f"{response.reason_phrase}.", code="fetch_failed")
    chunks: list[bytes] = []
    size, truncated = 0, False
    async for chunk in response.aiter_bytes():
        room = limits.max_bytes - size
        if len(chunk) > room:
            chunks.append(chunk[:room])
            truncated = True
            break
        chunks.append(chunk)
        size += len(chunk)
    return FetchResult(
        requested=requested, final_url=hops[-1] if hops else requested, status=response.status_code,
        content_type=response.headers.get("content-type", ""), charset=response.charset_encoding,
        data=b"".join(chunks), truncated=truncated, redirects=hops, fetched_at=utc_now())

"""The web capability of one host: guard + fetch limits + search provider.

Built once from ``config.web`` when the run manager opens (a bad provider
setting is a startup error) and handed to tools as
``RunContext.services.web``.  Tests build one with a
:class:`~deerflow.web.url_guard.StaticResolver` to pin names to addresses.
"""

from __future__ import annotations

from dataclasses import dataclass

from deerflow.config.schema import WebConfig
from deerflow.web.extract import extract
from deerflow.web.fetch import FetchLimits, FetchResult, fetch, utc_now
from deerflow.web.search import ImageHit, SearchHit, SearchProvider, make_search_provider
from deerflow.web.untrusted import Provenance, wrap_untrusted
from deerflow.web.url_guard import Resolver, UrlGuard


@dataclass(frozen=True)
class FetchedPage:
    """A fetched document as the model sees it.

    Attributes:
        text: Provenance header + neutralized content, within the requested size.
        result: The raw fetch (URLs, status, type, size).
        title: The document's title, if any.
        chars: Length of the extracted content before the ``max_chars`` cut.
        shown_chars: How much of it ``text`` carries.
    """

    text: str
    result: FetchResult
    title: str | None
    chars: int
    shown_chars: int


@dataclass
class WebService:
    """Fetch and search for the web tools.

    Args:
        guard: Checks every URL the model asks for, and every redirect hop.
        limits: Size and time caps of one fetch.
        search: The configured search provider.
        verify: TLS verification for fetches (tests may pass a CA bundle path).
    """

    guard: UrlGuard
    limits: FetchLimits
    search: SearchProvider
    verify: bool | str = True

    @classmethod
    def from_config(cls, config: WebConfig, *, resolver: Resolver | None = None,
                    config_file: str | None = None) -> WebService:
        """The service ``config`` describes. Raises ConfigError for a bad provider setting."""
        guard = UrlGuard(allow_private_addresses=config.allow_private_addresses, resolver=resolver)
        limits = FetchLimits(max_bytes=config.max_fetch_bytes, timeout=config.fetch_timeout)
        return cls(guard, limits, make_search_provider(config, config_file=config_file))

    async def fetch_page(self, url: str, *, max_chars: int) -> FetchedPage:
        """Fetch ``url`` and render it for the model (see :mod:`deerflow.web.untrusted`).

        Raises:
            ToolFailure: blocked URL or hop, timeout, network or HTTP error, unsupported content.
        """
        result = await fetch(url, guard=self.guard, limits=self.limits, verify=self.verify)
        doc = extract(result.data, content_type=result.content_type, charset=result.charset,
                      url=result.final_url)
        content = doc.text
        shown = content[:max_chars]
        details = [result.content_type.split(";")[0] or "unknown type", f"{len(result.data):,} bytes"]
        if doc.title:
            details.insert(0, f"title {doc.title!r}")
        if result.truncated:
            details.append(f"body cut at {self.limits.max_bytes:,} bytes")
        if len(content) > max_chars:
            details.append(f"showing the first {max_chars:,} of {len(content):,} characters "
                           "(call again with a larger max_chars for more)")
        provenance = Provenance(source=result.final_url, requested=url, fetched_at=result.fetched_at,
                                details=details, hidden_removed=doc.hidden_removed)
        return FetchedPage(wrap_untrusted(shown or "(no readable text)", provenance), result, doc.title,
                           len(content), len(shown))

    async def web_search(self, query: str, *, max_results: int) -> tuple[str, list[SearchHit]]:
        """Search results rendered for the model (snippets neutralized), and the hits."""
        hits = await self.search.search(query, max_results=max_results)
        lines = [f"{i}. {_clean(h.title)}\n   {h.url}\n   {_clean(h.snippet)}" for i, h in enumerate(hits, 1)]
        return self._render(query, "web", lines), hits

    async def image_search(self, query: str, *, max_results: int) -> tuple[str, list[ImageHit]]:
        """Image results rendered for the model, and the hits."""
        hits = await self.search.search_images(query, max_results=max_results)
        lines = []
        for i, h in enumerate(hits, 1):
            size = f" ({h.width}×{h.height})" if h.width and h.height else ""
            page = f"\n   page: {h.page_url}" if h.page_url else ""
            lines.append(f"{i}. {_clean(h.title) or '(untitled)'}{size}\n   image: {h.image_url}{page}")
        return self._render(query, "image", lines), hits

    def _render(self, query: str, kind: str, lines: list[str]) -> str:
        body = "\n".join(lines) if lines else "(no results)"
        provenance = Provenance(source=f"{self.search.name} {kind} search for {query!r}",
                                fetched_at=utc_now(), details=[f"{len(lines)} result(s)"])
        return wrap_untrusted(body, provenance)


def _clean(text: str) -> str:
    """One line per field, so neutralization (line by line) removes a bad snippet, not its URL."""
    return " ".join(text.split())

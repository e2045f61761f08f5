"""Web and image search providers, one small class per HTTP contract.

``web.search_provider`` picks one: ``duckduckgo`` (keyless, the default),
``tavily``, ``searxng``, or ``module:Class`` for your own
:class:`SearchProvider`.  ``web.base_url`` overrides the provider's endpoint
(a self-hosted SearXNG, a proxy, or a local fake in tests) and
``web.api_key`` carries its key.

Provider endpoints are chosen by the operator, not the model, so they are
called directly rather than through the URL guard (a SearXNG instance is
usually on the LAN).  What they return is still untrusted page text: the web
tools neutralize it before the model sees it.

The contracts:

* **DuckDuckGo** — ``POST {base}/html/`` with form ``q``; results are
  ``.result`` blocks with ``a.result__a`` (links wrapped as
  ``/l/?uddg=<url>``) and ``.result__snippet``.  Images: ``GET {base}/?q=``
  yields a ``vqd`` token, then ``GET {base}/i.js?q=&vqd=&o=json`` returns
  ``{"results": [{title, image, thumbnail, url, width, height}]}``.
* **Tavily** — ``POST {base}/search`` with ``Authorization: Bearer KEY`` and
  JSON ``{query, max_results, include_images}``; returns
  ``{"results": [{title, url, content}], "images": [...]}``.
* **SearXNG** — ``GET {base}/search?q=&format=json&categories=general|images``
  returns ``{"results": [{title, url, content, img_src, thumbnail_src}]}``
  (the instance must enable the JSON format).
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

from deerflow.config.schema import WebConfig
from deerflow.errors import ConfigError
from deerflow.reflection import resolve_variable


class SearchError(RuntimeError):
    """The provider could not answer (HTTP error, bad response, rate limit)."""


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class ImageHit:
    title: str
    image_url: str
    thumbnail_url: str | None = None
    page_url: str | None = None
    width: int | None = None
    height: int | None = None


class SearchProvider(ABC):
    """A search backend.

    Args:
        base_url: Endpoint root (None: the provider's public default).
        api_key: The provider's key, when it needs one.
        timeout: Seconds per HTTP request.
    """

    name = "provider"
    default_base_url: str | None = None

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None, timeout: float = 20.0) -> None:
        base = base_url or self.default_base_url
        if not base:
            raise ConfigError(f"the {self.name} search provider needs web.base_url", key="web.base_url")
        self.base_url = base.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    @abstractmethod
    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        """Web results for ``query``, best first."""

    @abstractmethod
    async def search_images(self, query: str, *, max_results: int) -> list[ImageHit]:
        """Image results for ``query``, best first."""

    def endpoint(self, path: str) -> str:
        return f"{self.base_url}{path}"

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=True,
                                     headers={"User-Agent": "Mozilla/5.0 (compatible; DeerFlowNotebook/0.1)"}
                                     ) as client:
            try:
                response = await client.request(method, self.endpoint(path), **kwargs)
            except httpx.HTTPError as exc:
                raise SearchError(f"{self.name} is unreachable: {type(exc).__name__}") from None
        if response.status_code >= 400:
            raise SearchError(f"{self.name} answered HTTP {response.status_code}")
        return response

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = await self._request(method, path, **kwargs)
        try:
            data = response.json()
        except ValueError:
            raise SearchError(f"{self.name} did not return JSON") from None
        if not isinstance(data, dict):
            raise SearchError(f"{self.name} returned an unexpected JSON shape")
        return data


class DuckDuckGoSearch(SearchProvider):
    """Keyless search through DuckDuckGo's HTML endpoint."""

    name = "duckduckgo"
    default_base_url = "https://html.duckduckgo.com"
    images_base_url = "https://duckduckgo.com"

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None, timeout: float = 20.0) -> None:
        super().__init__(base_url=base_url, api_key=api_key, timeout=timeout)
        self.images_base = (base_url or self.images_base_url).rstrip("/")

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        response = await self._request("POST", "/html/", data={"q": query, "b": ""})
        return parse_duckduckgo_html(response.text)[:max_results]

    async def search_images(self, query: str, *, max_results: int) -> list[ImageHit]:
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=True) as client:
            try:
                page = await client.get(f"{self.images_base}/", params={"q": query, "iax": "images", "ia": "images"})
                match = re.search(r"vqd=[\"']?([\w-]+)", page.text)
                if not match:
                    raise SearchError("duckduckgo gave no image search token (rate limited?)")
                response = await client.get(f"{self.images_base}/i.js", headers={"Referer": f"{self.images_base}/"},
                                            params={"q": query, "vqd": match.group(1), "o": "json", "l": "wt-wt",
                                                    "f": ",,,,,", "p": "1"})
            except httpx.HTTPError as exc:
                raise SearchError(f"duckduckgo is unreachable: {type(exc).__name__}") from None
        if response.status_code >= 400:
            raise SearchError(f"duckduckgo image search answered HTTP {response.status_code}")
        try:
            results = response.json().get("results", [])
        except ValueError:
            raise SearchError("duckduckgo image search did not return JSON") from None
        return [ImageHit(str(r.get("title", "")), str(r["image"]), r.get("thumbnail"), r.get("url"),
                         _int(r.get("width")), _int(r.get("height")))
                for r in results if isinstance(r, dict) and r.get("image")][:max_results]


def parse_duckduckgo_html(html: str) -> list[SearchHit]:
    """Results of a DuckDuckGo HTML page (ads skipped, redirect links unwrapped)."""
    try:
        from lxml import html as lxml_html
    except ModuleNotFoundError:
        raise SearchError("reading DuckDuckGo results needs lxml: the 'web' extra (pip install '.[web]' in a clone)") from None

    if not html.strip():
        return []
    root = lxml_html.fromstring(html)
    hits: list[SearchHit] = []
    for block in root.xpath("//div[contains(concat(' ', normalize-space(@class), ' '), ' result ')]"):
        if "result--ad" in (block.get("class") or ""):
            continue
        links = block.xpath(".//a[contains(@class, 'result__a')]")
        if not links:
            continue
        snippet = block.xpath(".//*[contains(@class, 'result__snippet')]")
        url = _unwrap_ddg(links[0].get("href") or "")
        if url:
            hits.append(SearchHit(" ".join(links[0].text_content().split()), url,
                                  " ".join(snippet[0].text_content().split()) if snippet else ""))
    return hits


def _unwrap_ddg(href: str) -> str:
    parts = urlsplit(urljoin("https://duckduckgo.com/", href))
    if parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        return target[0] if target else ""
    return href if href.startswith(("http://", "https://")) else ""


class TavilySearch(SearchProvider):
    """Tavily's search API (needs ``web.api_key`` or ``TAVILY_API_KEY``)."""

    name = "tavily"
    default_base_url = "https://api.tavily.com"

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None, timeout: float = 20.0) -> None:
        key = api_key or os.environ.get("TAVILY_API_KEY")
        if not key:
            raise ConfigError("the tavily search provider needs an API key: set web.api_key "
                              "(e.g. $TAVILY_API_KEY)", key="web.api_key")
        super().__init__(base_url=base_url, api_key=key, timeout=timeout)

    async def _search(self, query: str, max_results: int, *, images: bool) -> dict[str, Any]:
        return await self._json("POST", "/search", headers={"Authorization": f"Bearer {self.api_key}"},
                                json={"query": query, "max_results": max_results, "search_depth": "basic",
                                      "include_images": images, "include_image_descriptions": images,
                                      "include_answer": False})

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        data = await self._search(query, max_results, images=False)
        return [SearchHit(str(r.get("title", "")), str(r["url"]), str(r.get("content", "")))
                for r in data.get("results", []) if isinstance(r, dict) and r.get("url")][:max_results]

    async def search_images(self, query: str, *, max_results: int) -> list[ImageHit]:
        data = await self._search(query, max_results, images=True)
        hits = []
        for item in data.get("images", []):
            if isinstance(item, str):
                hits.append(ImageHit("", item))
            elif isinstance(item, dict) and item.get("url"):
                hits.append(ImageHit(str(item.get("description", "")), str(item["url"])))
        return hits[:max_results]


class SearXNGSearch(SearchProvider):
    """A SearXNG instance (``web.base_url``) with the JSON format enabled."""

    name = "searxng"

    async def _results(self, query: str, category: str) -> list[dict[str, Any]]:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = await self._json("GET", "/search", headers=headers,
                                params={"q": query, "format": "json", "categories": category, "pageno": 1})
        return [r for r in data.get("results", []) if isinstance(r, dict)]

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        results = await self._results(query, "general")
        return [SearchHit(str(r.get("title", "")), str(r["url"]), str(r.get("content", "")))
                for r in results if r.get("url")][:max_results]

    async def search_images(self, query: str, *, max_results: int) -> list[ImageHit]:
        results = await self._results(query, "images")
        return [ImageHit(str(r.get("title", "")), str(r["img_src"]), r.get("thumbnail_src"), r.get("url"),
                         *_resolution(r.get("resolution")))
                for r in results if r.get("img_src")][:max_results]


PROVIDERS: dict[str, type[SearchProvider]] = {
    "duckduckgo": DuckDuckGoSearch, "ddg": DuckDuckGoSearch, "tavily": TavilySearch, "searxng": SearXNGSearch,
}


def make_search_provider(config: WebConfig, *, config_file: str | None = None) -> SearchProvider:
    """The provider ``config.search_provider`` names.

    Raises:
        ConfigError: unknown provider, or one missing its key or base URL.
    """
    name = config.search_provider
    if ":" in name:
        cls = resolve_variable(name, key="web.search_provider", file=config_file)
        if not (isinstance(cls, type) and issubclass(cls, SearchProvider)):
            raise ConfigError(f"{name!r} is not a SearchProvider class", file=config_file, key="web.search_provider")
    elif name.lower() in PROVIDERS:
        cls = PROVIDERS[name.lower()]
    else:
        known = ", ".join(sorted(PROVIDERS))
        raise ConfigError(f"unknown search provider {name!r}; use one of {known} or 'module:Class'",
                          file=config_file, key="web.search_provider")
    try:
        return cls(base_url=config.base_url, api_key=config.api_key, timeout=config.fetch_timeout)
    except ConfigError as exc:
        raise ConfigError(exc.problem, file=config_file, key=exc.key) from None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _resolution(value: Any) -> tuple[int | None, int | None]:
    match = re.match(r"\s*(\d+)\s*[x×]\s*(\d+)", str(value or ""))
    return (int(match.group(1)), int(match.group(2))) if match else (None, None)

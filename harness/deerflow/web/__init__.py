"""The web capability: the URL guard, guarded fetching, readable extraction, search providers.

Everything a model-chosen URL touches goes through :class:`UrlGuard`
(:mod:`deerflow.web.url_guard`); fetched and searched text is untrusted and
neutralized before the model sees it (:mod:`deerflow.web.untrusted`).
"""

from deerflow.web.search import ImageHit, SearchHit, SearchProvider, make_search_provider
from deerflow.web.service import FetchedPage, WebService
from deerflow.web.url_guard import (
    CheckedUrl,
    Resolver,
    StaticResolver,
    SystemResolver,
    UrlGuard,
    UrlRejected,
    validate_public_http_url,
)

__all__ = [
    "CheckedUrl",
    "FetchedPage",
    "ImageHit",
    "Resolver",
    "SearchHit",
    "SearchProvider",
    "StaticResolver",
    "SystemResolver",
    "UrlGuard",
    "UrlRejected",
    "WebService",
    "make_search_provider",
    "validate_public_http_url",
]

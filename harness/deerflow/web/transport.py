"""An httpx transport that connects only to addresses the URL guard checked.

A guard that validates a name and then lets the HTTP library resolve it again
has a gap: the name can resolve to a public address for the check and to
``127.0.0.1`` for the connection (DNS rebinding).  :class:`GuardedTransport`
closes it by resolving once, in the guard, and sending the request to the
checked IP itself: the URL's host becomes the address, the ``Host`` header
keeps the original name, and for https the original name is the TLS SNI and
the name the certificate is verified against (httpcore's ``sni_hostname``
extension).

Every request through the transport is checked, so each redirect hop is
checked too even if a caller lets httpx follow redirects.  Connections are
not kept alive: a pooled connection is keyed by address, and reusing one
opened for another host name would skip that name's certificate check.
"""

from __future__ import annotations

import httpx

from deerflow.web.url_guard import CheckedUrl, UrlGuard


class GuardedTransport(httpx.AsyncBaseTransport):
    """Checks every request with ``guard`` and connects to the checked address.

    Args:
        guard: The policy and resolver.
        verify: TLS verification, as for httpx (tests may pass an SSL context).
    """

    def __init__(self, guard: UrlGuard, *, verify: bool | str = True) -> None:
        self.guard = guard
        self._inner = httpx.AsyncHTTPTransport(
            verify=verify, trust_env=False, limits=httpx.Limits(max_keepalive_connections=0))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        checked = await self.guard.acheck(str(request.url))
        pinned = pin_request(request, checked)
        return await self._inner.handle_async_request(pinned)

    async def aclose(self) -> None:
        await self._inner.aclose()


def pin_request(request: httpx.Request, checked: CheckedUrl) -> httpx.Request:
    """A copy of ``request`` addressed to the first checked IP, with Host and SNI unchanged."""
    extensions = dict(request.extensions)
    if checked.scheme == "https":
        extensions["sni_hostname"] = checked.host
    return httpx.Request(request.method, request.url.copy_with(host=checked.addresses[0]),
                         headers=request.headers, stream=request.stream, extensions=extensions)


def guarded_client(guard: UrlGuard, *, timeout: float, verify: bool | str = True,
                   headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    """An ``AsyncClient`` whose every request passes ``guard``; redirects are left to the caller."""
    return httpx.AsyncClient(transport=GuardedTransport(guard, verify=verify), timeout=timeout,
                             follow_redirects=False, trust_env=False, headers=headers)

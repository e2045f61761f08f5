"""The URL guard: which URLs an agent may make the host fetch.

Every URL a model chooses (``web_fetch``, the browser, every redirect hop and
every subresource a page asks for) passes :meth:`UrlGuard.check` first.  The
guard exists because the host sits inside networks the model must not reach:
the cloud metadata service (credentials), loopback services (the Jupyter
server itself), the LAN.

Decisions, in one place:

* **Only http and https.**  ``file:``, ``ftp:``, ``gopher:``, ``data:`` and
  the rest are refused by scheme.
* **The host is read the way a browser reads it.**  URLs with backslashes,
  whitespace or control characters are refused (parsers disagree on them);
  a host whose last label is numeric is parsed as WHATWG IPv4, so
  ``2130706433``, ``0x7f.1`` and ``017700000001`` are all ``127.0.0.1``;
  IPv6 zone ids are refused.
* **Every resolved address is checked**, not just the first, by the one
  classifier the browser and egress proxies use too
  (:mod:`deerflow.web.addresses`): private, loopback, link-local, CGNAT,
  multicast, documentation, benchmarking, reserved, unspecified and every
  other non-public address is refused, and IPv6 forms that embed an IPv4
  address (IPv4-mapped, 6to4, NAT64) are judged by the embedded address.  Names that
  mean "this machine" or "the metadata service" (``localhost``,
  ``*.localhost``, ``metadata.google.internal``) are refused before any lookup.
* **``allow_private_addresses``** is the opt-out for intentional internal
  targets (a notebook serving its own pages on loopback).  It never opens the
  cloud metadata endpoints: no legitimate page lives there.
* **``allowed_addresses``** is the narrow opt-out: exact addresses or networks
  treated as public, for one known internal service without opening the LAN.
* **The checked address is the connected address.**  :class:`CheckedUrl`
  carries the addresses that passed; :mod:`deerflow.web.transport` connects
  to one of them, never re-resolving the name, so DNS rebinding between the
  check and the connection is not possible for httpx fetches.
* **The resolver is injectable** (:class:`StaticResolver`), so tests and
  operators can pin names to addresses.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from deerflow.web.addresses import METADATA_ADDRESSES, IPAddress, classify, parse_address

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOWED_SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}

METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "instance-data",
                            "instance-data.ec2.internal"})
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})

_FORBIDDEN_CHARS = re.compile(r"[\\\s\x00-\x1f\x7f]")


class UrlRejected(ValueError):
    """A URL the guard refuses; ``reason`` says why in words a model can act on.

    Args:
        url: The URL as given.
        reason: Why it was refused (``"loopback address 127.0.0.1"``...).
    """

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"refused {_shorten(url)}: {reason}")


@dataclass(frozen=True)
class CheckedUrl:
    """A URL that passed the guard.

    Attributes:
        url: The URL as given.
        scheme: ``http`` or ``https``.
        host: The host in ASCII (IDNA), lower case, without a trailing dot;
            for a numeric IPv4 form, the dotted address it denotes.
        port: The explicit or default port.
        addresses: The resolved addresses, all of which passed; connect to these.
    """

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


class Resolver(Protocol):
    """Turns a host name into IP addresses (strings)."""

    def resolve(self, host: str, port: int) -> list[str]: ...

    async def aresolve(self, host: str, port: int) -> list[str]: ...


class SystemResolver:
    """The operating system's resolver (``getaddrinfo``)."""

    def resolve(self, host: str, port: int) -> list[str]:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise LookupError(f"cannot resolve {host}: {exc}") from None
        return _unique(str(info[4][0]) for info in infos)

    async def aresolve(self, host: str, port: int) -> list[str]:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise LookupError(f"cannot resolve {host}: {exc}") from None
        return _unique(str(info[4][0]) for info in infos)


class StaticResolver:
    """Fixed name → addresses; other names go to ``fallback`` (none: unresolvable).

    Args:
        mapping: Host name (lower case) → list of IP addresses.
        fallback: Resolver for names not in ``mapping``.
    """

    def __init__(self, mapping: Mapping[str, Iterable[str]], *, fallback: Resolver | None = None) -> None:
        self.mapping = {k.lower().rstrip("."): list(v) for k, v in mapping.items()}
        self.fallback = fallback

    def resolve(self, host: str, port: int) -> list[str]:
        if host in self.mapping:
            return list(self.mapping[host])
        if self.fallback is None:
            raise LookupError(f"cannot resolve {host}: unknown name")
        return self.fallback.resolve(host, port)

    async def aresolve(self, host: str, port: int) -> list[str]:
        if host in self.mapping or self.fallback is None:
            return self.resolve(host, port)
        return await self.fallback.aresolve(host, port)


def address_problem(ip: IPAddress, *, allow_private: bool = False) -> str | None:
    """Why ``ip`` may not be contacted, or None when it is a public address.

    The verdict is :func:`deerflow.web.addresses.classify`'s, shared with the
    browser and egress proxies.

    Args:
        ip: The address.
        allow_private: Accept every non-public address except the metadata endpoints.
    """
    verdict = classify(ip)
    if verdict is None or (allow_private and not verdict.metadata):
        return None
    return str(verdict)


def parse_ipv4_host(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a URL host denotes under WHATWG rules, or None for a name.

    A host whose last label is a number (``2130706433``, ``0x7f.1``,
    ``0177.0.0.1``) is an IPv4 address to a browser, in decimal, octal or hex
    parts.  One that looks numeric but does not parse is refused, because
    resolvers disagree on what it means.

    Raises:
        ValueError: a numeric-looking host that is not a valid address.
    """
    labels = host.split(".")
    if labels and labels[-1] == "" and len(labels) > 1:
        labels = labels[:-1]
    if not labels or not re.fullmatch(r"(0[xX][0-9a-fA-F]*|[0-9]+)", labels[-1]):
        return None
    if len(labels) > 4:
        raise ValueError("numeric host with more than four parts")
    parts = [_ipv4_part(label) for label in labels]
    value = 0
    for part in parts[:-1]:
        if part > 255:
            raise ValueError("numeric host part above 255")
        value = value * 256 + part
    last_bits = 8 * (5 - len(parts))
    if parts[-1] >= 1 << last_bits:
        raise ValueError("numeric host out of range")
    return ipaddress.IPv4Address((value << last_bits) + parts[-1])


def _ipv4_part(label: str) -> int:
    if label == "":
        raise ValueError("empty part in numeric host")
    if label[:2].lower() == "0x":
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label.startswith("0"):
        if not re.fullmatch(r"[0-7]+", label):
            raise ValueError(f"invalid octal part {label!r}")
        return int(label, 8)
    if not label.isdigit():
        raise ValueError(f"invalid part {label!r}")
    return int(label)


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    literal: IPAddress | None


class UrlGuard:
    """Checks URLs against the policy above; one per host component.

    Args:
        allow_private_addresses: Opt-out for intentional internal targets.
        allowed_addresses: Addresses or networks (``"10.1.2.3"``, ``"10.1.0.0/16"``)
            treated as public.
        resolver: Name resolution (default: the system's).
    """

    def __init__(self, *, allow_private_addresses: bool = False, allowed_addresses: Iterable[str] = (),
                 resolver: Resolver | None = None) -> None:
        self.allow_private = allow_private_addresses
        self.allowed: tuple[IPNetwork, ...] = tuple(
            ipaddress.ip_network(a, strict=False) for a in allowed_addresses)
        self.resolver: Resolver = resolver or SystemResolver()

    def precheck(self, url: str) -> None:
        """Everything that needs no name resolution: scheme, host form, refused names, literal addresses.

        HTTP libraries normalize some URLs they cannot fetch (``file:`` ones) before a
        transport sees them; checking the URL as given first keeps the refusal precise.
        """
        target = self._parse(url)
        if target.literal is not None:
            self._finish(url, target, [str(target.literal)])

    def check(self, url: str) -> CheckedUrl:
        """Check ``url`` (resolving synchronously). Raises :class:`UrlRejected`."""
        target = self._parse(url)
        if target.literal is not None:
            return self._finish(url, target, [str(target.literal)])
        try:
            addresses = self.resolver.resolve(target.host, target.port)
        except LookupError as exc:
            raise UrlRejected(url, str(exc)) from None
        return self._finish(url, target, addresses)

    async def acheck(self, url: str) -> CheckedUrl:
        """Like :meth:`check`, resolving without blocking the event loop."""
        target = self._parse(url)
        if target.literal is not None:
            return self._finish(url, target, [str(target.literal)])
        try:
            addresses = await self.resolver.aresolve(target.host, target.port)
        except LookupError as exc:
            raise UrlRejected(url, str(exc)) from None
        return self._finish(url, target, addresses)

    def _parse(self, url: str) -> _Target:
        if not isinstance(url, str) or not url:
            raise UrlRejected(str(url), "empty URL")
        if _FORBIDDEN_CHARS.search(url):
            raise UrlRejected(url, "URL contains whitespace, control characters or backslashes")
        try:
            parts = urlsplit(url)
        except ValueError as exc:
            raise UrlRejected(url, f"malformed URL ({exc})") from None
        scheme = parts.scheme.lower()
        if scheme not in ALLOWED_SCHEMES:
            shown = f"{scheme}:" if scheme else "a relative URL"
            raise UrlRejected(url, f"only http and https URLs can be fetched, not {shown}")
        try:
            raw_host, port = parts.hostname, parts.port
        except ValueError as exc:
            raise UrlRejected(url, f"bad host or port ({exc})") from None
        if not raw_host:
            raise UrlRejected(url, "the URL has no host")
        host = _ascii_host(url, raw_host)
        literal = self._literal(url, host)
        if literal is None:
            self._check_name(url, host)
        return _Target(scheme, str(literal) if literal else host, port or DEFAULT_PORTS[scheme], literal)

    def _literal(self, url: str, host: str) -> IPAddress | None:
        if ":" in host:
            if "%" in host:
                raise UrlRejected(url, "IPv6 zone identifiers are not allowed")
            try:
                return ipaddress.IPv6Address(host)
            except ValueError:
                raise UrlRejected(url, f"invalid IPv6 address {host}") from None
        try:
            return parse_ipv4_host(host)
        except ValueError as exc:
            raise UrlRejected(url, f"ambiguous numeric host {host!r}: {exc}") from None

    def _check_name(self, url: str, host: str) -> None:
        if host in METADATA_NAMES:
            raise UrlRejected(url, f"{host} is the cloud metadata service")
        if self.allow_private:
            return
        if host in LOCAL_NAMES or host.endswith(".localhost"):
            raise UrlRejected(url, f"{host} names this machine (loopback)")

    def _finish(self, url: str, target: _Target, addresses: list[str]) -> CheckedUrl:
        if not addresses:
            raise UrlRejected(url, f"{target.host} resolved to no address")
        for raw in addresses:
            problem = self.address_problem(raw)
            if problem:
                via = "" if target.literal is not None else f"{target.host} resolves to "
                raise UrlRejected(url, f"{via}{problem}; only public internet addresses are allowed")
        return CheckedUrl(url, target.scheme, target.host, target.port, tuple(addresses))

    def address_problem(self, raw: str) -> str | None:
        """Why the address ``raw`` may not be contacted under this guard, or None."""
        try:
            ip = parse_address(raw)
        except ValueError:
            return f"unparseable address {raw!r}"
        if ip in METADATA_ADDRESSES:
            return f"cloud metadata address {ip}"
        if any(ip in net for net in self.allowed):
            return None
        return address_problem(ip, allow_private=self.allow_private)


def validate_public_http_url(url: str, *, allow_private_addresses: bool = False,
                             resolver: Resolver | None = None) -> CheckedUrl:
    """Check that ``url`` is an http(s) URL whose every address is public.

    The shared entry point for one-off checks; long-lived components hold a
    :class:`UrlGuard` instead.

    Raises:
        UrlRejected: with a message saying why (scheme, host form, which address).
    """
    return UrlGuard(allow_private_addresses=allow_private_addresses, resolver=resolver).check(url)


def _ascii_host(url: str, host: str) -> str:
    host = host.lower()
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        raise UrlRejected(url, f"invalid international host name {host!r}") from None


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _shorten(url: str, limit: int = 200) -> str:
    return url if len(url) <= limit else url[: limit - 1] + "…"

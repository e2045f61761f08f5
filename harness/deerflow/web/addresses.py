"""Which IP addresses count as "the public internet": the one classifier every guard uses.

Three components decide whether the host may connect somewhere on a model's
behalf: the URL guard (``web_fetch`` and every redirect hop,
:mod:`deerflow.web.url_guard`), the browser's guarded proxy
(:mod:`deerflow.browser.proxy`, through the URL guard) and the sandbox's
egress proxy (:mod:`deerflow.sandbox.network.egress_proxy`).  They must give the same
answer for the same address, so the answer lives here, in one table.

Why not ``ipaddress``'s ``is_global``: its tables change between Python
versions, and it judges IPv6 forms that *carry* an IPv4 address by the IPv6
prefix alone, so ``64:ff9b::7f00:1`` (NAT64 of 127.0.0.1) and
``2002:7f00:1::1`` (6to4 of 127.0.0.1) look public to it.  Here:

* **IPv4** is public unless it falls in one of the special-purpose blocks
  below (RFC 6890 and its successors): this network, private, CGNAT,
  loopback, link-local, IETF protocol assignments, documentation,
  benchmarking, the 6to4 relay anycast, multicast, reserved, broadcast.
* **IPv6** is public only inside ``2000::/3`` (global unicast) and outside the
  special blocks in it (IETF protocol assignments including Teredo and
  benchmarking, documentation, 6to4 handled below); everything else
  (unspecified, loopback, unique-local, link-local, site-local, multicast,
  discard, unassigned space) is refused.
* **IPv6 that embeds IPv4** is judged by the embedded address: IPv4-mapped
  (``::ffff:a.b.c.d``), IPv4-translated (``::ffff:0:a.b.c.d``), NAT64 well-known
  prefix (``64:ff9b::/96``) and 6to4 (``2002::/16``).  IPv4-compatible
  (``::a.b.c.d``, deprecated), local-use NAT64 (``64:ff9b:1::/48``, whose
  translator is on the local network) and Teredo (``2001::/32``, a tunnel to
  anywhere) are refused outright.
* **Cloud metadata endpoints** are named separately: callers refuse them even
  when the operator opened private addresses.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254",
))
"""Cloud instance-metadata endpoints (AWS/GCP/Azure, ECS, Alibaba): refused even with private access on."""


def _nets(*pairs: tuple[str, str]) -> tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...]:
    return tuple((ipaddress.ip_network(net), label) for net, label in pairs)


_IPV4_SPECIAL = _nets(
    ("0.0.0.0/32", "unspecified"),
    ("0.0.0.0/8", "this-network"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "6to4 relay"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
)
_IPV6_SPECIAL = _nets(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "IPv4-compatible"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("2001::/32", "Teredo"),
    ("2001:2::/48", "benchmarking"),
    ("2001::/23", "IETF protocol"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "SRv6"),
    ("fc00::/7", "private"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")


@dataclass(frozen=True)
class Verdict:
    """Why an address is not public (``None`` from :func:`classify` when it is).

    Attributes:
        kind: ``loopback``, ``private``, ``link-local``, ``cloud metadata``...
        address: The address judged, as given.
        embedded: The IPv4 address the verdict is really about, for IPv6 forms carrying one.
    """

    kind: str
    address: IPAddress
    embedded: ipaddress.IPv4Address | None = None

    @property
    def metadata(self) -> bool:
        return self.kind == "cloud metadata"

    def __str__(self) -> str:
        if self.embedded is not None:
            return f"{self.kind} address {self.embedded} (embedded in IPv6 address {self.address})"
        return f"{self.kind} address {self.address}"


def parse_address(raw: str) -> IPAddress:
    """An address from text; an IPv6 zone id (``%eth0``) is dropped.

    Raises:
        ValueError: not an IP address.
    """
    return ipaddress.ip_address(raw.strip().strip("[]").split("%", 1)[0])


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, translated, NAT64, 6to4), if any."""
    if ip in _MAPPED or ip in _TRANSLATED or ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIXTOFOUR:
        return ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)
    return None


def classify(ip: IPAddress) -> Verdict | None:
    """Why ``ip`` is not a public internet address, or None when it is."""
    if ip in METADATA_ADDRESSES:
        return Verdict("cloud metadata", ip)
    if isinstance(ip, ipaddress.IPv4Address):
        kind = _special(ip, _IPV4_SPECIAL)
        return Verdict(kind, ip) if kind else None
    inner = embedded_ipv4(ip)
    if inner is not None:
        verdict = classify(inner)
        return Verdict(verdict.kind, ip, inner) if verdict else None
    kind = _special(ip, _IPV6_SPECIAL)
    if kind is None and ip not in _GLOBAL_UNICAST:
        kind = "reserved"
    return Verdict(kind, ip) if kind else None


def is_public(ip: IPAddress) -> bool:
    """Whether ``ip`` is a public internet address (see the module docstring)."""
    return classify(ip) is None


def _special(ip: IPAddress, table: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...]
             ) -> str | None:
    return next((label for net, label in table if ip in net), None)


__all__ = ["METADATA_ADDRESSES", "IPAddress", "Verdict", "classify", "embedded_ipv4", "is_public",
           "parse_address"]

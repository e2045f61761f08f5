"""The URL guard: what may be fetched, judged the way a browser reads the URL."""

from __future__ import annotations

import ipaddress

import pytest

from deerflow.web.url_guard import (
    StaticResolver,
    UrlGuard,
    UrlRejected,
    parse_ipv4_host,
    validate_public_http_url,
)

PUBLIC = StaticResolver({"example.org": ["93.184.215.14"], "dual.example": ["93.184.215.14", "2606:4700::1"],
                         "intranet.example": ["10.1.2.3"], "mixed.example": ["93.184.215.14", "192.168.1.5"],
                         "rebind.example": ["127.0.0.1"], "v6private.example": ["fd12::1"],
                         "localhost": ["127.0.0.1"]})


def check(url: str, **kwargs) -> None:
    validate_public_http_url(url, resolver=PUBLIC, **kwargs)


@pytest.mark.parametrize(("url", "reason"), [
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata address 169.254.169.254"),
    ("http://localhost", "localhost names this machine"),
    ("http://LOCALHOST.:8888/api", "localhost names this machine"),
    ("http://app.localhost/", "names this machine"),
    ("http://2130706433/", "loopback address 127.0.0.1"),
    ("http://0x7f.1/", "loopback address 127.0.0.1"),
    ("http://017700000001/", "loopback address 127.0.0.1"),
    ("http://0177.0.0.1/", "loopback address 127.0.0.1"),
    ("http://0/", "unspecified address 0.0.0.0"),
    ("http://[::ffff:127.0.0.1]/", "embedded in IPv6 address ::ffff:7f00:1"),
    ("http://[::1]:8888/", "loopback address ::1"),
    ("http://[fe80::1%25eth0]/", "zone identifiers"),
    ("http://[2002:a00:1::]/", "private address 10.0.0.1"),
    ("http://intranet.example/wiki", "intranet.example resolves to private address 10.1.2.3"),
    ("http://mixed.example/", "resolves to private address 192.168.1.5"),
    ("http://v6private.example/", "private address fd12::1"),
    ("http://224.0.0.1/", "multicast address"),
    ("http://100.64.0.1/", "shared (CGNAT) address 100.64.0.1"),
    ("http://[64:ff9b::7f00:1]/", "loopback address 127.0.0.1 (embedded in IPv6 address 64:ff9b::7f00:1)"),
    ("http://[2002:7f00:1::1]/", "loopback address 127.0.0.1 (embedded"),
    ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata service"),
    ("file:///etc/passwd", "only http and https URLs can be fetched, not file:"),
    ("ftp://example.org/pub", "not ftp:"),
    ("javascript:alert(1)", "not javascript:"),
    ("//example.org/x", "not a relative URL"),
    ("http://a@example.org\\@127.0.0.1/", "backslashes"),
    ("http://exa mple.org/", "whitespace"),
    ("http://1.2.3.4.5/", "ambiguous numeric host"),
    ("http://08.0.0.1/", "ambiguous numeric host"),
    ("http://nowhere.example/", "cannot resolve nowhere.example"),
])
def test_refused_urls_say_why(url: str, reason: str) -> None:
    with pytest.raises(UrlRejected) as info:
        check(url)
    assert reason in str(info.value)
    assert info.value.url == url


@pytest.mark.parametrize("url", ["https://example.org/a?b=1", "http://EXAMPLE.org./", "http://93.184.215.14:8080/",
                                 "https://dual.example/"])
def test_public_urls_pass_with_every_address(url: str) -> None:
    checked = validate_public_http_url(url, resolver=PUBLIC)
    assert checked.addresses and all(ipaddress.ip_address(a).is_global for a in checked.addresses)


def test_checked_url_carries_the_addresses_to_connect_to() -> None:
    checked = validate_public_http_url("https://Dual.Example:8443/p", resolver=PUBLIC)
    assert (checked.scheme, checked.host, checked.port) == ("https", "dual.example", 8443)
    assert checked.addresses == ("93.184.215.14", "2606:4700::1")


def test_numeric_host_is_reported_as_the_address_it_denotes() -> None:
    checked = validate_public_http_url("http://1572394766/", resolver=PUBLIC)  # 93.184.215.14 as one number
    assert checked.host == "93.184.215.14"


@pytest.mark.parametrize(("host", "address"), [
    ("2130706433", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("0x7f.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"), ("10.0x10.1", "10.16.0.1"), ("192.168.0.1.", "192.168.0.1"),
])
def test_whatwg_ipv4_forms(host: str, address: str) -> None:
    assert str(parse_ipv4_host(host)) == address


def test_names_are_not_addresses() -> None:
    assert parse_ipv4_host("example.org") is None
    assert parse_ipv4_host("1password.com") is None


def test_private_opt_out_opens_the_lan_but_never_the_metadata_service() -> None:
    check("http://localhost:8888/", allow_private_addresses=True)
    check("http://intranet.example/", allow_private_addresses=True)
    check("http://[::ffff:127.0.0.1]/", allow_private_addresses=True)
    for url in ("http://169.254.169.254/", "http://metadata.google.internal/", "http://[::ffff:169.254.169.254]/"):
        with pytest.raises(UrlRejected, match="metadata"):
            check(url, allow_private_addresses=True)


def test_allowed_addresses_open_one_service_only() -> None:
    guard = UrlGuard(allowed_addresses=["10.1.2.3"], resolver=PUBLIC)
    assert guard.check("http://intranet.example/").addresses == ("10.1.2.3",)
    with pytest.raises(UrlRejected, match=r"192\.168\.1\.5"):
        guard.check("http://mixed.example/")
    with pytest.raises(UrlRejected, match="metadata"):
        UrlGuard(allowed_addresses=["169.254.0.0/16"]).check("http://169.254.169.254/")


async def test_async_check_uses_the_same_policy() -> None:
    guard = UrlGuard(resolver=PUBLIC)
    assert (await guard.acheck("http://example.org/")).addresses == ("93.184.215.14",)
    with pytest.raises(UrlRejected, match=r"loopback address 127\.0\.0\.1"):
        await guard.acheck("http://rebind.example/")

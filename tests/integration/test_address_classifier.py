"""One address classifier, three guards: the URL guard, the browser's proxy and the sandbox's egress proxy.

Each address in the table is offered to all three consumers, for real: the
URL guard checks a URL naming it, the browser proxy and the egress proxy
receive a ``CONNECT`` over their sockets (to a name that resolves to the
address, and to the address itself).  They must agree with the table and so
with each other.  Tests cannot reach the internet, so the proxies' final dial
is replaced by a recorder: an address that passes is *recorded as dialled*
(and answered 502), an address that is refused is never dialled.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deerflow.browser.proxy import GuardedProxy
from deerflow.sandbox.network.egress_proxy import EgressProxy, Resolved
from deerflow.sandbox.network.policy import (
    Allowlist,
    CallScope,
    NetworkGate,
    normalize_host,
    target,
)
from deerflow.web.addresses import classify, parse_address
from deerflow.web.url_guard import StaticResolver, UrlGuard, UrlRejected

pytestmark = pytest.mark.integration

REFUSED = {
    "0.0.0.0": "unspecified", "0.1.2.3": "this-network", "10.1.2.3": "private", "100.64.0.1": "CGNAT",
    "127.0.0.1": "loopback", "127.9.9.9": "loopback", "169.254.1.1": "link-local",
    "169.254.169.254": "cloud metadata", "172.16.0.1": "private", "192.0.0.8": "IETF protocol",
    "192.0.2.1": "documentation", "192.88.99.1": "6to4 relay", "192.168.1.1": "private",
    "198.18.0.1": "benchmarking", "198.51.100.7": "documentation", "203.0.113.9": "documentation",
    "224.0.0.1": "multicast", "239.255.255.250": "multicast", "240.0.0.1": "reserved",
    "255.255.255.255": "broadcast",
    "::": "unspecified", "::1": "loopback", "::ffff:127.0.0.1": "loopback", "::ffff:0:7f00:1": "loopback",
    "::7f00:1": "IPv4-compatible", "64:ff9b::7f00:1": "loopback", "64:ff9b::a9fe:a9fe": "cloud metadata",
    "64:ff9b::a00:1": "private", "64:ff9b:1::7f00:1": "local-use NAT64", "2002:7f00:1::1": "loopback",
    "2002:a9fe:a9fe::": "cloud metadata", "2002:c0a8:101::1": "private",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2": "Teredo", "2001:2::1": "benchmarking",
    "2001:db8::1": "documentation", "3fff::1": "documentation", "fc00::1": "private", "fd12::1": "private",
    "fd00:ec2::254": "cloud metadata", "fe80::1": "link-local", "fec0::1": "site-local",
    "ff02::1": "multicast", "100::1": "discard-only", "4000::1": "reserved", "5f00::1": "SRv6",
}
PUBLIC = ["8.8.8.8", "93.184.215.14", "1.1.1.1", "2606:4700::1111", "2a00:1450:4001:80b::200e",
          "64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"]
TABLE = [(a, False) for a in PUBLIC] + [(a, True) for a in REFUSED]
NAMES = {f"h{i}.test": address for i, (address, _) in enumerate(TABLE)}
NAME_OF = {address: name for name, address in NAMES.items()}


def _bracket(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _exchange(connect: Any, head: bytes) -> bytes:
    """Send one request head on a fresh connection and read the reply until the proxy closes it."""
    with connect() as sock:
        sock.settimeout(10)
        sock.sendall(head)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


# -- the browser's proxy ---------------------------------------------------------------------


class _BrowserProxy:
    """A :class:`GuardedProxy` on its own loop thread, with a recording dial instead of the internet."""

    def __init__(self) -> None:
        self.dialled: list[str] = []
        self.blocked: list[tuple[str, str]] = []
        guard = UrlGuard(resolver=StaticResolver({n: [a] for n, a in NAMES.items()}))
        self.proxy = GuardedProxy(guard, on_blocked=lambda url, reason: self.blocked.append((url, reason)))

        async def record(checked: Any, writer: asyncio.StreamWriter) -> None:
            self.dialled.extend(checked.addresses)
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()

        self.proxy._connect = record  # type: ignore[method-assign]  # the internet is not reachable
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        url = asyncio.run_coroutine_threadsafe(self.proxy.start(), self.loop).result(10)
        self.port = int(url.rsplit(":", 1)[1])

    def connect(self, target: str) -> bytes:
        head = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()
        return _exchange(lambda: socket.create_connection(("127.0.0.1", self.port)), head)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def browser_proxy() -> Iterator[_BrowserProxy]:
    proxy = _BrowserProxy()
    yield proxy
    proxy.close()


# -- the sandbox's egress proxy --------------------------------------------------------------


class _TableResolver:
    """The table's names, unpinned: the proxy must judge the answers itself."""

    def resolve(self, host: str, port: int) -> Resolved:
        return Resolved((NAMES[host],)) if host in NAMES else Resolved((host,))


@pytest.fixture(scope="module")
def egress(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EgressProxy, Path, list[str]]]:
    key = tmp_path_factory.mktemp("thread")
    proxy = EgressProxy(NetworkGate(Allowlist.from_entries(["*.test"])), resolver=_TableResolver())
    dialled: list[str] = []

    async def record(addresses: tuple[str, ...], port: int) -> tuple[Any, str]:
        dialled.extend(addresses)
        return None, "upstream_unreachable"

    proxy._connect = record  # type: ignore[method-assign]  # the internet is not reachable
    # A person said "always" to every literal target: only the classifier can still refuse one.
    proxy.gate.apply_answer(key, run_id="r", targets=[target(normalize_host(a) or a, 443) for a, _ in TABLE], answer="always")
    yield proxy, key, dialled
    proxy.close()


def _egress_connect(egress: tuple[EgressProxy, Path, list[str]], target: str) -> bytes:
    proxy, key, _ = egress
    path = str(proxy.endpoint(key) / "proxy.sock")

    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        return sock

    with proxy.scope(key, CallScope("r", may_ask=True)):
        return _exchange(connect, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())


# -- the table ------------------------------------------------------------------------------


@pytest.mark.parametrize(("address", "refused"), TABLE, ids=[a for a, _ in TABLE])
def test_every_guard_gives_the_same_answer(address: str, refused: bool, browser_proxy: _BrowserProxy,
                                           egress: tuple[EgressProxy, Path, list[str]]) -> None:
    verdict = classify(parse_address(address))
    assert (verdict is not None) == refused
    if refused:
        assert REFUSED[address] in verdict.kind

    guard = UrlGuard(resolver=StaticResolver({n: [a] for n, a in NAMES.items()}))
    answers: dict[str, bool] = {}
    reasons: list[str] = []
    for label, url in (("url_guard literal", f"http://{_bracket(address)}/"),
                       ("url_guard name", f"https://{NAME_OF[address]}/")):
        try:
            guard.check(url)
            answers[label] = False
        except UrlRejected as exc:
            answers[label] = True
            reasons.append(exc.reason)
    assert all(str(verdict) in reason for reason in reasons)

    for label, hostport in (("browser literal", f"{_bracket(address)}:443"),
                          ("browser name", f"{NAME_OF[address]}:443")):
        before = len(browser_proxy.dialled)
        reply = browser_proxy.connect(hostport)
        answers[label] = reply.startswith(b"HTTP/1.1 403 ")
        assert answers[label] != (len(browser_proxy.dialled) > before), reply[:200]

    for label, hostport in (("egress literal", f"{_bracket(address)}:443"),
                          ("egress name", f"{NAME_OF[address]}:443")):
        dialled = egress[2]
        before = len(dialled)
        reply = _egress_connect(egress, hostport)
        answers[label] = reply.startswith(b"HTTP/1.1 403 ")
        assert answers[label] != (len(dialled) > before), reply[:200]
        if answers[label]:
            assert b"X-Deerflow-Egress: denied" in reply

    assert answers == dict.fromkeys(answers, refused)


def test_egress_refuses_connect_to_nat64_of_loopback_before_dialling(tmp_path: Path) -> None:
    """The egress proxy's own resolver and dial, unpatched: ``[64:ff9b::7f00:1]`` never gets a connection."""
    proxy = EgressProxy(NetworkGate(Allowlist()))
    try:
        target = "[64:ff9b::7f00:1]:443"
        proxy.gate.apply_answer(tmp_path, run_id="r", targets=[target], answer="always")
        path = str(proxy.endpoint(tmp_path) / "proxy.sock")

        def connect() -> socket.socket:
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(path)
            return sock

        with proxy.scope(tmp_path, CallScope("r", may_ask=True)) as handle:
            reply = _exchange(connect, f"CONNECT {target} HTTP/1.1\r\n\r\npayload".encode())
    finally:
        proxy.close()
    assert reply.startswith(b"HTTP/1.1 403 ")
    assert [(r.host, r.decision, r.reason) for r in handle.report.records] == [
        ("64:ff9b::7f00:1", "denied", "private_address")]


def test_egress_refuses_a_name_resolving_to_6to4_of_loopback_with_no_dial(tmp_path: Path) -> None:
    """An allowed name whose DNS answer embeds 127.0.0.1 is refused by the real dial path."""

    class Rebinding:
        def resolve(self, host: str, port: int) -> Resolved:
            return Resolved(("2002:7f00:1::1",))

    proxy = EgressProxy(NetworkGate(Allowlist.from_entries(["allowed.test"])), resolver=Rebinding())
    try:
        path = str(proxy.endpoint(tmp_path) / "proxy.sock")

        def connect() -> socket.socket:
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(path)
            return sock

        with proxy.scope(tmp_path, CallScope("r", may_ask=True)) as handle:
            reply = _exchange(connect, b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n")
    finally:
        proxy.close()
    assert reply.startswith(b"HTTP/1.1 403 ")
    assert [(r.decision, r.reason) for r in handle.report.records] == [("denied", "private_address")]


def test_an_operator_pin_opens_a_private_address_but_never_the_metadata_service(tmp_path: Path) -> None:
    from deerflow.sandbox.network.egress_proxy import refuse_address

    assert refuse_address("10.0.0.5", vouched=True) is None
    assert refuse_address("10.0.0.5") == "private address 10.0.0.5"
    assert "cloud metadata" in (refuse_address("169.254.169.254", vouched=True) or "")
    assert "cloud metadata" in (refuse_address("64:ff9b::a9fe:a9fe", vouched=True) or "")

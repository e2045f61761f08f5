"""The egress proxy of ``allowlist`` mode: the sandbox's only way out.

A sandbox in ``allowlist`` mode has no network of its own (bubblewrap's
``--unshare-net``, Docker's ``network_mode="none"``).  The harness runs this
proxy on the host and gives each thread its own UNIX socket, bind-mounted
into the sandbox; an in-sandbox relay (:mod:`deerflow.sandbox.execution.supervisor`)
exposes it on ``127.0.0.1:3128`` so ordinary clients work with
``HTTP_PROXY``/``HTTPS_PROXY``.  Because the socket is per thread, the proxy
knows which thread every connection comes from without trusting anything
the sandbox says.

It speaks two forms of HTTP proxying, one request per connection:

* ``CONNECT host:port`` — a tunnel (HTTPS, or any TCP protocol);
* absolute-form ``GET http://host[:port]/path`` — forwarded in origin form
  with ``Host`` set from the URL, proxy and hop-by-hop headers dropped and
  ``Connection: close``.

Every target is judged by the :class:`~deerflow.sandbox.network.policy.NetworkGate`
*before* the proxy resolves or dials anything, so a refused host costs no
DNS query (no exfiltration through names) and not a byte the client sent
reaches it; the client gets a ``403`` saying why.  Allowed names are then
resolved by the proxy (the sandbox has no DNS) and must resolve to public
addresses by the URL guard's classifier (:mod:`deerflow.web.addresses`:
NAT64, 6to4 and IPv4-mapped forms are judged by the IPv4 address they carry)
— unless the operator pinned the name (``sandbox.egress_hosts``) or listed
the IP itself — so an approved name cannot be pointed at the host's loopback
services.  Cloud metadata endpoints are refused even then.

The proxy is an object owned by the sandbox provider: it runs its own event
loop in a daemon thread and :meth:`EgressProxy.close` stops it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import ipaddress
import shutil
import socket
import tempfile
import threading
import weakref
from collections.abc import Coroutine, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from deerflow.errors import ConfigError
from deerflow.sandbox.network.approval import reason_text
from deerflow.sandbox.network.policy import (
    CallScope,
    NetworkGate,
    NetworkRecord,
    OpenScope,
    is_ip_literal,
    normalize_host,
    target,
)
from deerflow.web.addresses import classify, parse_address

T = TypeVar("T")

SOCKET_NAME = "proxy.sock"
MAX_HEADER_BYTES = 65_536
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authorization",
                         "proxy-authenticate", "te", "trailer", "transfer-encoding", "upgrade"})
_CHUNK = 65_536
# Failures to reach an allowed host: not a guard's refusal, so not counted as one in the metrics.
_NOT_REFUSALS = frozenset({"unresolvable", "upstream_unreachable"})


@dataclass(frozen=True)
class Resolved:
    """Addresses for a host; ``pinned`` when the operator vouched for them."""

    addresses: tuple[str, ...]
    pinned: bool = False


class Resolver(Protocol):
    """Turns an allowed host into addresses (blocking; run off the proxy loop)."""

    def resolve(self, host: str, port: int) -> Resolved: ...


class SystemResolver:
    """The system resolver, with operator-pinned names first.

    Args:
        overrides: ``sandbox.egress_hosts``: host name → IP address.  A pinned
            name may point at a private address (an internal mirror, a test server).

    Raises:
        ConfigError: an override is not a host name → IP address pair.
    """

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        self.overrides: dict[str, str] = {}
        for name, address in (overrides or {}).items():
            host = normalize_host(name)
            if host is None or not is_ip_literal(str(address).strip()):
                raise ConfigError(f"{name!r}: {address!r} must map a host name to an IP address",
                                  key="sandbox.egress_hosts")
            self.overrides[host] = str(ipaddress.ip_address(str(address).strip()))

    def resolve(self, host: str, port: int) -> Resolved:
        if host in self.overrides:
            return Resolved((self.overrides[host],), pinned=True)
        if is_ip_literal(host):
            return Resolved((host,))
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return Resolved(tuple(dict.fromkeys(str(info[4][0]) for info in infos)))


@dataclass(frozen=True)
class ProxyRequest:
    """A parsed proxy request head.

    Attributes:
        method: ``CONNECT`` or the HTTP method to forward.
        host: Normalized destination host.
        port: Destination port.
        forward: The head to send upstream (absolute-form requests only).
    """

    method: str
    host: str
    port: int
    forward: bytes = b""


def parse_request(head: bytes) -> ProxyRequest | None:
    """Parse a request head (up to and including the blank line); ``None`` if unusable."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target_text, version = lines[0].split(" ")
    except ValueError:
        return None
    if not version.startswith("HTTP/1.") or not method.isalpha():
        return None
    headers = [line for line in lines[1:] if line]
    if method.upper() == "CONNECT":
        host_text, _, port_text = target_text.rpartition(":")
        host = normalize_host(host_text)
        if host is None or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return None
        return ProxyRequest("CONNECT", host, int(port_text))
    return _parse_forward(method.upper(), target_text, headers)


def _parse_forward(method: str, url: str, headers: list[str]) -> ProxyRequest | None:
    try:
        parts = urlsplit(url)
        port = parts.port or 80
    except ValueError:
        return None
    host = normalize_host(parts.hostname or "")
    if parts.scheme != "http" or host is None or parts.username is not None or "@" in parts.netloc:
        return None
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    kept = [h for h in headers if ":" in h and h.split(":", 1)[0].strip().lower() not in _HOP_BY_HOP
            and h.split(":", 1)[0].strip().lower() != "host"]
    host_header = target(host, port) if port != 80 else (f"[{host}]" if ":" in host else host)
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host_header}", *kept, "Connection: close", "", ""]
    return ProxyRequest(method, host, port, "\r\n".join(lines).encode("latin-1"))


def _response(status: str, body: str, *, decision: str) -> bytes:
    data = body.encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\nX-Deerflow-Egress: {decision}\r\n\r\n"
            ).encode() + data


def refuse_address(raw: str, *, vouched: bool = False) -> str | None:
    """Why the proxy must not connect to ``raw``, or None.

    The verdict is the URL guard's (:func:`deerflow.web.addresses.classify`),
    so the sandbox and the host's own fetches agree on what is public.  An
    address the operator vouched for (a pinned name, an IP listed in
    ``sandbox.allowed_hosts``) may be private, but never a cloud metadata endpoint.
    """
    try:
        verdict = classify(parse_address(raw))
    except ValueError:
        return f"unparseable address {raw!r}"
    if verdict is None or (vouched and not verdict.metadata):
        return None
    return str(verdict)


class EgressProxy:
    """Per-thread UNIX-socket HTTP proxy enforcing a :class:`NetworkGate`.

    Args:
        gate: Decides every connection.
        resolver: Name resolution for allowed hosts (default: the system's).
        connect_timeout: Seconds to reach an upstream before giving up.
        header_timeout: Seconds a client has to send its request head.
    """

    def __init__(self, gate: NetworkGate, *, resolver: Resolver | None = None,
                 connect_timeout: float = 10.0, header_timeout: float = 30.0) -> None:
        self.gate = gate
        self.resolver: Resolver = resolver or SystemResolver()
        self.connect_timeout = connect_timeout
        self.header_timeout = header_timeout
        self._root = Path(tempfile.mkdtemp(prefix="deerflow-egress-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._root, True)
        self._servers: dict[Path, asyncio.AbstractServer] = {}
        self._connections: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="deerflow-egress", daemon=True)
        self._thread.start()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._closed:
            coro.close()
            raise RuntimeError("the egress proxy is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def endpoint(self, key: Path) -> Path:
        """The directory holding thread ``key``'s proxy socket (started on first use).

        Bind this directory (not the socket file) into the sandbox: the socket
        is re-created if the server restarts, a directory bind follows it.
        """
        return self._submit(self._ensure_server(key)).result()

    def scope(self, key: Path, call: CallScope) -> AbstractContextManager[OpenScope]:
        """A tool call running on thread ``key`` (see :meth:`NetworkGate.scope`)."""
        return self.gate.scope(key, call)

    async def _ensure_server(self, key: Path) -> Path:
        directory = self._root / hashlib.sha256(str(key).encode()).hexdigest()[:16]
        if key not in self._servers:
            directory.mkdir(mode=0o755, exist_ok=True)
            path = directory / SOCKET_NAME
            path.unlink(missing_ok=True)
            self._servers[key] = await asyncio.start_unix_server(
                partial(self._serve, key), path=str(path), limit=MAX_HEADER_BYTES)
            path.chmod(0o666)
        return directory

    async def _serve(self, key: Path, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        try:
            await self._handle(key, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # a client or upstream hung up: nothing to report
        except asyncio.CancelledError:
            # Only close() cancels connections.  Ending quietly keeps asyncio's
            # stream callback from logging the cancellation as an error.
            return
        finally:
            writer.close()

    async def _handle(self, key: Path, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self.header_timeout):
                head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.LimitOverrunError, TimeoutError):
            writer.write(_response("400 Bad Request", "request head too large or too slow\n", decision="invalid"))
            return
        request = parse_request(head)
        if request is None:
            writer.write(_response("400 Bad Request", "deerflow egress proxy: use CONNECT host:port or an "
                                   "absolute http:// URL\n", decision="invalid"))
            return
        decision, reason = self.gate.decide(key, request.host, request.port)
        upstream = None
        if decision == "allowed":
            upstream, failure = await self._dial(request)
            if upstream is None:
                decision, reason = "denied", failure
        self.gate.log(key, NetworkRecord(request.host, request.port, request.method, decision, reason))
        if decision == "denied" and reason not in _NOT_REFUSALS:
            # the metrics load with the host, not with the sandbox module
            from deerflow.runtime.metrics import guard_refused

            guard_refused("sandbox_egress")
        if upstream is None:
            status = "502 Bad Gateway" if reason in ("unresolvable", "upstream_unreachable") else "403 Forbidden"
            body = (f"deerflow egress proxy: {target(request.host, request.port)} refused: "
                    f"{reason_text(reason)}\n")
            writer.write(_response(status, body, decision=decision))
            await writer.drain()
            return
        up_reader, up_writer = upstream
        if request.method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(request.forward)
        await _relay(reader, writer, up_reader, up_writer)

    async def _dial(self, request: ProxyRequest) -> tuple[Any, str]:
        """Resolve and connect an allowed target; ``(None, reason)`` when it must not or cannot be."""
        loop = asyncio.get_running_loop()
        try:
            resolved = await loop.run_in_executor(None, self.resolver.resolve, request.host, request.port)
        except OSError:
            return None, "unresolvable"
        if not resolved.addresses:
            return None, "unresolvable"
        vouched = resolved.pinned or self.gate.allowlist.lists_address(request.host, request.port)
        if any(refuse_address(a, vouched=vouched) for a in resolved.addresses):
            return None, "private_address"
        return await self._connect(resolved.addresses, request.port)

    async def _connect(self, addresses: tuple[str, ...], port: int) -> tuple[Any, str]:
        """Connect to the first reachable address (all of them passed :func:`refuse_address`)."""
        for address in addresses:
            try:
                async with asyncio.timeout(self.connect_timeout):
                    return await asyncio.open_connection(address, port), ""
            except (OSError, TimeoutError):
                continue
        return None, "upstream_unreachable"

    # -- lifecycle ----------------------------------------------------------------------

    async def _shutdown(self) -> None:
        for server in self._servers.values():
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        self._servers.clear()

    def close(self) -> None:
        """Stop every thread's server, drop open connections, remove the sockets (idempotent)."""
        if self._closed:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        self._closed = True
        try:
            future.result(timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self._loop.close()
            self._cleanup()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then half-close the other side so it sees the end too."""
    try:
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
    """Shuttle bytes both ways until both directions have ended."""
    try:
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
    finally:
        up_writer.close()


__all__ = ["EgressProxy", "ProxyRequest", "Resolved", "Resolver", "SystemResolver", "parse_request",
           "refuse_address"]

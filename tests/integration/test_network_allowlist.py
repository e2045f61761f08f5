"""Allowlist network mode for real: the egress proxy on the host, bubblewrap sandboxes, agent runs.

The "outside" is a server on the host's loopback; test names are pinned to it
with ``egress_hosts`` so the proxy resolves them without DNS.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain.tools import ToolRuntime

from deerflow import DeerFlowClient
from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AppConfig, SandboxConfig
from deerflow.run_options import RunOptions
from deerflow.runtime import events as ev
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import HostServices
from deerflow.sandbox.execution.bwrap import BwrapSandboxProvider, find_bwrap
from deerflow.sandbox.factory import make_egress_proxy
from deerflow.sandbox.kernels.kernel_pool import KernelPool
from deerflow.sandbox.network.egress_proxy import EgressProxy, Resolved
from deerflow.sandbox.network.policy import Allowlist, CallScope, NetworkGate
from deerflow.tools.builtins.exec_tools import exec_tools
from fixtures.web_server import WebServer, serve, text

pytestmark = pytest.mark.integration
needs_bwrap = pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap (bwrap) is not installed")

CURL = "curl -sS --max-time 5 {flags} http://{host}:{port}/page"


@pytest.fixture
def outside() -> Iterator[WebServer]:
    """A loopback HTTP server standing in for the internet; ``requests`` records what reached it."""
    with serve({"/page": text("outside-page")}) as web:
        yield web


@pytest.fixture
def tripwire() -> Iterator[tuple[int, list[bytes]]]:
    """A raw TCP server that records every connection (and its bytes): nothing should reach it."""
    seen: list[bytes] = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(2)
            try:
                seen.append(self.request.recv(4096))
            except OSError:
                seen.append(b"")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


PINS = {"allowed.test": "127.0.0.1", "other.test": "127.0.0.1", "secret.test": "127.0.0.1"}


@pytest.fixture
def proxy() -> Iterator[EgressProxy]:
    egress = make_egress_proxy(SandboxConfig(network="allowlist", allowed_hosts=["allowed.test"], egress_hosts=PINS))
    yield egress
    egress.close()


@pytest.fixture
def paths(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "home" / "users" / "u" / "threads" / "t1").ensure()


def _ask_proxy(proxy: EgressProxy, paths: ThreadPaths, head: bytes) -> bytes:
    """Talk to the thread's proxy socket directly, as the in-sandbox relay does."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(str(proxy.endpoint(paths.root) / "proxy.sock"))
        sock.sendall(head)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


# -- the proxy on its own ---------------------------------------------------------------


def test_the_proxy_refuses_connect_to_a_host_off_the_list_without_leaking(
    proxy: EgressProxy, paths: ThreadPaths, tripwire: tuple[int, list[bytes]]
) -> None:
    port, seen = tripwire
    asked: list[str] = []
    inner = proxy.resolver

    class Recording:
        def resolve(self, host: str, port: int) -> Resolved:
            asked.append(host)
            return inner.resolve(host, port)

    proxy.resolver = Recording()
    with proxy.scope(paths.root, CallScope("run-1", may_ask=True)) as handle:
        reply = _ask_proxy(proxy, paths, f"CONNECT secret.test:{port} HTTP/1.1\r\n\r\n".encode()
                           + b"SECRET-PAYLOAD sent before the answer")
    assert reply.startswith(b"HTTP/1.1 403 ")
    assert b"secret.test" in reply and b"SECRET-PAYLOAD" not in reply
    assert seen == [] and asked == []  # no connection, no byte, not even a DNS lookup
    assert handle.report.targets("pending") == [f"secret.test:{port}"]


def test_an_allowed_name_pointing_at_a_private_address_is_refused(
    paths: ThreadPaths, tripwire: tuple[int, list[bytes]]
) -> None:
    port, seen = tripwire

    class Rebinding:  # an allowed public name whose DNS answer is the host's loopback
        def resolve(self, host: str, port: int) -> Resolved:
            return Resolved(("127.0.0.1",))

    egress = EgressProxy(NetworkGate(Allowlist.from_entries(["allowed.test"])), resolver=Rebinding())
    try:
        with egress.scope(paths.root, CallScope("run-1", True)) as handle:
            reply = _ask_proxy(egress, paths, f"CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n".encode())
    finally:
        egress.close()
    assert reply.startswith(b"HTTP/1.1 403 ") and b"private or loopback" in reply
    assert seen == []
    assert [(r.decision, r.reason) for r in handle.report.records] == [("denied", "private_address")]


def test_plain_http_is_forwarded_with_the_url_host_and_without_proxy_credentials(
    proxy: EgressProxy, paths: ThreadPaths, outside: WebServer
) -> None:
    head = (f"GET http://allowed.test:{outside.port}/page?q=1 HTTP/1.1\r\nHost: other.test\r\n"
            "Proxy-Authorization: Basic c2VjcmV0\r\n\r\n").encode()
    with proxy.scope(paths.root, CallScope("run-1", True)):
        reply = _ask_proxy(proxy, paths, head)
    assert reply.startswith(b"HTTP/1.") and reply.endswith(b"outside-page")
    ((_, path, headers),) = outside.requests
    assert path == "/page?q=1" and headers["Host"] == f"allowed.test:{outside.port}"
    assert "proxy-authorization" not in {k.lower() for k in headers}


# -- bubblewrap sandboxes ---------------------------------------------------------------


@pytest.fixture
def sandbox(proxy: EgressProxy) -> Iterator[BwrapSandboxProvider]:
    provider = BwrapSandboxProvider(network="allowlist", egress=proxy)
    yield provider
    provider.close()


def _runtime(context: RunContext, notices: list[dict[str, object]]) -> ToolRuntime:
    return ToolRuntime(state={}, context=context, config={}, stream_writer=notices.append,
                       tool_call_id="call-1", store=None)


@needs_bwrap
def test_an_allowed_host_is_reachable_over_http_connect_and_from_the_kernel(
    sandbox: BwrapSandboxProvider, paths: ThreadPaths, outside: WebServer
) -> None:
    with KernelPool(sandbox) as kernels:
        context = RunContext(user_id="u", thread_id="t1", run_id="run-1", paths=paths, config=AppConfig(),
                             services=HostServices(sandbox=sandbox, kernels=kernels))
        notices: list[dict[str, object]] = []
        tools = {t.name: t for t in exec_tools(sandbox)}
        runtime = _runtime(context, notices)
        plain, _ = tools["bash"].func(command=CURL.format(flags="", host="allowed.test", port=outside.port),
                                      runtime=runtime)
        tunnel, _ = tools["bash"].func(
            command=CURL.format(flags="--proxytunnel", host="allowed.test", port=outside.port), runtime=runtime)
        code = f"import urllib.request\nurllib.request.urlopen('http://allowed.test:{outside.port}/page').read()"
        cell, artifact = tools["python"].func(code=code, runtime=runtime)
    assert plain.startswith("outside-page") and tunnel.startswith("outside-page")
    assert "outside-page" in cell and "human_input" not in artifact
    assert len(outside.requests) == 3
    assert {n["data"]["reason"] for n in notices} == {"allowlist"}
    assert {n["data"]["method"] for n in notices} == {"GET", "CONNECT"}


@needs_bwrap
def test_the_sandbox_still_has_no_direct_network(
    sandbox: BwrapSandboxProvider, paths: ThreadPaths, outside: WebServer
) -> None:
    result = sandbox.execute(paths, f"curl -sS --max-time 3 --noproxy '*' http://127.0.0.1:{outside.port}/page")
    assert result.exit_code != 0 and "outside-page" not in result.output
    assert outside.requests == []


@needs_bwrap
def test_files_written_in_an_allowlist_sandbox_appear_in_the_workspace(
    sandbox: BwrapSandboxProvider, paths: ThreadPaths
) -> None:
    result = sandbox.execute(paths, "echo draft > notes.txt && echo final > /mnt/user-data/outputs/report.md")
    assert result.exit_code == 0, result.output
    assert (paths.workspace / "notes.txt").read_text() == "draft\n"
    assert (paths.outputs / "report.md").read_text() == "final\n"


@needs_bwrap
def test_a_subagent_is_refused_without_asking_even_in_an_interactive_run(
    sandbox: BwrapSandboxProvider, paths: ThreadPaths, outside: WebServer
) -> None:
    context = RunContext(user_id="u", thread_id="t1", run_id="run-1", paths=paths, config=AppConfig(),
                         options=RunOptions(is_subagent=True), services=HostServices(sandbox=sandbox))
    assert context.interaction.attended
    notices: list[dict[str, object]] = []
    bash = next(t for t in exec_tools(sandbox) if t.name == "bash")
    text, artifact = bash.func(command=CURL.format(flags="", host="other.test", port=outside.port),
                               runtime=_runtime(context, notices))
    assert "human_input" not in artifact
    assert text.startswith("deerflow egress proxy: other.test") and "a subagent cannot ask" in text
    assert outside.requests == []
    assert [(n["kind"], n["data"].get("reason")) for n in notices] == [
        ("network_request", None), ("network_decision", "subagent")]


# -- agent runs through the embedded client ---------------------------------------------


def _config(tmp_path: Path, port: int, turns: str) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(f"""
models:
  - name: scripted
    use: fixtures.logging_model:LoggingScriptedModel
    log: {tmp_path / "calls.jsonl"}
    script: |
      turns:
{turns}
sandbox:
  use: bwrap
  network: allowlist
  allowed_hosts: [allowed.test]
  egress_hosts: {{other.test: 127.0.0.1}}
""")
    return config


def _fetch_turn(call_id: str, port: int) -> str:
    command = CURL.format(flags="", host="other.test", port=port)
    return f'        - tool_calls: [{{name: bash, id: {call_id}, args: {{command: "{command}"}}}}]\n'


def _notices(result: object, kind: str) -> list[ev.Notice]:
    return [n for n in result.notices if n.kind == kind]  # type: ignore[attr-defined]


@needs_bwrap
def test_an_approved_host_is_reachable_in_the_next_run_only(
    deerflow_home: Path, tmp_path: Path, outside: WebServer
) -> None:
    turns = (_fetch_turn("f1", outside.port) + _fetch_turn("f2", outside.port) + '        - "Fetched it."\n'
             + _fetch_turn("f3", outside.port))
    with DeerFlowClient(config_path=_config(tmp_path, outside.port, turns)) as client:
        asked = client.chat("Fetch the page")
        assert asked.status == "interrupted"
        assert asked.clarification is not None and asked.clarification["source"] == "network_approval"
        assert asked.clarification["targets"] == [f"other.test:{outside.port}"]
        assert [n.data["decision"] for n in _notices(asked, "network_decision")] == ["pending"]
        assert len(_notices(asked, "network_request")) == 1
        assert outside.requests == []

        done = client.reply(asked.thread_id, 1)  # "Allow once (this run only)"
        assert done.status == "success" and done.text == "Fetched it."
        decisions = [(n.data["by"], n.data["reason"]) for n in _notices(done, "network_decision")]
        assert decisions == [("user", "approved_once"), ("policy", "approved_once")]
        assert len(outside.requests) == 1

        again = client.chat("And once more", thread_id=asked.thread_id)
        assert again.status == "interrupted"  # "once" was for the previous run
        assert len(outside.requests) == 1


@needs_bwrap
def test_a_denied_host_stays_refused_and_is_not_asked_about_again(
    deerflow_home: Path, tmp_path: Path, outside: WebServer
) -> None:
    turns = _fetch_turn("f1", outside.port) + _fetch_turn("f2", outside.port) + '        - "Could not fetch it."\n'
    with DeerFlowClient(config_path=_config(tmp_path, outside.port, turns)) as client:
        asked = client.chat("Fetch the page")
        refused = client.reply(asked.thread_id, "Deny")
    assert refused.status == "success" and refused.clarification is None
    assert [(n.data["by"], n.data["reason"]) for n in _notices(refused, "network_decision")] == [
        ("user", "user_denied"), ("policy", "user_denied")]
    (result,) = [e for e in refused.events if isinstance(e, ev.ToolResult)]
    assert "the user denied it" in result.text
    assert outside.requests == []


@needs_bwrap
def test_an_autonomous_run_is_refused_without_asking(deerflow_home: Path, tmp_path: Path, outside: WebServer) -> None:
    turns = _fetch_turn("f1", outside.port) + '        - "Could not fetch it."\n'
    with DeerFlowClient(config_path=_config(tmp_path, outside.port, turns)) as client:
        result = client.chat("Fetch the page", interaction_mode="autonomous")
    assert result.status == "success" and result.clarification is None
    assert [n.data["reason"] for n in _notices(result, "network_decision")] == ["unattended"]
    assert outside.requests == []

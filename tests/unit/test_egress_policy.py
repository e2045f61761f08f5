"""Allowlist mode without a sandbox: host rules, the gate's decisions, approval words, proxy heads."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from deerflow.agents.clarification_reply import pending_request, prepare_reply
from deerflow.agents.middlewares.network_approval import NetworkApprovalMiddleware
from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AppConfig
from deerflow.errors import ConfigError
from deerflow.run_options import RunOptions
from deerflow.runtime.context import RunContext
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.runtime.services import HostServices
from deerflow.sandbox.network.approval import approval_request, parse_answer
from deerflow.sandbox.network.egress_proxy import SystemResolver, parse_request
from deerflow.sandbox.network.policy import (
    Allowlist,
    CallScope,
    NetworkGate,
    NetworkRecord,
    OpenScope,
    ScopeReport,
)
from deerflow.tools.builtins.network_access import call_scope, settle

ASK = CallScope("run-1", may_ask=True)


@pytest.fixture
def thread(tmp_path: Path) -> Path:
    return ThreadPaths(tmp_path / "users" / "u" / "threads" / "t").ensure().root


def test_allowlist_matches_exact_names_subdomain_wildcards_and_ports() -> None:
    allow = Allowlist.from_entries(["pypi.org", "*.github.com", "api.example.com:443", "10.0.0.5"])
    assert allow.allows("pypi.org", 443) and allow.allows("pypi.org", 80)
    assert allow.allows("raw.github.com", 443)
    assert not allow.allows("github.com", 443)  # a wildcard is for subdomains only
    assert not allow.allows("evilgithub.com", 443)
    assert not allow.allows("pypi.org.evil.com", 443)
    assert allow.allows("api.example.com", 443) and not allow.allows("api.example.com", 80)
    assert allow.allows("10.0.0.5", 8080)


@pytest.mark.parametrize("entry", ["https://pypi.org", "pypi.org/simple", "user@host", "*.10.0.0.1", "h:99999", ""])
def test_a_malformed_allowlist_entry_is_a_config_error_naming_it(entry: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Allowlist.from_entries(["pypi.org", entry])
    assert raised.value.key == "sandbox.allowed_hosts[1]"


def test_a_host_off_the_list_is_pending_in_an_attended_call_and_denied_otherwise(thread: Path) -> None:
    gate = NetworkGate(Allowlist.from_entries(["pypi.org"]))
    assert gate.decide(thread, "pypi.org", 443) == ("allowed", "allowlist")
    assert gate.decide(thread, "evil.test", 443) == ("denied", "outside_tool_call")
    with gate.scope(thread, ASK):
        assert gate.decide(thread, "evil.test", 443) == ("pending", "awaiting_approval")
    with gate.scope(thread, CallScope("run-1", may_ask=False, denial_reason="unattended")):
        assert gate.decide(thread, "evil.test", 443) == ("denied", "unattended")


def test_with_concurrent_calls_the_gate_asks_only_if_every_call_may(thread: Path) -> None:
    gate = NetworkGate(Allowlist())
    with gate.scope(thread, ASK), gate.scope(thread, CallScope("run-1", False, "subagent")):
        assert gate.decide(thread, "evil.test", 443) == ("denied", "subagent")


def test_allow_once_holds_for_the_answering_run_only(thread: Path) -> None:
    gate = NetworkGate(Allowlist())
    gate.apply_answer(thread, run_id="run-2", targets=["api.test:443"], answer="once")
    with gate.scope(thread, CallScope("run-2", True)):
        assert gate.decide(thread, "api.test", 443) == ("allowed", "approved_once")
        assert gate.decide(thread, "api.test", 80)[0] == "pending"  # approvals are per host:port
    with gate.scope(thread, CallScope("run-3", True)):
        assert gate.decide(thread, "api.test", 443)[0] == "pending"


def test_always_allow_is_kept_for_the_thread_across_restarts(thread: Path, tmp_path: Path) -> None:
    NetworkGate(Allowlist()).apply_answer(thread, run_id="run-2", targets=["api.test:443"], answer="always")
    fresh = NetworkGate(Allowlist())  # a new server process
    with fresh.scope(thread, CallScope("run-9", True)):
        assert fresh.decide(thread, "api.test", 443) == ("allowed", "approved_always")
    other = ThreadPaths(tmp_path / "users" / "u" / "threads" / "other").ensure().root
    with fresh.scope(other, CallScope("run-9", True)):
        assert fresh.decide(other, "api.test", 443)[0] == "pending"


def test_a_denial_refuses_without_asking_again_in_the_answering_run(thread: Path) -> None:
    gate = NetworkGate(Allowlist())
    gate.apply_answer(thread, run_id="run-2", targets=["api.test:443"], answer="deny")
    with gate.scope(thread, CallScope("run-2", True)):
        assert gate.decide(thread, "api.test", 443) == ("denied", "user_denied")
    with gate.scope(thread, CallScope("run-3", True)):
        assert gate.decide(thread, "api.test", 443)[0] == "pending"


def test_each_decision_is_reported_once_by_the_scope_that_closes(thread: Path) -> None:
    gate = NetworkGate(Allowlist())
    with gate.scope(thread, ASK) as handle:
        gate.log(thread, NetworkRecord("evil.test", 443, "CONNECT", "pending", "awaiting_approval"))
    assert handle.report.targets("pending") == ["evil.test:443"]
    with gate.scope(thread, ASK) as again:
        pass
    assert again.report.records == ()


@pytest.mark.parametrize(("text", "answer"), [
    ("Allow once (this run only)", "once"), ("1", "once"), ("yes", "once"),
    ("Always allow for this thread", "always"), ("2", "always"), ("ALWAYS", "always"),
    ("Deny", "deny"), ("3", "deny"), ("don't allow", "deny"), ("what is this?", "deny"),
])
def test_answers_are_read_strictly_and_unclear_ones_deny(text: str, answer: str) -> None:
    assert parse_answer(text) == answer


def test_the_approval_request_is_a_clarification_that_client_reply_accepts() -> None:
    request = approval_request(["api.test:443"], tool_call_id="call-7", tool="bash")
    assert request["source"] == "network_approval" and request["targets"] == ["api.test:443"]
    assert request["request_id"] == "network:call-7"
    assert prepare_reply(request, 2) == "Always allow for this thread"
    assert parse_answer(prepare_reply(request, 2)) == "always"


def test_proxy_request_heads_are_parsed_and_rewritten() -> None:
    connect = parse_request(b"CONNECT API.Test.:443 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert connect is not None and (connect.method, connect.host, connect.port) == ("CONNECT", "api.test", 443)
    forward = parse_request(
        b"GET http://api.test:8080/a?b=1 HTTP/1.1\r\nHost: elsewhere.test\r\n"
        b"Proxy-Authorization: Basic c2VjcmV0\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n"
    )
    assert forward is not None and (forward.host, forward.port) == ("api.test", 8080)
    head = forward.forward.decode()
    assert head.startswith("GET /a?b=1 HTTP/1.1\r\nHost: api.test:8080\r\n")
    assert "Accept: */*" in head and "Connection: close" in head
    assert "elsewhere.test" not in head and "Proxy-Authorization" not in head and "keep-alive" not in head


@pytest.mark.parametrize("head", [
    b"GET /relative HTTP/1.1\r\n\r\n",
    b"GET https://api.test/ HTTP/1.1\r\n\r\n",
    b"GET http://user:pw@api.test/ HTTP/1.1\r\n\r\n",
    b"CONNECT api.test HTTP/1.1\r\n\r\n",
    b"CONNECT bad host:443 HTTP/1.1\r\n\r\n",
    b"CONNECT a/b:443 HTTP/1.1\r\n\r\n",
    b"garbage\r\n\r\n",
])
def test_unusable_proxy_requests_are_refused(head: bytes) -> None:
    assert parse_request(head) is None


def test_operator_pins_map_names_to_ip_addresses() -> None:
    resolver = SystemResolver({"Mirror.Internal.": "10.0.0.5"})
    assert resolver.resolve("mirror.internal", 443).addresses == ("10.0.0.5",)
    assert resolver.resolve("mirror.internal", 443).pinned
    with pytest.raises(ConfigError, match="must map a host name to an IP address") as raised:
        SystemResolver({"mirror.internal": "not-an-ip"})
    assert raised.value.key == "sandbox.egress_hosts"


def _context(thread: Path, **options: object) -> RunContext:
    policy = RunInteractionPolicy.resolve(options)
    return RunContext(user_id="u", thread_id="t", run_id="run-1", paths=ThreadPaths(thread), config=AppConfig(),
                      options=RunOptions.parse({k: v for k, v in options.items() if k != "interaction_mode"}),
                      interaction=policy)


def test_only_an_attended_lead_agent_call_may_ask(thread: Path) -> None:
    assert call_scope(_context(thread)) == CallScope("run-1", True, "")
    assert call_scope(_context(thread, interaction_mode="autonomous")) == CallScope("run-1", False, "unattended")
    assert call_scope(_context(thread, interaction_mode="scheduled")).denial_reason == "unattended"
    assert call_scope(_context(thread, is_subagent=True)) == CallScope("run-1", False, "subagent")


def _runtime(thread: Path, events: list[dict[str, object]]) -> ToolRuntime:
    return ToolRuntime(state={}, context=_context(thread), config={}, stream_writer=events.append,
                       tool_call_id="call-1", store=None)


def test_a_pending_host_turns_the_tool_result_into_an_approval_request(thread: Path) -> None:
    events: list[dict[str, object]] = []
    handle = OpenScope(ASK, ScopeReport((
        NetworkRecord("pypi.org", 443, "CONNECT", "allowed", "allowlist"),
        NetworkRecord("evil.test", 443, "CONNECT", "pending", "awaiting_approval"),
        NetworkRecord("evil.test", 443, "CONNECT", "pending", "awaiting_approval"),
    )))
    text, artifact = settle(_runtime(thread, events), handle, ("output", {"status": "ok"}), tool="bash")
    assert artifact["human_input"]["targets"] == ["evil.test:443"]
    assert artifact["network"] == {"allowed": ["pypi.org:443"], "pending": ["evil.test:443"], "denied": []}
    assert text.startswith("output\n") and "asked to approve" in text
    assert [(e["kind"], e["data"].get("decision")) for e in events] == [
        ("network_decision", "allowed"), ("network_request", None), ("network_decision", "pending")]


def test_a_denied_host_is_explained_without_asking(thread: Path) -> None:
    events: list[dict[str, object]] = []
    handle = OpenScope(ASK, ScopeReport((NetworkRecord("evil.test", 80, "GET", "denied", "unattended"),)))
    text, artifact = settle(_runtime(thread, events), handle, ("output", {"status": "ok"}), tool="python")
    assert "human_input" not in artifact
    assert "evil.test:80 was refused" in text and "unattended" in text
    assert events[-1]["data"]["reason"] == "unattended"


class _Egress:
    def __init__(self) -> None:
        self.gate = NetworkGate(Allowlist())


class _Runtime:
    def __init__(self, context: RunContext, events: list[dict[str, object]]) -> None:
        self.context = context
        self.stream_writer = events.append


def _asked_thread(answer: str) -> list[object]:
    request = approval_request(["api.test:443"], tool_call_id="call-1", tool="bash")
    return [AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "curl"}, "id": "call-1"}]),
            ToolMessage("refused", tool_call_id="call-1", artifact={"human_input": request}),
            HumanMessage(answer)]


def test_the_reply_to_an_approval_request_grants_access_to_the_next_run(thread: Path) -> None:
    egress, events = _Egress(), []
    context = _context(thread)
    context.run_id = "run-2"
    context.services = HostServices(sandbox=type("Provider", (), {"egress": egress})())
    messages = _asked_thread("Always allow for this thread")
    assert pending_request(messages[:-1]) is not None
    NetworkApprovalMiddleware().before_agent({"messages": messages}, _Runtime(context, events))  # type: ignore[arg-type]
    assert egress.gate.always_allowed(thread) == ["api.test:443"]
    assert events[0]["kind"] == "network_decision" and events[0]["data"]["by"] == "user"
    assert events[0]["data"]["reason"] == "approved_always"


def test_an_ordinary_message_after_a_clarification_grants_nothing(thread: Path) -> None:
    egress, events = _Egress(), []
    context = _context(thread)
    context.services = HostServices(sandbox=type("Provider", (), {"egress": egress})())
    messages = _asked_thread("Always allow for this thread")
    messages[1] = ToolMessage("question", tool_call_id="call-1", artifact={"human_input": {
        "source": "ask_clarification", "question": "Which file?", "targets": ["api.test:443"]}})
    NetworkApprovalMiddleware().before_agent({"messages": messages}, _Runtime(context, events))  # type: ignore[arg-type]
    assert egress.gate.always_allowed(thread) == [] and events == []

"""Which hosts a sandbox in ``allowlist`` mode may reach, and who decides about the rest.

The egress proxy (:mod:`deerflow.sandbox.network.egress_proxy`) asks a
:class:`NetworkGate` about every connection.  The gate answers from three
sources, in this order:

1. the operator's :class:`Allowlist` (``sandbox.allowed_hosts``): exact names,
   ``*.suffix`` wildcards, optionally ``:port``;
2. the thread's grants, made by a person answering an approval request:
   *always* (persisted beside the thread's files, so it survives restarts)
   or *once* (valid for the single run that carried the answer), and denials
   (refused without asking again for the run that carried the answer);
3. an IP literal that is not a public address (the classifier the URL guard
   and the egress proxy share, :mod:`deerflow.web.addresses`) is denied
   without asking: the proxy would refuse it anyway;
4. otherwise the target is not allowed.  Whether that becomes a *pending*
   request (a person will be asked) or a plain denial depends on who is
   executing: each tool call opens a :class:`CallScope` on the thread for its
   duration, carrying its run id and whether that run may ask a person.
   Connections made while no tool call is running (a background thread left
   in the kernel) are denied without asking.  When several calls are active
   at once the gate fails closed: it asks only if *every* active scope may.

A run cannot wait for a person in the middle of a tool call, so a pending
request is refused *now*; the tool that drained it turns it into a
human-input request that ends the turn, and the answer — applied at the
start of the next run — decides what that run may reach.

Approvals are per ``host:port`` target.  Every decision is journaled as a
:class:`NetworkRecord`; the scope that closes first drains the records made
on its thread, so each decision is reported exactly once.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from deerflow.errors import ConfigError
from deerflow.web.addresses import classify

logger = logging.getLogger(__name__)

Decision = Literal["allowed", "pending", "denied"]
Approval = Literal["once", "always", "deny"]

GRANTS_FILE = "network-grants.json"
MAX_JOURNAL = 500
"""Undrained decisions kept per thread (a kernel's background traffic between calls is bounded)."""
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


def normalize_host(raw: str) -> str | None:
    """A hostname or IP literal in canonical form, or ``None`` when it is not one.

    Lower-cases, drops a trailing dot and IPv6 brackets, and refuses anything
    that could smuggle a second target (spaces, ``@``, ``/``, ``%``...).
    """
    host = raw.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host.rstrip(".")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not host or len(host) > 253:
        return None
    return host if all(_LABEL.match(label) for label in host.split(".")) else None


def is_ip_literal(host: str) -> bool:
    """Whether ``host`` (normalized) is an IP address rather than a name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def not_public_literal(host: str) -> bool:
    """Whether ``host`` is an IP literal the shared classifier calls non-public.

    Such a target is refused without asking anyone (unless the operator lists
    it): approving it could only ever end in the egress proxy's refusal.
    """
    try:
        return classify(ipaddress.ip_address(host)) is not None
    except ValueError:
        return False


def target(host: str, port: int) -> str:
    """The ``host:port`` form approvals and events use (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class HostRule:
    """One ``sandbox.allowed_hosts`` entry.

    Attributes:
        host: The exact host, or the suffix after ``*.`` for a wildcard.
        wildcard: Matches strict subdomains of ``host`` (not ``host`` itself).
        port: Only this port, or any port when ``None``.
    """

    host: str
    wildcard: bool = False
    port: int | None = None

    @classmethod
    def parse(cls, entry: str) -> HostRule:
        """Parse ``name``, ``*.suffix``, ``name:443``, ``10.0.0.5`` or ``[::1]:80``.

        Raises:
            ValueError: the entry is not a host pattern (has a scheme, path, bad port...).
        """
        text = entry.strip()
        host, port = text, None
        match = re.fullmatch(r"(\[[^\]]+\]|[^:]+):(\d{1,5})", text)
        if match:
            host, port = match.group(1), int(match.group(2))
            if not 0 < port < 65536:
                raise ValueError(f"port out of range in {entry!r}")
        wildcard = host.startswith("*.")
        name = normalize_host(host[2:] if wildcard else host)
        if name is None or (wildcard and is_ip_literal(name)):
            raise ValueError(f"{entry!r} is not a host name, '*.domain' pattern or IP address")
        return cls(name, wildcard, port)

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        return host.endswith("." + self.host) if self.wildcard else host == self.host


@dataclass(frozen=True)
class Allowlist:
    """The operator's allowed hosts (``sandbox.allowed_hosts``)."""

    rules: tuple[HostRule, ...] = ()

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> Allowlist:
        """Parse config entries.

        Raises:
            ConfigError: an entry is not a host pattern (the message names it).
        """
        rules = []
        for i, entry in enumerate(entries):
            try:
                rules.append(HostRule.parse(entry))
            except ValueError as exc:
                raise ConfigError(str(exc), key=f"sandbox.allowed_hosts[{i}]") from None
        return cls(tuple(rules))

    def allows(self, host: str, port: int) -> bool:
        return any(rule.matches(host, port) for rule in self.rules)

    def lists_address(self, host: str, port: int) -> bool:
        """Whether an IP literal is allowed *by an explicit entry* (the operator vouches for it)."""
        return is_ip_literal(host) and any(
            not r.wildcard and r.host == host and r.port in (None, port) for r in self.rules
        )


@dataclass(frozen=True)
class CallScope:
    """Who is executing in a thread's sandbox during one tool call.

    Attributes:
        run_id: The run the call belongs to (run-scoped grants match on it).
        may_ask: Whether a person may be asked about a non-allowed host.
        denial_reason: Why not, when ``may_ask`` is false (``unattended``, ``subagent``).
    """

    run_id: str
    may_ask: bool
    denial_reason: str = ""


@dataclass(frozen=True)
class NetworkRecord:
    """One decision of the gate, as reported in the run's events.

    Attributes:
        host: Normalized host name or IP.
        port: Destination port.
        method: ``CONNECT`` or the forwarded HTTP method.
        decision: ``allowed``, ``pending`` (refused now, a person will be asked) or ``denied``.
        reason: ``allowlist``, ``approved_once``, ``approved_always``, ``awaiting_approval``,
            ``unattended``, ``subagent``, ``outside_tool_call``, ``user_denied``,
            ``private_address``, ``unresolvable`` or ``upstream_unreachable``.
    """

    host: str
    port: int
    method: str
    decision: Decision
    reason: str

    @property
    def target(self) -> str:
        return target(self.host, self.port)


@dataclass(frozen=True)
class ScopeReport:
    """What the gate decided on a thread while one tool call was open."""

    records: tuple[NetworkRecord, ...] = ()

    def targets(self, decision: Decision) -> list[str]:
        """Distinct targets with ``decision``, in first-seen order."""
        return list(dict.fromkeys(r.target for r in self.records if r.decision == decision))


@dataclass
class OpenScope:
    """A tool call's scope while it runs; ``report`` is set when it closes."""

    call: CallScope
    report: ScopeReport = field(default_factory=ScopeReport)


@dataclass
class _ThreadState:
    always: set[str] = field(default_factory=set)
    once: dict[str, set[str]] = field(default_factory=dict)  # run id -> targets
    refused: dict[str, set[str]] = field(default_factory=dict)  # run id -> targets
    scopes: list[CallScope] = field(default_factory=list)
    journal: list[NetworkRecord] = field(default_factory=list)


class NetworkGate:
    """Allowlist, per-thread grants and pending requests; safe to call from any thread.

    Threads are keyed by their host root directory (``ThreadPaths.root``),
    which names both the user and the thread; *always* grants are stored in
    ``<root>/network-grants.json``, outside the directories a sandbox mounts.

    Args:
        allowlist: The operator's allowed hosts.
    """

    def __init__(self, allowlist: Allowlist) -> None:
        self.allowlist = allowlist
        self._lock = threading.Lock()
        self._threads: dict[Path, _ThreadState] = {}

    def _state(self, key: Path) -> _ThreadState:
        state = self._threads.get(key)
        if state is None:
            state = _ThreadState(always=_load_grants(key))
            self._threads[key] = state
        return state

    @contextmanager
    def scope(self, key: Path, call: CallScope) -> Iterator[OpenScope]:
        """Mark a tool call as running on ``key``; on exit, drain the thread's decisions.

        Yields an :class:`OpenScope` whose ``report`` is filled when the block
        exits (a context manager cannot return a value).
        """
        with self._lock:
            self._state(key).scopes.append(call)
        handle = OpenScope(call)
        try:
            yield handle
        finally:
            with self._lock:
                state = self._state(key)
                state.scopes.remove(call)
                records, state.journal = tuple(state.journal), []
            handle.report = ScopeReport(records)

    def decide(self, key: Path, host: str, port: int) -> tuple[Decision, str]:
        """The verdict for a connection to ``host:port`` from the thread's sandbox (not journaled)."""
        if self.allowlist.allows(host, port):
            return "allowed", "allowlist"
        if not_public_literal(host):
            return "denied", "private_address"  # no person is asked to open the host's own networks
        wanted = target(host, port)
        with self._lock:
            state = self._state(key)
            if wanted in state.always:
                return "allowed", "approved_always"
            runs = {s.run_id for s in state.scopes}
            if any(wanted in state.once.get(run, ()) for run in runs):
                return "allowed", "approved_once"
            if any(wanted in state.refused.get(run, ()) for run in runs):
                return "denied", "user_denied"
            if not state.scopes:
                return "denied", "outside_tool_call"
            barred = next((s for s in state.scopes if not s.may_ask), None)
        if barred is not None:
            return "denied", barred.denial_reason or "unattended"
        return "pending", "awaiting_approval"

    def log(self, key: Path, record: NetworkRecord) -> None:
        """Journal a final decision; the next closing scope on ``key`` reports it."""
        with self._lock:
            journal = self._state(key).journal
            journal.append(record)
            del journal[:-MAX_JOURNAL]
        logger.info("egress %s %s: %s (%s)", record.method, record.target, record.decision, record.reason)

    def apply_answer(self, key: Path, *, run_id: str, targets: Sequence[str], answer: Approval) -> None:
        """Record a person's answer to an approval request for ``targets``.

        ``once`` and ``deny`` hold for the run ``run_id`` (the run the answer
        starts); ``always`` holds for the thread from now on and is persisted.
        """
        with self._lock:
            state = self._state(key)
            if answer == "always":
                state.always.update(targets)
                _save_grants(key, state.always)
            else:
                runs = state.once if answer == "once" else state.refused
                runs.clear()  # only the latest answered run keeps run-scoped grants
                runs[run_id] = set(targets)

    def always_allowed(self, key: Path) -> list[str]:
        """The thread's persisted grants, sorted."""
        with self._lock:
            return sorted(self._state(key).always)

    def forget(self, key: Path) -> None:
        """Drop the in-memory state of a thread (its grants file stays)."""
        with self._lock:
            self._threads.pop(key, None)


def _load_grants(key: Path) -> set[str]:
    path = key / GRANTS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return set()
    except (OSError, ValueError) as exc:
        logger.warning("ignoring unreadable network grants %s: %s", path, exc)
        return set()
    always = data.get("always") if isinstance(data, dict) else None
    return {t for t in always if isinstance(t, str)} if isinstance(always, list) else set()


def _save_grants(key: Path, always: set[str]) -> None:
    key.mkdir(parents=True, exist_ok=True)
    tmp = key / (GRANTS_FILE + ".tmp")
    tmp.write_text(json.dumps({"always": sorted(always)}, indent=1), encoding="utf-8")
    tmp.replace(key / GRANTS_FILE)


__all__ = [
    "Allowlist", "Approval", "CallScope", "Decision", "HostRule", "NetworkGate", "NetworkRecord",
    "OpenScope", "ScopeReport", "is_ip_literal", "normalize_host", "not_public_literal", "target",
]

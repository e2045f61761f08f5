"""Acceptance criteria the harness checks itself, after a subagent ends.

The lead may attach criteria to a delegation.  Three canonical forms are
objective, so the harness checks them instead of believing the report:

* ``file:<path> exists`` / ``file:<path> non-empty`` — the virtual path is
  a file (of at least one byte);
* ``file_written:<path>`` — the file exists and was created or changed while
  the subagent ran (compared with a snapshot taken before it started);
* ``tests_passed:<command>`` — the command, run in the thread's sandbox
  through the provider's ``execute``, exits 0.

Each criterion gets ``MET``, ``UNMET`` or ``UNVERIFIED`` (free text, a path
outside the mounts, no sandbox that runs commands, a command the audit
blocks): the harness never guesses.  The overall verdict is ``UNMET`` if any
criterion is unmet, else ``UNVERIFIED`` if any is unverified, else ``MET``.
"""

from __future__ import annotations

import hashlib
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.sandbox.execution.audit import audit_command
from deerflow.sandbox.execution.provider import SandboxProvider
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.threadfs import UnsafePath
from deerflow.tools.offload import OFFLOADER, Offloader

Verdict = Literal["MET", "UNMET", "UNVERIFIED"]
CriterionKind = Literal["file", "file_written", "tests_passed", "free_text"]

MAX_CRITERIA = 20
MAX_CRITERION_CHARS = 1_000
_FILE = re.compile(r"^file:\s*(?P<path>\S.*?)\s+(?P<cond>exists|non-empty)\s*$")
_WRITTEN = re.compile(r"^file_written:\s*(?P<path>\S.*?)\s*$")
_TESTS = re.compile(r"^tests_passed:\s*(?P<command>\S.*?)\s*$", re.S)
_HASH_LIMIT = 16 * 1024 * 1024
SNAPSHOT_DEADLINE_S = 120.0
"""How long the snapshot of the ``file_written`` targets before a delegation starts (up to 20 files,
each hashed up to 16 MB) may take on the tool offloader; past it the delegation is refused and
nothing is started."""
CHECK_DEADLINE_S = 30.0
"""How long one file criterion's check (a stat, and a hash of at most 16 MB) may take on the tool
offloader before it is ``UNVERIFIED``: a stalled mount must not hold the delegation's answer."""


@dataclass(frozen=True)
class Criterion:
    """One parsed criterion (``free_text`` when it is not a canonical form)."""

    text: str
    kind: CriterionKind
    path: str | None = None
    condition: str | None = None
    command: str | None = None


def parse_criterion(text: str) -> Criterion:
    """Recognise a canonical criterion; anything else is free text."""
    stripped = text.strip()
    if match := _FILE.match(stripped):
        return Criterion(stripped, "file", path=match["path"], condition=match["cond"])
    if match := _WRITTEN.match(stripped):
        return Criterion(stripped, "file_written", path=match["path"])
    if match := _TESTS.match(stripped):
        return Criterion(stripped, "tests_passed", command=match["command"])
    return Criterion(stripped, "free_text")


def normalize_criteria(raw: Sequence[str] | str | None) -> list[str]:
    """The criteria as a clean list (strings, stripped, bounded).

    Raises:
        ToolFailure: ``invalid_argument`` for too many or too long criteria.
    """
    if raw is None:
        return []
    items = [raw] if isinstance(raw, str) else list(raw)
    cleaned = [str(c).strip() for c in items if str(c).strip()]
    if len(cleaned) > MAX_CRITERIA:
        raise ToolFailure(f"at most {MAX_CRITERIA} acceptance criteria per task", code="invalid_argument")
    if any(len(c) > MAX_CRITERION_CHARS for c in cleaned):
        raise ToolFailure(f"an acceptance criterion is longer than {MAX_CRITERION_CHARS} characters",
                          code="invalid_argument")
    return cleaned


@dataclass(frozen=True)
class CriterionResult:
    criterion: str
    kind: CriterionKind
    verdict: Verdict
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"criterion": self.criterion, "kind": self.kind, "verdict": self.verdict, "reason": self.reason}


@dataclass(frozen=True)
class AcceptanceReport:
    """Per-criterion verdicts and the overall one (None when there were no criteria)."""

    results: tuple[CriterionResult, ...]

    @property
    def overall(self) -> Verdict | None:
        verdicts = {r.verdict for r in self.results}
        if not verdicts:
            return None
        if "UNMET" in verdicts:
            return "UNMET"
        return "UNVERIFIED" if "UNVERIFIED" in verdicts else "MET"

    def to_dict(self) -> dict[str, Any]:
        return {"overall": self.overall, "criteria": [r.to_dict() for r in self.results]}

    def lines(self) -> list[str]:
        return [f"- {r.criterion}: {r.verdict} ({r.reason})" for r in self.results]


FileState = tuple[int, int, str] | None
"""(size, mtime_ns, sha256 prefix) of a file, None when it does not exist."""


def file_state(vfs: VirtualFS, path: str) -> FileState:
    """What :func:`check_acceptance` compares for ``file_written`` (``None``: no regular file).

    Read through the thread's SafeDir: a link or a FIFO at the path is no file.
    """
    rp = vfs.locate(path, write=False)
    try:
        with vfs.open_mount(rp.mount) as root:
            st = root.lstat(rp.rel)
            if st is None or not stat.S_ISREG(st.st_mode):
                return None
            digest = ""
            if st.st_size <= _HASH_LIMIT:
                digest = hashlib.sha256(root.read_bytes(rp.rel, max_bytes=_HASH_LIMIT)).hexdigest()[:16]
    except UnsafePath:
        return None
    return st.st_size, st.st_mtime_ns, digest


def snapshot_targets(criteria: Sequence[str], vfs: VirtualFS) -> dict[str, FileState]:
    """Before the subagent starts: the state of every ``file_written`` target."""
    before: dict[str, FileState] = {}
    for text in criteria:
        parsed = parse_criterion(text)
        if parsed.kind == "file_written" and parsed.path:
            try:
                before[parsed.path] = file_state(vfs, parsed.path)
            except ToolFailure:
                continue
    return before


async def asnapshot_targets(criteria: Sequence[str], vfs: VirtualFS, *, offloader: Offloader | None = None,
                            key: str = "") -> dict[str, FileState]:
    """:func:`snapshot_targets` on the tool offloader within :data:`SNAPSHOT_DEADLINE_S` (no thread
    when no criterion is ``file_written``).

    Raises:
        ToolFailure: ``tool_timeout``/``tool_busy``: the delegation must not start (a target whose
            state before is unknown could not be checked).
    """
    if not any(parse_criterion(text).kind == "file_written" for text in criteria):
        return {}
    return await (offloader or OFFLOADER).arun(snapshot_targets, criteria, vfs, key=key,
                                               what="reading the files the acceptance criteria name",
                                               deadline=SNAPSHOT_DEADLINE_S)


@dataclass
class AcceptanceContext:
    """Where criteria are checked: the thread's files and sandbox."""

    paths: ThreadPaths
    vfs: VirtualFS
    sandbox: SandboxProvider | None
    before: Mapping[str, FileState]
    command_timeout: float = 300.0
    offloader: Offloader | None = None
    """Where the file checks run (None: the process's :data:`~deerflow.tools.offload.OFFLOADER`)."""
    key: str = ""
    """The conversation the checks count against on the offloader (the parent's thread)."""


async def check_acceptance(criteria: Sequence[str], ctx: AcceptanceContext) -> AcceptanceReport:
    """Check every criterion (commands run one after the other, in the sandbox)."""
    results = [await _check(parse_criterion(text), ctx) for text in criteria]
    return AcceptanceReport(tuple(results))


async def _check(criterion: Criterion, ctx: AcceptanceContext) -> CriterionResult:
    if criterion.kind == "free_text":
        return _result(criterion, "UNVERIFIED", "free text: the harness cannot check it; read the report")
    if criterion.kind == "tests_passed":
        return await _check_command(criterion, ctx)
    assert criterion.path is not None
    try:
        ctx.vfs.locate(criterion.path, write=False)
    except ToolFailure as exc:
        return _result(criterion, "UNVERIFIED", f"cannot check that path: {exc.message}")
    offloader = ctx.offloader or OFFLOADER
    try:
        if criterion.kind == "file":
            return await offloader.arun(_check_file, criterion, ctx.vfs, key=ctx.key,
                                        what=f"checking {criterion.path}", deadline=CHECK_DEADLINE_S)
        after = await offloader.arun(file_state, ctx.vfs, criterion.path, key=ctx.key,
                                     what=f"checking {criterion.path}", deadline=CHECK_DEADLINE_S)
    except ToolFailure as exc:
        if exc.code not in ("tool_timeout", "tool_busy"):
            raise
        return _result(criterion, "UNVERIFIED", f"could not check it: {exc.message}")
    return _check_written(criterion, after, ctx.before.get(criterion.path, None))


def _check_file(criterion: Criterion, vfs: VirtualFS) -> CriterionResult:
    assert criterion.path is not None
    kind = vfs.kind(criterion.path)
    size = vfs.size(criterion.path)
    if size is None:
        return _result(criterion, "UNMET", "no such file" if kind is None else "not a regular file")
    if criterion.condition == "non-empty" and size == 0:
        return _result(criterion, "UNMET", "the file is empty")
    return _result(criterion, "MET", f"file has {size} bytes")


def _check_written(criterion: Criterion, after: FileState, before: FileState) -> CriterionResult:
    if after is None:
        return _result(criterion, "UNMET", "no such file")
    if before is None:
        return _result(criterion, "MET", "created during the task")
    if after != before:
        return _result(criterion, "MET", "changed during the task")
    return _result(criterion, "UNMET", "the file existed before and was not changed")


async def _check_command(criterion: Criterion, ctx: AcceptanceContext) -> CriterionResult:
    command = criterion.command or ""
    if ctx.sandbox is None or not ctx.sandbox.allows_bash:
        return _result(criterion, "UNVERIFIED", "no sandbox that runs shell commands in this session")
    verdict = audit_command(command)
    if verdict.blocked:
        return _result(criterion, "UNVERIFIED", "the command was blocked by the security audit: "
                       + "; ".join(verdict.reasons))
    result = await ctx.sandbox.aexecute(ctx.paths, command, timeout=ctx.command_timeout)
    if result.timed_out:
        return _result(criterion, "UNMET", f"timed out after {ctx.command_timeout:g}s")
    if result.exit_code == 0:
        return _result(criterion, "MET", "exit code 0")
    return _result(criterion, "UNMET", f"exit code {result.exit_code}")


def _result(criterion: Criterion, verdict: Verdict, reason: str) -> CriterionResult:
    return CriterionResult(criterion.text, criterion.kind, verdict, reason)


__all__ = ["AcceptanceContext", "AcceptanceReport", "Criterion", "CriterionResult", "Verdict", "asnapshot_targets",
           "check_acceptance", "file_state", "normalize_criteria", "parse_criterion", "snapshot_targets"]

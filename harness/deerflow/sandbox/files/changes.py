"""What a run changed in the thread's files: snapshots and their difference.

Before and after every run the harness snapshots the thread's workspace and
outputs (never the uploads: they are the user's inputs, not the agent's work)
and reports the difference as created / modified / deleted files.  That turns
"the agent changed something" into an inspectable list, and gives the delivery
receipt (:mod:`deerflow.runs.receipt`) its set of produced outputs.

Decisions:

* **A snapshot records metadata for every file** (size, ``mtime_ns``) and, for
  files up to ``hash_max_bytes``, a sha256, so a rewrite with identical bytes
  is not a modification.  Larger files are compared by size and mtime.
* **Unchanged files are not re-read.**  The "after" snapshot reuses the "before"
  entry of a file whose size and mtime are unchanged (git's stat-cache trick),
  so a run costs a ``stat`` per file plus reading what it actually touched.
* **Diffs are bounded**: text is kept only for small text files (and within a
  total budget), each unified diff is cut at ``diff_max_chars`` and all diffs
  of a run share ``total_diff_chars``.
* **Some files are reported as metadata only** — no content, no diff: binaries,
  files over the size caps, and secret-looking files (by name: ``.env``,
  ``*.pem``, ``*key*``, ``id_rsa``...; or by content: private key blocks,
  provider tokens, ``password = ...`` assignments).  A change summary is shown
  in notebooks and chat and stored with the run; it must not become the place
  a secret leaks.
* ``outputs/.tool-results`` (oversized tool results, internal process feedback)
  and noise directories (``.git``, ``node_modules``...) are not walked; symlinks
  are recorded by target and never followed.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any, Literal

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.files.virtual_paths import OUTPUTS, WORKSPACE
from deerflow.sandbox.files.walk import NOISE_DIRS
from deerflow.threadfs import EntryInfo, SafeDir, UnsafePath

TOOL_RESULTS_DIR = ".tool-results"
TOOL_RESULTS = OUTPUTS / TOOL_RESULTS_DIR
"""Where oversized tool results are written; excluded from change summaries and receipts."""

FileKind = Literal["text", "binary", "large", "secret", "symlink", "unreadable", "unscanned"]
ChangeKind = Literal["created", "modified", "deleted"]

_SECRET_NAME_GLOBS = (
    ".env", ".env.*", "*.env", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.ppk",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", ".pgpass", ".npmrc", ".pypirc",
    "*key*", "*secret*", "*password*", "*credential*",
)
_SECRET_CONTENT = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\bsk-[A-Za-z0-9_-]{20,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\bAIza[0-9A-Za-z_-]{35}"
    r"|(?i:\b(?:api[_-]?key|secret[_-]?key|client[_-]?secret|access[_-]?token|auth[_-]?token"
    r"|password|passwd)\b[\"']?\s*[:=]\s*[\"']?[^\s\"']{8,})"
)
_BINARY_SNIFF = 8192
_MIN_DIFF_CHARS = 200  # less room than this for a diff is not worth showing


@dataclass(frozen=True)
class ChangeLimits:
    """Caps that keep snapshots and summaries bounded whatever the agent wrote.

    Attributes:
        max_files: Entries recorded per snapshot; beyond it the snapshot is ``truncated``.
        hash_max_bytes: Files up to this size are hashed and checked for secrets.
        diff_max_file_bytes: Text kept for diffing only for files up to this size.
        text_budget_bytes: Total text a snapshot keeps for diffing.
        read_budget_bytes: Total bytes a snapshot reads; later files are compared
            by size and mtime only (``unscanned``).
        diff_max_chars: Longest diff shown for one file.
        total_diff_chars: All diffs of one summary together.
    """

    max_files: int = 10_000
    hash_max_bytes: int = 2_000_000
    diff_max_file_bytes: int = 256_000
    text_budget_bytes: int = 16_000_000
    read_budget_bytes: int = 256_000_000
    diff_max_chars: int = 4_000
    total_diff_chars: int = 20_000


@dataclass(frozen=True)
class FileState:
    """One file as a snapshot saw it.

    Attributes:
        size: Size in bytes (of the link itself for a symlink).
        mtime_ns: Modification time.
        kind: How it is reported; only ``text`` files ever get a diff.
        sha256: Content hash (link target hash for a symlink); ``None`` when not hashed.
        text: The content, kept for diffing small text files only.
    """

    size: int
    mtime_ns: int
    kind: FileKind
    sha256: str | None = None
    text: str | None = field(default=None, repr=False)


@dataclass
class _Budget:
    """What one snapshot may still read and keep."""

    read: int
    text: int


@dataclass(frozen=True)
class Snapshot:
    """The workspace and outputs at one moment, by virtual path."""

    files: dict[str, FileState]
    truncated: bool = False


@dataclass(frozen=True)
class FileChange:
    """One changed file.

    Attributes:
        path: Virtual path.
        change: created, modified or deleted.
        kind: The file's kind now (before, for a deleted file).
        size: Size now (``None`` when deleted).
        previous_size: Size before (``None`` when created).
        diff: Unified diff for text files, bounded.
        diff_truncated: The diff was cut at a cap.
        note: Why there is no diff, when there is none.
    """

    path: str
    change: ChangeKind
    kind: FileKind
    size: int | None
    previous_size: int | None
    diff: str | None = None
    diff_truncated: bool = False
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v is not False}


@dataclass(frozen=True)
class ChangeSummary:
    """The difference between two snapshots.

    Attributes:
        created, modified, deleted: Changes by kind, sorted by path.
        truncated: A snapshot hit ``max_files`` or the walk's depth cap; the summary may be incomplete.
    """

    created: tuple[FileChange, ...] = ()
    modified: tuple[FileChange, ...] = ()
    deleted: tuple[FileChange, ...] = ()
    truncated: bool = False

    @property
    def empty(self) -> bool:
        return not (self.created or self.modified or self.deleted)

    def changed_under(self, root: PurePosixPath) -> list[str]:
        """Created or modified paths below ``root`` (what a run produced there)."""
        return [c.path for c in (*self.created, *self.modified) if PurePosixPath(c.path).is_relative_to(root)]

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as carried by the ``workspace_changes`` event and stored with the run."""
        return {
            "created": [c.to_dict() for c in self.created],
            "modified": [c.to_dict() for c in self.modified],
            "deleted": [c.to_dict() for c in self.deleted],
            "counts": {"created": len(self.created), "modified": len(self.modified),
                       "deleted": len(self.deleted)},
            "truncated": self.truncated,
        }


# -- snapshots ------------------------------------------------------------------


def take_snapshot(
    paths: ThreadPaths, *, previous: Snapshot | None = None, limits: ChangeLimits = ChangeLimits()
) -> Snapshot:
    """Snapshot the thread's workspace and outputs.

    Args:
        paths: The thread's host directories.
        previous: An earlier snapshot whose entries are reused for files whose
            size and mtime have not changed.
        limits: Size and count caps.
    """
    reuse = previous.files if previous else {}
    files: dict[str, FileState] = {}
    budget = _Budget(read=limits.read_budget_bytes, text=limits.text_budget_bytes)
    too_deep: list[str] = []
    truncated = False
    for root, rel, info, virtual in _walk(paths, too_deep.append):
        if len(files) >= limits.max_files:
            truncated = True
            break
        state = _file_state(root, rel, info, virtual, reuse.get(virtual), limits, budget)
        if state is not None:
            files[virtual] = state
    return Snapshot(files, truncated or bool(too_deep))


def _walk(paths: ThreadPaths, on_too_deep: Callable[[str], None]) -> Iterator[tuple[SafeDir, str, EntryInfo, str]]:
    """Every non-directory entry of workspace and outputs, sorted: its mount's
    SafeDir, its path below it, what ``lstat`` said and its virtual path.
    Nothing is followed: the agent's code may swap anything here at any time;
    folders past the walk's depth cap go to ``on_too_deep`` (the snapshot is then partial)."""
    for host_root, virtual_root in ((paths.workspace, WORKSPACE), (paths.outputs, OUTPUTS)):
        try:
            root = SafeDir.open(host_root)
        except UnsafePath:
            continue
        with root:
            skip = frozenset(NOISE_DIRS) | ({TOOL_RESULTS.name} if virtual_root == OUTPUTS else frozenset())
            for rel, info in root.walk(skip_dirs=skip, on_too_deep=on_too_deep):
                if info.kind != "dir":
                    yield root, rel, info, str(virtual_root / rel)


def _file_state(
    root: SafeDir, rel: str, info: EntryInfo, virtual: str, prior: FileState | None,
    limits: ChangeLimits, budget: _Budget,
) -> FileState | None:
    """The state of one entry; ``None`` for things that are neither files nor links."""
    name = PurePosixPath(rel).name
    unchanged = prior is not None and (prior.size, prior.mtime_ns) == (info.size, info.mtime_ns)
    if prior is not None and unchanged and prior.kind != "unreadable":
        if prior.text is not None:
            budget.text -= len(prior.text)
        return prior
    if info.kind == "symlink":
        if info.target is None:
            return FileState(info.size, info.mtime_ns, "unreadable")
        return FileState(info.size, info.mtime_ns, "symlink", hashlib.sha256(os.fsencode(info.target)).hexdigest())
    if info.kind != "file":
        return None
    if info.size > limits.hash_max_bytes or info.size > budget.read:
        unread: FileKind = "large" if info.size > limits.hash_max_bytes else "unscanned"
        return FileState(info.size, info.mtime_ns, "secret" if is_secret_name(name) else unread)
    budget.read -= info.size
    try:
        data = root.read_bytes(rel, max_bytes=limits.hash_max_bytes)
    except UnsafePath:  # swapped for a link or FIFO, hard-linked, grown or gone since the listing
        return FileState(info.size, info.mtime_ns, "unreadable")
    return _classify(data, name, info, limits, budget)


def _classify(data: bytes, name: str, info: EntryInfo, limits: ChangeLimits, budget: _Budget) -> FileState:
    digest = hashlib.sha256(data).hexdigest()
    text = decode_text(data)
    if is_secret_name(name) or (text is not None and looks_secret(text)):
        return FileState(len(data), info.mtime_ns, "secret", digest)
    if text is None:
        return FileState(len(data), info.mtime_ns, "binary", digest)
    keep = len(data) <= limits.diff_max_file_bytes and len(text) <= budget.text
    if keep:
        budget.text -= len(text)
    return FileState(len(data), info.mtime_ns, "text", digest, text if keep else None)


def decode_text(data: bytes) -> str | None:
    """The bytes as UTF-8 text, or ``None`` for binary content (NUL bytes, invalid UTF-8)."""
    if b"\x00" in data[:_BINARY_SNIFF]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_secret_name(name: str) -> bool:
    """Whether a file name suggests credentials (case-insensitive globs)."""
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in _SECRET_NAME_GLOBS)


def looks_secret(text: str) -> bool:
    """Whether text contains something shaped like a credential."""
    return _SECRET_CONTENT.search(text) is not None


# -- differences ----------------------------------------------------------------


def diff_snapshots(before: Snapshot, after: Snapshot, *, limits: ChangeLimits = ChangeLimits()) -> ChangeSummary:
    """Created, modified and deleted files between two snapshots, with bounded diffs."""
    created: list[FileChange] = []
    modified: list[FileChange] = []
    budget = [limits.total_diff_chars]
    for path in sorted(after.files):
        now, old = after.files[path], before.files.get(path)
        if old is None:
            change = FileChange(path, "created", now.kind, now.size, None)
            created.append(_with_diff(change, None, now, limits, budget))
        elif _differs(old, now):
            change = FileChange(path, "modified", now.kind, now.size, old.size)
            modified.append(_with_diff(change, old, now, limits, budget))
    deleted = [
        FileChange(path, "deleted", old.kind, None, old.size)
        for path, old in sorted(before.files.items()) if path not in after.files
    ]
    return ChangeSummary(tuple(created), tuple(modified), tuple(deleted), before.truncated or after.truncated)


def _differs(old: FileState, now: FileState) -> bool:
    if old.sha256 is not None and now.sha256 is not None:
        return old.sha256 != now.sha256 or old.kind != now.kind
    return (old.size, old.mtime_ns) != (now.size, now.mtime_ns)


_NO_DIFF_NOTES = {  # first match wins: a secret is called a secret whatever else it is
    "secret": "looks like it holds secrets: metadata only",
    "binary": "binary file: metadata only",
    "large": "large file: metadata only",
    "symlink": "symbolic link: not followed",
    "unreadable": "could not be read",
    "unscanned": "not read (this snapshot's read budget was used up): metadata only",
}


def _with_diff(
    change: FileChange, old: FileState | None, now: FileState, limits: ChangeLimits, budget: list[int]
) -> FileChange:
    """``change`` with its bounded diff, or with a note saying why it has none."""
    kinds = {now.kind} | ({old.kind} if old else set())
    blocked = next((k for k in _NO_DIFF_NOTES if k in kinds), None)
    if blocked:
        return replace(change, note=_NO_DIFF_NOTES[blocked])
    before_text = "" if old is None else old.text
    if before_text is None or now.text is None:
        return replace(change, note="too large to diff")
    used_up = replace(change, note="diff omitted: this run's diff budget is used up")
    if budget[0] < _MIN_DIFF_CHARS:
        return used_up
    diff, cut = bounded_unified_diff(
        before_text, now.text, change.path, min(limits.diff_max_chars, budget[0]), created=old is None
    )
    if cut and not diff:
        return used_up
    budget[0] -= len(diff)
    return replace(change, diff=diff, diff_truncated=cut)


def bounded_unified_diff(
    before: str, after: str, path: str, max_chars: int, *, created: bool = False
) -> tuple[str, bool]:
    """A unified diff of ``before`` → ``after`` cut on a line boundary at ``max_chars``.

    Returns:
        The diff text and whether it was cut.
    """
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile="/dev/null" if created else f"a{path}", tofile=f"b{path}",
    )
    out: list[str] = []
    used = 0
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        if used + len(line) > max_chars:
            return "".join(out), True
        out.append(line)
        used += len(line)
    return "".join(out), False

"""Searching a :class:`VirtualFS`: ``glob`` (paths by pattern) and ``grep`` (lines by RE2 regex).

The bodies of the glob and grep tools, beside :mod:`deerflow.sandbox.files.fs_ops` (read, write,
list).  Both walk with :meth:`VirtualFS.walk`, cap their results (each lands in the model's
context) and say when they did, say when the walk stopped at its depth cap (the agent decides how
deep its folders go, the host does not follow), and skip (and count) symlinks that leave their mount; grep also
skips binary and huge files.  Patterns run on RE2 (linear time), so a pattern the model writes
cannot stall a search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import takewhile
from pathlib import PurePosixPath

from deerflow.errors import ToolFailure
from deerflow.sandbox.files.fs_ops import SNIFF_BYTES
from deerflow.sandbox.files.virtual_paths import WORKSPACE, VirtualFS
from deerflow.text.safe_regex import PatternError, Regex, compile_pattern
from deerflow.threadfs import UnsafePath

GLOB_MAX_RESULTS = 200
GREP_MAX_MATCHES = 100
GREP_MAX_FILE_BYTES = 5_000_000
GREP_MAX_LINE_CHARS = 300


@dataclass(frozen=True)
class GlobResult:
    """Result of :func:`glob`.  Directories carry a trailing ``/``."""

    pattern: str
    path: str
    matches: tuple[str, ...]
    truncated: bool
    limit: int
    skipped_links: int
    depth_limit: int | None = None
    """Set when the walk stopped at this depth: folders there were listed, not entered."""


@dataclass(frozen=True)
class GrepMatch:
    """One matching line."""

    path: str
    line_number: int
    line: str


@dataclass(frozen=True)
class GrepResult:
    """Result of :func:`grep`."""

    pattern: str
    path: str
    matches: tuple[GrepMatch, ...]
    truncated: bool
    limit: int
    files_searched: int
    skipped_binary: int
    skipped_large: int
    skipped_links: int
    depth_limit: int | None = None
    """As :attr:`GlobResult.depth_limit`: files below that depth were not searched."""


def glob(
    vfs: VirtualFS,
    pattern: str,
    path: str = str(WORKSPACE),
    *,
    max_results: int = GLOB_MAX_RESULTS,
) -> GlobResult:
    """Paths under ``path`` matching ``pattern`` (``*``, ``?``, ``[..]``, ``**``).

    An absolute pattern such as ``/mnt/user-data/workspace/**/*.py`` is split
    into its literal directory and the pattern below it.
    """
    path, pattern = _split_pattern(pattern, path)
    regex = _glob_regex(pattern)
    too_deep: list[int] = []
    shown, walk = vfs.walk(path, on_too_deep=too_deep.append)
    found: list[str] = []
    skipped = 0
    for item in walk:
        skipped += item.escapes
        if not item.escapes and regex.fullmatch(item.rel):
            found.append(item.virtual + ("/" if item.is_dir else ""))
            if len(found) > max_results:
                break
    return GlobResult(
        pattern, shown, tuple(found[:max_results]), len(found) > max_results, max_results, skipped,
        min(too_deep, default=None),
    )


def grep(
    vfs: VirtualFS,
    pattern: str,
    path: str = str(WORKSPACE),
    *,
    literal: bool = False,
    case_sensitive: bool = True,
    glob: str | None = None,
    max_matches: int = GREP_MAX_MATCHES,
) -> GrepResult:
    """Lines matching ``pattern`` (an RE2 regex unless ``literal``) in text files.

    ``glob`` filters files: matched against the file name when it has no
    ``/``, else against the path below ``path``.
    """
    regex = _grep_regex(pattern, literal=literal, case_sensitive=case_sensitive)
    name_filter = _glob_regex(glob) if glob else None
    too_deep: list[int] = []
    shown, walk = vfs.walk(path, on_too_deep=too_deep.append)
    matches: list[GrepMatch] = []
    counts: dict[str, int] = dict.fromkeys(
        ("files_searched", "skipped_binary", "skipped_large", "skipped_links"), 0
    )
    for item in walk:
        if len(matches) > max_matches:
            break
        counts["skipped_links"] += item.escapes
        subject = item.rel if glob and "/" in glob else PurePosixPath(item.rel).name
        if item.is_dir or item.escapes or (name_filter and not name_filter.fullmatch(subject)):
            continue
        counter, lines = _text_lines(vfs, item)
        counts[counter] += 1
        for number, line in enumerate(lines, 1):
            if regex.search(line):
                matches.append(GrepMatch(item.virtual, number, line[:GREP_MAX_LINE_CHARS]))
                if len(matches) > max_matches:
                    break
    truncated = len(matches) > max_matches
    return GrepResult(
        pattern, shown, tuple(matches[:max_matches]), truncated, max_matches, **counts,
        depth_limit=min(too_deep, default=None),
    )


def _text_lines(vfs: VirtualFS, item) -> tuple[str, list[str]]:
    """A file's lines for grep and the GrepResult counter it adds to.

    Unreadable files (FIFOs, hard links, files that vanished) count as binary:
    either way there is no text to search.
    """
    if item.info is not None and item.info.size > GREP_MAX_FILE_BYTES:
        return "skipped_large", []
    try:
        with vfs.open_mount(item.mount) as root:
            raw = root.read_bytes(item.mount_rel, max_bytes=GREP_MAX_FILE_BYTES)
    except UnsafePath as exc:
        return ("skipped_large" if exc.code == "too_large" else "skipped_binary"), []
    except ToolFailure:
        return "skipped_binary", []
    if b"\x00" in raw[:SNIFF_BYTES]:
        return "skipped_binary", []
    try:
        return "files_searched", raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return "skipped_binary", []


def _grep_regex(pattern: str, *, literal: bool, case_sensitive: bool) -> Regex:
    """The model's pattern on RE2: linear time, so ``(a+)+$`` cannot stall a search."""
    if not pattern:
        raise ToolFailure("The search pattern is empty.", code="bad_pattern")
    try:
        return compile_pattern(pattern, ignore_case=not case_sensitive, literal=literal)
    except PatternError as exc:
        raise ToolFailure(
            f"{exc.message} Set literal=true to search for the text as is.", code="bad_pattern"
        ) from None


def _split_pattern(pattern: str, path: str) -> tuple[str, str]:
    pattern = pattern.strip()
    if not pattern:
        raise ToolFailure("The glob pattern is empty.", code="bad_pattern")
    parts = PurePosixPath(pattern).parts
    if ".." in parts:
        raise ToolFailure("'..' is not allowed in glob patterns.", code="bad_pattern")
    if not pattern.startswith("/"):
        return path, pattern.removeprefix("./")
    literal = list(takewhile(lambda part: not any(c in part for c in "*?["), parts))
    if len(literal) == len(parts):
        raise ToolFailure(
            "The pattern has no wildcard; use ls or read_file for a single path.",
            code="bad_pattern",
        )
    return str(PurePosixPath(*literal)), "/".join(parts[len(literal) :])


def _glob_regex(pattern: str) -> Regex:
    """Translate a path glob to a regex matched against ``/``-separated paths."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] in "*?":
            out.append("[^/]*" if pattern[i] == "*" else "[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body[0] in "!^" else "[" + body + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    try:  # RE2: a glob of many * cannot backtrack on a long name
        return compile_pattern("".join(out), dot_all=True)
    except PatternError as exc:
        raise ToolFailure(f"Invalid glob pattern: {exc.message}", code="bad_pattern") from None

"""File operations on a :class:`VirtualFS`, returning dataclasses.

The bodies of the file tools, free of LangChain so providers and the notebook
UI can reuse them.  Paths go through :meth:`VirtualFS.locate`; results name
virtual paths only; rendering to text is the tool layer's job.

Limits exist because each result lands in the model's context:

* ``read_file`` stops at ``max_chars`` on a line boundary and says where to
  continue; binary files are refused with a pointer to the ``python`` tool.
* ``write_file`` refuses more than ``max_bytes`` in one call (the model should
  append in parts or generate big files with code).
* ``ls`` caps its entries and says when it did.  ``glob`` and ``grep``
  (capped the same way) are in :mod:`deerflow.sandbox.files.search`.
* No tool reads more than :data:`MAX_FILE_BYTES` of a file into the host: the
  sandboxed code can make a file of any size in no time (a sparse one costs no
  disk), and ``read_file`` hashes the whole file while ``write_file`` and
  ``str_replace`` hold it in memory.  A larger file is ``too_large``, with a
  pointer to the ``python`` and ``bash`` tools.

Every read and write goes through the mount's :class:`~deerflow.threadfs.SafeDir`
(no symbolic link followed, FIFOs and devices refused before they are opened
for reading).  Writes are atomic (a temporary file with a random name created
with ``O_EXCL`` beside the target, then renamed over it), so readers never see
half a file, and serialised per path with an advisory ``flock`` on a striped
lock file under the thread's private state directory.  ``flock`` excludes
threads and processes alike, so no process-global registry is needed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from itertools import islice
from typing import Literal

from deerflow.errors import ToolFailure
from deerflow.sandbox.files.failures import tool_failure
from deerflow.sandbox.files.read_marks import ReadMarks, content_hash, exclusive_lock
from deerflow.sandbox.files.virtual_paths import ResolvedPath, VirtualFS
from deerflow.threadfs import SafeDir, UnsafePath

DEFAULT_READ_MAX_CHARS = 50_000
DEFAULT_MAX_WRITE_BYTES = 1_000_000
LS_MAX_ENTRIES = 300
SNIFF_BYTES = 8192
MAX_FILE_BYTES = 128 * 1024 * 1024
"""The most of one file a file tool reads into the host (see the module docstring)."""
"""How much of a file is looked at for a NUL byte to call it binary (read_file, grep)."""
_LOCK_STRIPES = 64


@dataclass(frozen=True)
class Entry:
    """One item of a listing.  ``depth`` is 1 for direct children."""

    path: str
    kind: Literal["file", "dir", "symlink"]
    depth: int
    size: int | None = None


@dataclass(frozen=True)
class Listing:
    """Result of :func:`ls`."""

    path: str
    entries: tuple[Entry, ...]
    truncated: bool
    limit: int


@dataclass(frozen=True)
class FileText:
    """Result of :func:`read_file`: a window of a text file.

    ``text`` keeps line endings; lines are 1-based and inclusive (``end_line``
    is ``start_line - 1`` when nothing is shown); ``truncated`` means the
    character cap stopped the window early; ``sha256`` hashes the whole file.
    """

    path: str
    text: str
    start_line: int
    end_line: int
    total_lines: int
    truncated: bool
    sha256: str

    @property
    def next_start_line(self) -> int | None:
        """Where a follow-up read should start, if the file goes on."""
        return self.end_line + 1 if self.end_line < self.total_lines else None


@dataclass(frozen=True)
class WriteResult:
    """Result of :func:`write_file` and :func:`str_replace`."""

    path: str
    bytes_written: int
    created: bool
    appended: bool = False
    replacements: int = 0


def _write_lock(vfs: VirtualFS, rp: ResolvedPath) -> contextlib.AbstractContextManager[None]:
    # Striped: a bounded set of lock files; a collision only serialises two writes.
    stripe = int(hashlib.sha256(rp.canonical.encode()).hexdigest()[:8], 16) % _LOCK_STRIPES
    return exclusive_lock(vfs.state_dir / "locks" / f"{stripe:02d}.lock")


def ls(vfs: VirtualFS, path: str, *, max_entries: int = LS_MAX_ENTRIES) -> Listing:
    """List ``path`` two levels deep; ``/mnt/user-data`` lists the mounts; links unfollowed."""
    shown, walk = vfs.walk(path, max_depth=2)
    items = islice(walk, max_entries + 1)
    entries = tuple(
        Entry(
            i.virtual,
            "symlink" if i.is_link else "dir" if i.is_dir else "file",
            i.depth,
            None if i.is_dir or i.is_link or i.info is None else i.info.size,
        )
        for i in items
    )
    return Listing(shown, entries[:max_entries], len(entries) > max_entries, max_entries)


def read_file(
    vfs: VirtualFS,
    path: str,
    start_line: int | None = None,
    end_line: int | None = None,
    *,
    max_chars: int = DEFAULT_READ_MAX_CHARS,
    marks: ReadMarks | None = None,
) -> FileText:
    """Read lines ``start_line``..``end_line`` (1-based, inclusive) of a text file.

    The whole file is hashed on the way, and the hash recorded in ``marks``:
    even a partial read counts as having seen the file, since the model chose
    which part it needed.
    """
    _check_range(start_line, end_line)
    rp = vfs.locate(path, write=False)
    first = start_line or 1
    digest = hashlib.sha256()
    shown: list[str] = []
    used = total = 0
    last = first - 1
    truncated = False
    with _open_for_read(vfs, rp) as fh:
        if os.fstat(fh.fileno()).st_size > MAX_FILE_BYTES:
            raise _too_large(rp)
        if b"\x00" in fh.read(SNIFF_BYTES):
            raise _binary(rp)
        fh.seek(0)
        seen = 0  # a line, or the file, may grow past the bound while we read: never read past it
        while raw := fh.readline(MAX_FILE_BYTES + 1 - seen):
            seen += len(raw)
            if seen > MAX_FILE_BYTES:
                raise _too_large(rp)
            digest.update(raw)
            total += 1
            line = _decode(raw, rp)
            if total < first or (end_line is not None and total > end_line) or truncated:
                continue
            if used + len(line) > max_chars:
                truncated = True
                if shown:
                    continue
                line = line[:max_chars]  # a single huge line: show its head
            shown.append(line)
            used += len(line)
            last = total
    if total and first > total:
        raise ToolFailure(
            f"start_line {first} is past the end of {rp.virtual} ({total} lines).", code="bad_range"
        )
    if marks is not None:
        marks.record(rp.canonical, digest.hexdigest())
    return FileText(rp.virtual, "".join(shown), first, last, total, truncated, digest.hexdigest())


def _check_range(start_line: int | None, end_line: int | None) -> None:
    if start_line is not None and start_line < 1:
        raise ToolFailure("start_line is 1-based and must be >= 1.", code="bad_range")
    if end_line is not None and end_line < (start_line or 1):
        raise ToolFailure("end_line must be >= start_line.", code="bad_range")


def _decode(raw: bytes, rp: ResolvedPath) -> str:
    """UTF-8 text, or the binary-file failure (NUL bytes count as binary)."""
    try:
        if b"\x00" not in raw:
            return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    raise _binary(rp)


def _too_large(rp: ResolvedPath) -> ToolFailure:
    return ToolFailure(
        f"{rp.virtual} is larger than {MAX_FILE_BYTES:,} bytes, more than the file tools read. "
        "Inspect or change it with the python or bash tool instead (head, tail, grep, sed).",
        code="too_large",
    )


def _binary(rp: ResolvedPath) -> ToolFailure:
    return ToolFailure(
        f"{rp.virtual} is a binary file (not UTF-8 text), so read_file cannot show it. "
        f"Inspect it with the python tool instead, e.g. open({rp.virtual!r}, 'rb').",
        code="binary_file",
    )


@contextlib.contextmanager
def _open_for_read(vfs: VirtualFS, rp: ResolvedPath):
    """A binary file object for the regular file at ``rp`` (no link followed, no FIFO)."""
    try:
        with vfs.open_mount(rp.mount) as root:
            fd = root.open_file(rp.rel)
    except UnsafePath as exc:
        raise tool_failure(exc, shown=rp.virtual) from None
    with os.fdopen(fd, "rb") as fh:
        yield fh


@contextlib.contextmanager
def _as_tool_failure(rp: ResolvedPath):
    """Turn refusals of the thread's SafeDir into what the model sees."""
    try:
        yield
    except UnsafePath as exc:
        if exc.code == "not_dir":
            raise ToolFailure(
                f"Cannot create {rp.virtual}: part of its parent path is a file, not a directory.",
                code="bad_path",
            ) from None
        raise tool_failure(exc, shown=rp.virtual) from None


def _read_existing(root: SafeDir, rp: ResolvedPath) -> bytes | None:
    """The current bytes of the file at ``rp`` (``None`` when absent), at most :data:`MAX_FILE_BYTES`."""
    try:
        return root.read_bytes(rp.rel, max_bytes=MAX_FILE_BYTES)
    except UnsafePath as exc:
        if exc.code == "not_found":
            return None
        if exc.code == "too_large":
            raise _too_large(rp) from None
        raise tool_failure(exc, shown=rp.virtual) from None


# -- write --------------------------------------------------------------------


def write_file(
    vfs: VirtualFS,
    path: str,
    content: str,
    append: bool = False,
    *,
    marks: ReadMarks | None = None,
    max_bytes: int = DEFAULT_MAX_WRITE_BYTES,
) -> WriteResult:
    """Create, overwrite or append to a text file, atomically.

    With ``marks``, changing an existing file needs a current read mark.
    """
    data = content.encode("utf-8")
    if len(data) > max_bytes:
        raise ToolFailure(
            f"The content is {len(data):,} bytes; one write_file call takes at most "
            f"{max_bytes:,}. Write it in parts (the first call, then append=true for "
            "the rest), or generate the file with the python tool.",
            code="too_large",
        )
    rp = vfs.locate(path, write=True)
    with _write_lock(vfs, rp), vfs.open_mount(rp.mount, create=True) as root, _as_tool_failure(rp):
        if root.kind(rp.rel) == "dir":
            raise ToolFailure(f"{rp.virtual} is a directory; give a file path.", code="is_directory")
        existing = _read_existing(root, rp)
        exists = existing is not None
        if exists and marks is not None:
            marks.check(rp.canonical, content_hash(existing))
        body = existing + data if append and existing is not None else data
        _atomic_write(root, rp, body)
    return WriteResult(rp.virtual, len(data), created=not exists, appended=append and exists)


def str_replace(
    vfs: VirtualFS,
    path: str,
    old: str,
    new: str,
    replace_all: bool = False,
    *,
    marks: ReadMarks | None = None,
) -> WriteResult:
    """Replace the unique occurrence of ``old`` (or every one, with ``replace_all``)."""
    if not old:
        raise ToolFailure("old_str is empty; give the exact text to replace.", code="bad_args")
    rp = vfs.locate(path, write=True)
    with _write_lock(vfs, rp), vfs.open_mount(rp.mount) as root, _as_tool_failure(rp):
        raw = _read_existing(root, rp)
        if raw is None:
            raise ToolFailure(
                f"{rp.virtual} does not exist. Use ls or glob to find the right path.", code="not_found"
            )
        if marks is not None:
            marks.check(rp.canonical, content_hash(raw))
        text = _decode(raw, rp)
        count = text.count(old)
        if count == 0:
            raise ToolFailure(
                f"old_str was found 0 times in {rp.virtual}. It must match exactly, "
                "including whitespace and indentation; read the file to copy the text.",
                code="no_match",
            )
        if count > 1 and not replace_all:
            raise ToolFailure(
                f"old_str was found {count} times in {rp.virtual}; it must be unique. "
                "Include more surrounding lines, or set replace_all=true to replace all.",
                code="ambiguous_match",
            )
        data = text.replace(old, new, -1 if replace_all else 1).encode("utf-8")
        _atomic_write(root, rp, data)
    return WriteResult(rp.virtual, len(data), created=False, replacements=count)


def _atomic_write(root: SafeDir, rp: ResolvedPath, data: bytes) -> None:
    """Replace the file at ``rp`` with ``data`` (parents created), keeping its mode."""
    with _as_tool_failure(rp):
        st = root.lstat(rp.rel) if rp.rel else None
        mode = (st.st_mode & 0o777) if st is not None else 0o644
        root.write_bytes(rp.rel, data, mode=mode)

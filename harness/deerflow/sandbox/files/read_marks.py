"""Read-before-write: the agent may only change what it has seen.

A model that edits a file from memory, or from a read made before someone else
(the user, a subagent, the ``python`` tool) changed it, silently destroys work.
So every ``read_file`` leaves a *mark*: the sha256 of the file's whole content
at that moment.  Changing an existing file (overwrite, append, ``str_replace``)
requires a mark equal to the file's current hash.

* New files are free: there is nothing to lose.
* Writes do **not** refresh the mark.  After changing a file the agent reads
  it again before the next change, so its view and the file never drift apart.
* Marks persist per thread in ``{thread}/sandbox-state/read-marks.json``:
  outside ``user-data``, so no mount exposes it and the agent cannot forge it.
  It is rewritten atomically (temp file + rename) under a file lock, and keeps
  only the most recent marks.

:func:`exclusive_lock` lives here because the gate is what needs it: a check
and the write it permits must happen under one lock.  ``fs_ops`` (per-path
write locks) and ``uploads`` use the same primitive.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deerflow.errors import ToolFailure
from deerflow.persistence.files import atomic_write_text

MARKS_FILE = "read-marks.json"
MAX_MARKS = 1000


@contextlib.contextmanager
def exclusive_lock(lock_file: Path) -> Iterator[None]:
    """Hold an advisory exclusive ``flock`` on ``lock_file`` (created if needed).

    Each call opens its own file description, so two threads of one process
    exclude each other just as two processes do.
    """
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@dataclass(frozen=True)
class ReadMark:
    """What the agent saw of one file.

    Attributes:
        path: Virtual path of the file.
        sha256: Hash of the file's whole content when it was read.
        read_at: Unix time of the read.
    """

    path: str
    sha256: str
    read_at: float


def content_hash(data: bytes) -> str:
    """Hash of a file's content, as marks record it."""
    return hashlib.sha256(data).hexdigest()


class ReadMarks:
    """The persisted marks of one thread.

    Args:
        state_dir: Thread-private directory (``VirtualFS.state_dir``).
    """

    def __init__(self, state_dir: Path) -> None:
        self.file = state_dir / MARKS_FILE
        self._lock_file = state_dir / (MARKS_FILE + ".lock")

    def get(self, virtual_path: str) -> ReadMark | None:
        """The latest mark for ``virtual_path``, if any."""
        entry = self._load().get(virtual_path)
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            return None
        return ReadMark(virtual_path, entry["sha256"], float(entry.get("read_at", 0.0)))

    def record(self, virtual_path: str, sha256: str) -> None:
        """Remember that the agent has just seen ``virtual_path`` with this hash."""
        with exclusive_lock(self._lock_file):
            marks = self._load()
            marks.pop(virtual_path, None)
            marks[virtual_path] = {"sha256": sha256, "read_at": time.time()}
            while len(marks) > MAX_MARKS:
                marks.pop(next(iter(marks)))
            self._store(marks)

    def check(self, virtual_path: str, current_sha256: str) -> None:
        """Allow a change to the existing file only if the latest read is current.

        Call it under the file's write lock so nothing changes the file
        between this check and the write; ``current_sha256`` is the hash of
        the file's content as just read through the thread's SafeDir.

        Raises:
            ToolFailure: ``read_before_write`` when the file was never read
                or changed since.
        """
        mark = self.get(virtual_path)
        if mark is None:
            raise ToolFailure(
                f"{virtual_path} already exists and you have not read it. Read it first "
                "with read_file, then make your change.",
                code="read_before_write",
            )
        if mark.sha256 != current_sha256:
            raise ToolFailure(
                f"{virtual_path} has changed since you last read it (by you or someone "
                "else). Read it again with read_file, then make your change against "
                "its current content.",
                code="read_before_write",
            )

    def _load(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (json.JSONDecodeError, UnicodeDecodeError):
            # A damaged marks file only costs the agent a re-read.
            return {}
        return raw if isinstance(raw, dict) else {}

    def _store(self, marks: dict[str, Any]) -> None:
        atomic_write_text(self.file, json.dumps(marks))

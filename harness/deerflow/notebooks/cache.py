"""What a host remembers of its notebooks between runs: file signatures and an LRU of built results.

A notebook file's *signature* (device, inode, size, mtime and ctime in nanoseconds) names one
version of one file: any save changes it (a new inode from a rename, a new size or mtime), so
a cache keyed on it is never stale.  It is taken by :class:`SafeDir`'s rules, so a link, a
FIFO or nothing at the path has no signature, and nothing reached that way is cached.
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from pathlib import Path
from typing import Any

from deerflow.threadfs import SafeDir, UnsafePath

Signature = tuple[int, int, int, int, int]
"""A notebook file's identity and version: device, inode, size, mtime and ctime in nanoseconds."""


def signature_of(st: os.stat_result) -> Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_signature(root: Path | str, path: str) -> Signature | None:
    """The signature of the regular file ``path`` under ``root``, by :class:`SafeDir`'s rules (no link
    followed on the way or at the end); None for anything else (a link, a FIFO, nothing there).

    Blocking (it opens the root): call it off the event loop.
    """
    try:
        with SafeDir.open(root, label="notebook root") as opened:
            st = opened.lstat(path)
    except (UnsafePath, OSError):
        return None
    if st is None or not stat.S_ISREG(st.st_mode):
        return None
    return signature_of(st)


class ContextCache:
    """The last few results built from notebooks (contexts, digests), by a key that holds the file's
    signature: a run in the same unchanged notebook does not parse it again.  It lives on the
    host's access, on its event loop."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> Any | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: tuple[Any, ...], value: Any) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

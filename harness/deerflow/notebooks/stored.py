"""Rendered notebook cells kept on disk, so a notebook version is fully parsed at most once.

A pre-warm (or the background work after a run read a notebook cold) renders every cell of
one version of a notebook file.  :class:`DigestStore` keeps those texts under the DeerFlow
home (``$DEERFLOW_HOME/cache/notebooks``: host-only, never in a thread's folders), keyed by
the file's :data:`~deerflow.notebooks.cache.Signature` (device, inode, size, mtime and ctime in
nanoseconds) alone: it names one version of one file whatever root and path reached it (the
server's contents root, a kernel's folder, the CLI's ``$DEERFLOW_NOTEBOOK_ROOT``), and the
texts hold nothing of the path.  Any save changes the signature (ctime cannot be set back), so
an entry is never stale.  A store is consulted only for a file the caller opens for reading
under its own root by SafeDir's rules, whose descriptor has that signature
(:meth:`~deerflow.notebooks.files.FileNotebookAccess._load_stored`), so it never reveals a file
the caller could not read.  A CLI run, the embedded client in a kernel or a restarted server then
builds the context of a notebook the server opened or saved (or any process read) from a few
kB per cell instead of parsing the whole file.

Reads and writes go through :class:`~deerflow.threadfs.SafeDir` (no link followed, regular
files only, a size cap), and an entry is decoded into a strict shape whose signature must
match the one asked for: a damaged or foreign file is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import logging
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:
    from deerflow.notebooks.cache import Signature
    from deerflow.notebooks.digest import NotebookDigest

log = logging.getLogger(__name__)

VERSION = 1
MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""An entry larger than this (a notebook of very many cells) is neither written nor read."""
KEEP = 128
"""Entries kept; the oldest (by modification time) are removed past it."""


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    signature: tuple[int, int, int, int, int]
    ids: list[str]
    texts: list[str]
    magic: list[str]


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Entry)


class DigestStore:
    """Rendered notebook versions under ``folder`` (created on first write, mode 0700).

    Args:
        folder: ``$DEERFLOW_HOME/cache/notebooks``.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    @staticmethod
    def _name(signature: Signature) -> str:
        key = msgspec.json.encode([VERSION, list(signature)])
        return hashlib.sha256(key).hexdigest() + ".msgpack"

    def load(self, signature: Signature) -> NotebookDigest | None:
        """The rendered file version ``signature`` (taken under the caller's root by SafeDir's
        rules), or None (not kept, damaged, another version's).

        Blocking: call it off the event loop."""
        from deerflow.notebooks.digest import NotebookDigest

        try:
            with SafeDir.open(self.folder, label="notebook cache") as folder:
                data = folder.read_bytes(self._name(signature), max_bytes=MAX_ENTRY_BYTES)
        except (UnsafePath, OSError):
            return None
        try:
            entry = _DECODER.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if (entry.version, entry.signature) != (VERSION, tuple(signature)) \
                or len(entry.ids) != len(entry.texts) or not set(entry.magic) <= set(entry.ids):
            return None
        return NotebookDigest.from_texts(entry.ids, entry.texts, entry.magic, entry.signature)

    def save(self, path: str, digest: NotebookDigest) -> None:
        """Keep a complete digest (every cell rendered); a runtime failure is logged, not raised.

        Blocking: call it off the event loop."""
        if digest.signature is None or not digest.complete:
            return
        entry = _Entry(VERSION, digest.signature, list(digest.ids), digest.texts(),
                       list(digest.magic))
        data = _ENCODER.encode(entry)
        if len(data) > MAX_ENTRY_BYTES:
            return
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            with SafeDir.open(self.folder, label="notebook cache") as folder:
                folder.write_bytes(self._name(digest.signature), data, mode=0o600, makedirs=False)
                self._prune(folder)
        except (UnsafePath, OSError):
            log.warning("keeping the rendered notebook %r failed", path, exc_info=True)

    @staticmethod
    def _prune(folder: SafeDir) -> None:
        entries = [e for e in folder.scandir() if e.kind == "file" and e.name.endswith(".msgpack")]
        if len(entries) <= KEEP:
            return
        dated = []
        for entry in entries:
            st = folder.lstat(entry.name)
            if st is not None and stat.S_ISREG(st.st_mode):
                dated.append((st.st_mtime_ns, entry.name))
        for _, name in sorted(dated)[: len(dated) - KEEP]:
            folder.unlink(name)

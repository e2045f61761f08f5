"""Which threads' uploads changed since they were last listed, told by the kernel (inotify).

The uploads middleware compares a thread's uploads with what the agent was last told before every
model call.  Listing the folder is blocking I/O, so each look was a hop to a worker thread: on a
fast step the largest single piece of DeerFlow's own per-step work (``bench/harness_overhead.py``).
Yet the folder rarely changes during a run.  :class:`UploadWatch` keeps each listed thread's last
listing and an inotify watch on the folder it listed; while no event arrived for that folder, the
listing still stands and the next look costs one non-blocking read of the inotify queue on the
loop, no hop and no I/O on the disk.

What keeps it exact:

* the watch is added on the *opened* folder (``/proc/self/fd/N`` of the descriptor
  :func:`~deerflow.sandbox.files.uploads.list_uploads` holds, never a path below the thread's
  root), and *before* the folder is read: a change after the read raises an event, one before it
  is in the listing;
* each watched folder has a generation, raised by every event for it; a listing counts only while
  the generation is the one read when its watch was added, so an event drained while the listing
  was being made still voids it;
* any event voids (a file written, touched, renamed, created or removed; the folder itself moved or
  deleted); a queue overflow voids every listing; a thread beyond :data:`WATCH_LIMIT` watched ones
  loses its watch (least recently listed first) and is listed again next time;
* without inotify (another OS, no instances left) nothing is kept and every look lists, as before.

Writers in other processes (``client.upload`` of an embedded client, ``%deerflow upload``) raise
the same events: inotify reports changes to the folder, whoever made them on this machine.  A
writer on another machine does not, so a folder on a network filesystem (NFS, SMB, FUSE: anything
but the local filesystems named in :data:`_LOCAL_FILESYSTEMS`) is never watched: it is listed at
every look, as before.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.files.uploads import UploadInfo, list_uploads
from deerflow.threadfs import SafeDir

logger = logging.getLogger(__name__)

WATCH_LIMIT = 256
"""Threads whose uploads folder is watched at once (inotify watches are a per-user kernel budget)."""

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_Q_OVERFLOW, _IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
_IN_ONLYDIR = 0x01000000
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
         | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR)
_LOCAL_FILESYSTEMS = frozenset({
    0xEF53,  # ext2/3/4
    0x58465342,  # xfs
    0x9123683E,  # btrfs
    0x01021994,  # tmpfs
    0x858458F6,  # ramfs
    0x794C7630,  # overlayfs
    0x2FC12FC1,  # zfs
    0xF2F52010,  # f2fs
    0xCA451A4E,  # bcachefs
})
"""``statfs`` types whose every change this kernel sees.  On others (NFS, SMB, FUSE, Ceph...) a
writer on another machine raises no inotify event here, so their listings are never kept."""
_MAX_READS = 8  # of 64 KiB each per look; a queue still not empty after that voids every listing
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then len bytes of name)


@dataclass
class _Watched:
    wd: int
    generation: int
    listing: tuple[UploadInfo, ...] | None = None


class UploadWatch:
    """Thread uploads listings kept while inotify reports no change (see the module docstring).

    Thread-safe: :meth:`unchanged` runs on the event loop, :meth:`list` in worker threads.
    """

    def __init__(self, *, limit: int = WATCH_LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._watched: OrderedDict[Path, _Watched] = OrderedDict()
        self._roots: dict[int, Path] = {}  # wd -> the thread root it was added for
        self._libc: ctypes.CDLL | None = None
        self._fd = -1
        self._started = False

    def unchanged(self, root: Path) -> list[UploadInfo] | None:
        """The thread's last listing if nothing in its uploads folder changed since, else None.

        Never blocks: reads what the kernel queued (non-blocking) and looks up memory.
        """
        with self._lock:
            self._drain()
            entry = self._watched.get(root)
            return list(entry.listing) if entry is not None and entry.listing is not None else None

    def list(self, paths: ThreadPaths) -> list[UploadInfo]:
        """List the thread's uploads (blocking), watching the folder first so the listing is kept
        until something in it changes."""
        root = paths.root
        seen: list[int] = []

        def watch(uploads: SafeDir) -> None:
            generation = self._watch(root, uploads.fd)
            if generation is not None:
                seen.append(generation)

        files = list_uploads(paths, on_open=watch)
        if seen:
            with self._lock:
                entry = self._watched.get(root)
                if entry is not None and entry.generation == seen[0]:
                    entry.listing = tuple(files)
        return files

    def close(self) -> None:
        """Drop every watch and the inotify instance."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
            self._fd = -1
            self._watched.clear()
            self._roots.clear()

    # -- internals (under the lock, except _watch which takes it) ---------------------------

    def _watch(self, root: Path, dir_fd: int) -> int | None:
        """Watch the folder open at ``dir_fd`` for ``root``; the generation a listing must keep."""
        with self._lock:
            if not self._start() or not self._local(dir_fd):
                self._forget(root)
                return None
            assert self._libc is not None
            wd = self._libc.inotify_add_watch(self._fd, f"/proc/self/fd/{dir_fd}".encode(), _MASK)
            if wd < 0:
                self._forget(root)
                logger.debug("uploads not watched: %s", os.strerror(ctypes.get_errno()))
                return None
            other = self._roots.get(wd)
            if other is not None and other != root:  # the same folder now stands for another thread
                self._watched.pop(other, None)
            entry = self._watched.get(root)
            if entry is not None and entry.wd != wd:
                self._release(root, entry.wd)
                entry = None
            if entry is None:
                entry = self._watched[root] = _Watched(wd, 0)
            entry.listing = None
            self._roots[wd] = root
            self._watched.move_to_end(root)
            while len(self._watched) > self.limit:
                oldest, old = self._watched.popitem(last=False)
                self._release(oldest, old.wd)
            return entry.generation

    def _start(self) -> bool:
        if not self._started:
            self._started = True
            try:
                self._libc = ctypes.CDLL(None, use_errno=True)
                fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            except (OSError, AttributeError):  # not Linux
                return False
            if fd < 0:
                logger.info("uploads are listed before every model call: no inotify instance (%s)",
                            os.strerror(ctypes.get_errno()))
                return False
            self._fd = fd
        return self._fd >= 0

    def _local(self, dir_fd: int) -> bool:
        """Whether the folder open at ``dir_fd`` is on a filesystem only this kernel writes."""
        assert self._libc is not None
        buf = ctypes.create_string_buffer(256)  # struct statfs (120 bytes on 64-bit Linux)
        if self._libc.fstatfs(dir_fd, buf) != 0:
            return False
        (fs_type,) = struct.unpack_from("l", buf.raw)
        return (fs_type & 0xFFFFFFFF) in _LOCAL_FILESYSTEMS

    def _drain(self) -> None:
        """Apply what the kernel queued; a queue that will not empty voids every listing instead."""
        for _ in range(_MAX_READS):
            if self._fd < 0:
                return
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return
            except InterruptedError:
                continue
            self._apply(data)
        self._void_all()

    def _void_all(self) -> None:
        for entry in self._watched.values():
            entry.generation += 1
            entry.listing = None

    def _apply(self, data: bytes) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            offset += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                self._void_all()
                continue
            root = self._roots.get(wd)
            if root is None or (entry := self._watched.get(root)) is None or entry.wd != wd:
                continue
            entry.generation += 1
            entry.listing = None
            if mask & _IN_IGNORED:  # the folder was deleted (or the watch removed): watch again next time
                del self._roots[wd]
                del self._watched[root]

    def _release(self, root: Path, wd: int) -> None:
        if self._roots.get(wd) == root:
            del self._roots[wd]
            if self._libc is not None and self._fd >= 0:
                self._libc.inotify_rm_watch(self._fd, wd)

    def _forget(self, root: Path) -> None:
        entry = self._watched.pop(root, None)
        if entry is not None:
            self._release(root, entry.wd)


UPLOAD_WATCH = UploadWatch()
"""The process's watch (one inotify instance for every thread it runs)."""


__all__ = ["UPLOAD_WATCH", "WATCH_LIMIT", "UploadWatch"]

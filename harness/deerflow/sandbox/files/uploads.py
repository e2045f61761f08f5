"""User uploads: files the user gives a thread, saved where the agent can read them.

Uploads land in ``ThreadPaths.uploads`` and appear to the agent, read-only, at
``/mnt/user-data/uploads/{name}``.  The host side (the Jupyter handler, the CLI)
calls :func:`save_upload`; it is the only writer of that directory.

Saving is defensive because the name and the bytes come from outside:

* the name must be one plain file name (no separators, no ``.``/``..``, no
  NUL or control characters, no leading dot: hidden names are reserved for
  in-flight temp files);
* the uploads directory is opened through :class:`~deerflow.threadfs.SafeDir`
  (no link followed below the thread's root) and every step works on that
  descriptor, so nothing can redirect a save after it was checked;
* an existing destination that is a symlink or a hard-linked file is refused,
  and the final rename replaces a directory entry, never writing through one,
  so an upload can never reach a file elsewhere on the host;
* the data streams into a temp file in the uploads directory and is renamed
  over the destination only when complete and within ``max_bytes``.  An
  oversized or failed upload leaves no partial file and never truncates an
  existing one;
* the number of files is capped (replacing a file of the same name does not
  count as a new one).  Saves of one thread are serialised by a file lock, so
  concurrent uploads cannot both slip under the cap.
"""

from __future__ import annotations

import contextlib
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.files.read_marks import exclusive_lock
from deerflow.sandbox.files.virtual_paths import UPLOADS, state_dir
from deerflow.threadfs import EntryInfo, SafeDir, UnsafePath

DEFAULT_MAX_UPLOAD_BYTES = 100 * 1024 * 1024  # same defaults as UploadsConfig
DEFAULT_MAX_UPLOAD_FILES = 200
LISTING_MAX_ENTRIES = 10_000
"""Entries a listing reads at most (well above any sensible ``max_files``, far below what blocks)."""
MAX_NAME_BYTES = 255
_CHUNK = 1 << 16


class UploadError(ValueError):
    """An upload that cannot be accepted; the message is fit to show the user."""


@dataclass(frozen=True)
class UploadInfo:
    """One uploaded file.

    Attributes:
        name: File name inside the uploads directory.
        virtual_path: Where the agent sees it.
        size: Size in bytes.
        mtime: Last modification, Unix time.
    """

    name: str
    virtual_path: str
    size: int
    mtime: float


def validate_name(name: str) -> str:
    """Return ``name`` if it is usable as one upload file name.

    Raises:
        UploadError: explaining what is wrong with it.
    """
    if not isinstance(name, str) or not name.strip():
        raise UploadError("The file name is empty.")
    if name in (".", ".."):
        raise UploadError(f"{name!r} is not a file name.")
    if "/" in name or "\\" in name:
        raise UploadError(f"{name!r} contains a path separator; give a plain file name.")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise UploadError(f"{name!r} contains a NUL or control character.")
    if name.startswith("."):
        raise UploadError(f"{name!r} starts with a dot; hidden file names are not accepted.")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise UploadError(f"The file name is longer than {MAX_NAME_BYTES} bytes.")
    return name


def save_upload(
    paths: ThreadPaths,
    name: str,
    data: bytes | IO[bytes] | Path,
    *,
    max_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
    max_files: int = DEFAULT_MAX_UPLOAD_FILES,
) -> UploadInfo:
    """Store ``data`` as ``uploads/{name}``, replacing a same-name upload atomically.

    Args:
        paths: The thread receiving the file.
        name: The file name (validated; see :func:`validate_name`).
        data: The content: bytes, a binary stream read to its end, or a host file.
        max_bytes: Largest accepted size.
        max_files: Most files the uploads directory may hold.

    Raises:
        UploadError: bad name, unsafe destination, too large, too many files.
    """
    validate_name(name)
    with exclusive_lock(state_dir(paths) / "uploads.lock"), _open_uploads(paths, create=True) as uploads:
        replacing = _check_destination(uploads, name)
        if not replacing and len(_upload_files(uploads)) >= max_files:
            raise UploadError(
                f"This thread already has {max_files} uploaded files, the "
                "maximum; remove some before uploading more."
            )
        tmp = uploads.write_temp(name, _within(_chunks(data), max_bytes))
        try:
            _check_destination(uploads, name)  # re-check: it may have changed while streaming
            uploads.rename(tmp, name)
        except BaseException:
            with contextlib.suppress(OSError):
                uploads.unlink(tmp)
            raise
        return _info(uploads, name)


def list_uploads(paths: ThreadPaths, *, on_open: Callable[[SafeDir], object] | None = None) -> list[UploadInfo]:
    """The thread's uploaded files, by name (temp files and links are not listed; nothing when the
    uploads directory is missing or not a plain directory).

    Blocking (call it off the event loop) and bounded: at most
    :data:`LISTING_MAX_ENTRIES` entries are read, whatever was put in the directory.
    ``on_open`` is handed the opened directory before it is read (to watch it: :mod:`.upload_watch`).
    """
    try:
        with _open_uploads(paths) as uploads:
            if on_open is not None:
                on_open(uploads)
            found = ((e.name, uploads.lstat(e.name)) for e in _upload_files(uploads, limit=LISTING_MAX_ENTRIES))
            return [UploadInfo(name, f"{UPLOADS}/{name}", st.st_size, st.st_mtime) for name, st in found
                    if st is not None]  # None: removed while listed
    except UnsafePath:
        return []


def _open_uploads(paths: ThreadPaths, *, create: bool = False) -> SafeDir:
    """The uploads directory, opened below the thread's root without following a link.

    Raises:
        UnsafePath: when not creating, and it is missing or not a plain directory.
        UploadError: when creating, and it is not a plain directory.
    """
    rel = paths.uploads.relative_to(paths.root).as_posix()
    if not create:
        return SafeDir.open_below(paths.root, rel, label=str(UPLOADS))
    try:  # the thread's root is the host's own layout; below it, SafeDir creates and refuses links
        with SafeDir.open(paths.root, create=True) as root:
            return root.subdir(rel, create=True, label=str(UPLOADS))
    except UnsafePath:
        raise UploadError(
            "The thread's uploads directory is not a plain directory; refusing to write into it."
        ) from None


def _check_destination(uploads: SafeDir, name: str) -> bool:
    """Whether ``name`` exists as a file that may be replaced; refuse unsafe ones."""
    st = uploads.lstat(name)
    if st is None:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise UploadError(f"{name!r} exists as a symbolic link; refusing to replace it.")
    if not stat.S_ISREG(st.st_mode):
        raise UploadError(f"{name!r} exists and is not a regular file.")
    if st.st_nlink > 1:
        raise UploadError(f"{name!r} exists as a hard-linked file; refusing to replace it.")
    return True


def _within(chunks: Iterator[bytes], max_bytes: int) -> Iterator[bytes]:
    """``chunks``, refused with an :class:`UploadError` as soon as they pass ``max_bytes``."""
    written = 0
    for chunk in chunks:
        written += len(chunk)
        if written > max_bytes:
            raise UploadError(f"The file is larger than the upload limit of {max_bytes:,} bytes.")
        yield chunk


def _chunks(data: bytes | IO[bytes] | Path) -> Iterator[bytes]:
    if isinstance(data, bytes | bytearray | memoryview):
        view = memoryview(data)
        for start in range(0, len(view), _CHUNK):
            yield bytes(view[start : start + _CHUNK])
        return
    if isinstance(data, Path):
        with open(data, "rb") as fh:
            yield from iter(lambda: fh.read(_CHUNK), b"")
        return
    yield from iter(lambda: data.read(_CHUNK), b"")


def _upload_files(uploads: SafeDir, *, limit: int | None = None) -> list[EntryInfo]:
    """The regular files in ``uploads``, by name (links, directories and hidden temp files left out)."""
    return [e for e in uploads.scandir(limit=limit) if e.kind == "file" and not e.name.startswith(".")]


def _info(uploads: SafeDir, name: str) -> UploadInfo:
    st = uploads.lstat(name)
    if st is None:
        raise UploadError(f"{name!r} disappeared while it was being saved.")
    return UploadInfo(name, f"{UPLOADS}/{name}", st.st_size, st.st_mtime)

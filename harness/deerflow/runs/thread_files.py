"""A thread's files as the hosts see them: uploads in, artifacts out (:attr:`RunManager.files`).

The embedded client, the HTTP routes and the chat used to open a thread's folders each
their own way.  This is the one place they meet, so every host gets the same rules:

* **The thread is the caller's**: every call first looks the thread up for the user
  (:class:`~deerflow.errors.NotFoundError` for an unknown thread or someone else's).
* **Artifacts are read through the safe file layer**: :meth:`VirtualFS.read_output
  <deerflow.sandbox.files.virtual_paths.VirtualFS.read_output>` opens a regular file under
  ``outputs/`` with :class:`~deerflow.threadfs.SafeDir` (no link followed at any step, the
  file checked on the descriptor it reads).  Everything in the thread's folders is the
  agent's, so anything else — a link planted by the agent, a FIFO, a path outside outputs —
  is :class:`ArtifactNotFound`, never a model-facing ``ToolFailure``.  A read into memory is
  bounded (:data:`ARTIFACT_MAX_BYTES`); a download of any size is streamed from a descriptor
  held open (:meth:`ThreadFiles.open_artifact`), so a swap after the check changes nothing sent.
* **Uploads have the configured limits** (``uploads.max_file_bytes``, ``uploads.max_files``,
  read at each call so an edited config applies) and are streamed to a temporary file in
  the uploads folder, opened through ``SafeDir`` (no link followed below the thread's root),
  then renamed into place on that descriptor (:func:`~deerflow.sandbox.files.uploads.save_upload`);
  a refusal is :class:`UploadRejected`.
* **Exports hold only regular files** (:meth:`ThreadFiles.export`): the folders are walked from the
  thread's root through ``SafeDir`` (no link followed at any step; a folder swapped for a link
  is skipped), each file opened non-blocking and checked on its descriptor, so a link, FIFO,
  socket or hard link planted in the thread is listed as skipped, never followed nor waited on.
  The archive is written to the caller's stream: no temporary file with a name in the thread.
* **No blocking I/O on the caller's event loop, and a deadline**: the async methods run the file
  work with :func:`~deerflow.persistence.offloop.off_loop` (its own threads; past the deadline,
  :class:`~deerflow.persistence.offloop.DiskUnavailable`, an HTTP 503 "try again shortly").  An
  export may take longer (:data:`EXPORT_DEADLINE_SECONDS`); a streamed artifact has a deadline
  per chunk.  A descriptor opened by a call its caller gave up on is closed (:func:`open_off_loop`).

Errors are user errors (:class:`~deerflow.errors.UserError` kinds); the HTTP layer maps them to
statuses in its one table (``deerflow_jupyter.handlers.base.error_response``).
"""

from __future__ import annotations

import mimetypes
import os
import threading
import time
import zipfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, Protocol, TypeVar

from deerflow.config.paths import HomePaths
from deerflow.config.schema import UploadsConfig
from deerflow.errors import NotFoundError, ToolFailure, UserError
from deerflow.persistence.offloop import off_loop
from deerflow.sandbox.files.uploads import UploadError, UploadInfo, list_uploads, save_upload
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.threadfs import MAX_WALK_DEPTH, SafeDir, UnsafePath

ExportFolder = Literal["outputs", "workspace", "uploads"]
"""A thread folder an export may hold (under ``/mnt/user-data``)."""
EXPORT_MAX_BYTES = 512 * 1024 * 1024
"""Default bound on the files' total size in one export (before compression)."""
EXPORT_DEADLINE_SECONDS = 300.0
"""How long an export may take (walking, reading and compressing up to :data:`EXPORT_MAX_BYTES`)
before the caller gets "try again shortly"; every other call has off_loop's default deadline."""
_COPY_CHUNK = 1 << 20

_Opened = TypeVar("_Opened")


class ArtifactNotFound(NotFoundError):
    """Not a readable output file of the thread (missing, a directory, a link, outside outputs)."""

    code = "not_found"


class ArtifactTooLarge(UserError):
    """An output file larger than the read's bound (HTTP 413): everything in outputs is the
    agent's, so a huge (or still growing) file must not be read whole into the server's memory."""

    code = "too_large"


ARTIFACT_MAX_BYTES = 64 * 1024 * 1024
"""The default bound of :meth:`ThreadFiles.read_artifact`: every read is bounded."""


class UploadRejected(UserError):
    """An upload the thread cannot take (bad name, too large, too many files, unsafe destination).

    Attributes:
        name: The file name as given.
        reason: Why, one line fit to show the user.
    """

    code = "upload_rejected"

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"upload {name!r} rejected: {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class Artifact:
    """A file the agent presented (``present_files``), as listed to users.

    Attributes:
        path: Its virtual path (``/mnt/user-data/outputs/...``), as the agent presented it.
        name: The last part of the path.
        mime_type: Guessed from the name; None when unknown.
        size: Bytes; None when it is gone or not a regular file any more.
    """

    path: str
    name: str
    mime_type: str | None
    size: int | None


@dataclass(frozen=True)
class ArtifactFile:
    """An artifact's content.

    Attributes:
        path: The virtual path that was read.
        name: The file's own name (what a download should be called).
        data: Its bytes.
    """

    path: str
    name: str
    data: bytes


@dataclass
class ArtifactReader:
    """An artifact held open for streaming (:meth:`ThreadFiles.open_artifact`): its size as it
    was when opened, and chunks read from the descriptor (never again by path, so a swap of the
    file or its folder after the open changes nothing sent).  Close it, or use it as a context
    manager.

    Attributes:
        path: The virtual path that was opened.
        name: The file's own name (what a download should be called).
        size: Its size when opened: what a download promises, and the most :meth:`chunks` yields.
    """

    path: str
    name: str
    size: int
    _fd: int

    async def chunks(self, chunk: int = _COPY_CHUNK) -> AsyncIterator[bytes]:
        """The file's bytes up to :attr:`size`, read off the event loop; ends short (the caller
        sees fewer bytes than promised) if the file shrank meanwhile."""
        offset = 0
        while offset < self.size:
            data = await off_loop(os.pread, self._fd, min(chunk, self.size - offset), offset,
                                  what="reading the artifact")
            if not data:
                return
            offset += len(data)
            yield data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ArtifactReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def open_off_loop(opener: Callable[[], _Opened], close: Callable[[_Opened], object], *,
                        what: str) -> _Opened:
    """``opener()`` with :func:`off_loop`'s deadline, for a call that opens something the caller must close.

    A call past its deadline (or whose caller went away) is abandoned, but still opens its
    descriptor when it ends: the caller is gone, so ``close`` closes it then.  The hand-over is
    under a lock, so an opening is either the caller's or closed here, never neither.

    Raises:
        DiskUnavailable: the deadline passed, or too many earlier calls are stuck.
    """
    lock = threading.Lock()
    opened: list[_Opened] = []  # what the call opened, until the caller takes it or gives up
    gone = False

    def open_it() -> _Opened:
        result = opener()
        with lock:
            if gone:
                close(result)
            else:
                opened.append(result)
        return result

    try:
        return await off_loop(open_it, what=what)
    except BaseException:  # the deadline, the caller cancelled, or the opener's own error (nothing opened)
        with lock:
            gone = True
            left = list(opened)
        for result in left:
            close(result)
        raise


class ExportTooLarge(UserError):
    """The files to export add up to more than the export's bound."""

    code = "export_too_large"


@dataclass
class ThreadExport:
    """What :meth:`ThreadFiles.export` wrote.

    Attributes:
        files: Archive names written (``outputs/report.md``…), in order.
        skipped: Entries left out, each ``"name: why"`` (a link, a FIFO, a hard link, unreadable).
        size: The files' total size in bytes, before compression.
    """

    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    size: int = 0


class ThreadLookup(Protocol):
    """What :class:`ThreadFiles` needs of the run manager: the caller's thread and its state."""

    async def athread(self, thread_id: str, user_id: str) -> Any: ...

    async def thread_values(self, thread_id: str, user_id: str) -> dict[str, Any]: ...


class ThreadFiles:
    """Thread-file operations for hosts; one per run manager (see the module docstring)."""

    def __init__(self, home: HomePaths, threads: ThreadLookup, limits: Callable[[], UploadsConfig]) -> None:
        self._home = home
        self._threads = threads
        self._limits = limits

    async def list_uploads(self, user_id: str, thread_id: str) -> list[UploadInfo]:
        """The thread's uploaded files, by name."""
        await self._threads.athread(thread_id, user_id)
        return await off_loop(list_uploads, self._home.thread(user_id, thread_id), what="listing the uploads")

    async def upload(self, user_id: str, thread_id: str, name: str, data: bytes | IO[bytes] | Path) -> UploadInfo:
        """Store ``data`` (bytes, a binary stream, or a host file the caller vouches for) as
        ``uploads/{name}``, replacing a same-name upload.

        Raises:
            NotFoundError: no such thread for this user.
            UploadRejected: a bad name, over a limit, or an unsafe destination.
        """
        return (await self.upload_all(user_id, thread_id, [(name, data)]))[0]

    async def upload_all(self, user_id: str, thread_id: str,
                         files: list[tuple[str, bytes | IO[bytes] | Path]]) -> list[UploadInfo]:
        """:meth:`upload` for several files with one thread lookup; on a refusal the files
        before it stay saved.

        Raises:
            NotFoundError: no such thread for this user.
            UploadRejected: the first file refused (a bad name, over a limit, an unsafe destination).
        """
        await self._threads.athread(thread_id, user_id)
        limits = self._limits()
        paths = self._home.thread(user_id, thread_id)

        def save(name: str, data: bytes | IO[bytes] | Path) -> UploadInfo:
            try:
                return save_upload(paths, name, data, max_bytes=limits.max_file_bytes,
                                   max_files=limits.max_files)
            except UploadError as exc:
                raise UploadRejected(name, str(exc)) from None

        return [await off_loop(save, name, data, what=f"saving the upload {name!r}") for name, data in files]

    async def artifacts(self, user_id: str, thread_id: str) -> list[Artifact]:
        """The files the agent presented on the thread, with their current sizes.

        The paths come from the agent's state: one odd entry yields ``size=None``, it never
        fails the listing.
        """
        values = await self._threads.thread_values(thread_id, user_id)
        paths = [p for p in values.get("artifacts", []) if isinstance(p, str)]
        vfs = VirtualFS(self._home.thread(user_id, thread_id))
        sizes = await off_loop(_sizes, vfs, paths, what="listing the artifacts")
        return [Artifact(path, path.rsplit("/", 1)[-1], mimetypes.guess_type(path)[0], size)
                for path, size in zip(paths, sizes, strict=True)]

    async def read_artifact(self, user_id: str, thread_id: str, path: str, *,
                            max_bytes: int = ARTIFACT_MAX_BYTES) -> ArtifactFile:
        """The bytes of a regular file under the thread's outputs (a virtual path, or a path
        relative to outputs), at most ``max_bytes`` of them.

        Raises:
            NotFoundError: no such thread for this user.
            ArtifactNotFound: not a readable output file (the reason is in the message).
            ArtifactTooLarge: larger than ``max_bytes`` (or grew past it while read).
        """
        await self._threads.athread(thread_id, user_id)
        return await off_loop(self.read_artifact_blocking, user_id, thread_id, path, max_bytes=max_bytes,
                              what="reading the artifact")

    async def open_artifact(self, user_id: str, thread_id: str, path: str) -> ArtifactReader:
        """An output file held open for streaming, whatever its size (a download of a large
        deliverable): found and checked as :meth:`read_artifact` does, but never read whole.

        Raises:
            NotFoundError: no such thread for this user.
            ArtifactNotFound: not a readable output file (the reason is in the message).
        """
        await self._threads.athread(thread_id, user_id)
        vfs = VirtualFS(self._home.thread(user_id, thread_id))

        def open_it() -> ArtifactReader:
            try:
                located, fd = vfs.open_output(path)
            except ToolFailure as exc:
                raise ArtifactNotFound(exc.message) from None
            return ArtifactReader(located.virtual, located.host.name, os.fstat(fd).st_size, fd)

        return await open_off_loop(open_it, ArtifactReader.close, what="opening the artifact")

    def read_artifact_blocking(self, user_id: str, thread_id: str, path: str, *,
                               max_bytes: int = ARTIFACT_MAX_BYTES) -> ArtifactFile:
        """:meth:`read_artifact` without the thread lookup, in the calling thread: for callers that
        already hold the thread (a run they are rendering) and run off the event loop."""
        vfs = VirtualFS(self._home.thread(user_id, thread_id))
        try:
            located, data = vfs.read_output(path, max_bytes=max_bytes)
        except ToolFailure as exc:
            if exc.code == "too_large":
                raise ArtifactTooLarge(exc.message) from None
            raise ArtifactNotFound(exc.message) from None
        return ArtifactFile(located.virtual, located.host.name, data)


    async def export(self, user_id: str, thread_id: str, out: IO[bytes], *,
                     folders: Sequence[ExportFolder] = ("outputs",),
                     max_bytes: int = EXPORT_MAX_BYTES) -> ThreadExport:
        """Write a zip of the thread's ``folders`` (their regular files, as ``outputs/...``) to ``out``.

        ``out`` is the caller's writable binary stream (a file the user named, a spooled buffer
        for a download). Anything that is not a regular file is skipped and listed, never followed.

        Raises:
            NotFoundError: no such thread for this user.
            UserError: a folder that is not one of ``outputs``, ``workspace``, ``uploads``.
            ExportTooLarge: the files add up to more than ``max_bytes`` (``out`` then holds a partial archive).
        """
        chosen = export_folders(folders)
        await self._threads.athread(thread_id, user_id)
        root = self._home.thread(user_id, thread_id).root
        return await off_loop(write_export, root, chosen, out, max_bytes, what="exporting the thread",
                              deadline=EXPORT_DEADLINE_SECONDS)


def export_folders(folders: Sequence[str]) -> list[str]:
    """``folders`` checked and without repeats, for a caller to refuse a bad one before it opens a file.

    Raises:
        UserError: a folder that is not one of ``outputs``, ``workspace``, ``uploads``.
    """
    unknown = sorted(set(folders) - {"outputs", "workspace", "uploads"})
    if unknown:
        raise UserError(f"cannot export {unknown[0]!r}: choose from outputs, workspace, uploads")
    if not folders:
        raise UserError("nothing to export: choose from outputs, workspace, uploads")
    return list(dict.fromkeys(folders))


def write_export(root: Path, folders: Sequence[str], out: IO[bytes], max_bytes: int) -> ThreadExport:
    """:meth:`ThreadFiles.export`'s blocking part: ``root`` is the thread's folder (the host's own
    path); everything below it is the agent's, so it is only reached through :class:`SafeDir`."""
    done = ThreadExport()
    try:
        thread = SafeDir.open(root)
    except UnsafePath:  # no folder yet (a thread recorded by another process): an empty archive
        thread = None
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        if thread is None:
            return done
        with thread:
            _add_folders(thread, folders, archive, done, max_bytes)
    return done


def _add_folders(thread: SafeDir, folders: Sequence[str], archive: zipfile.ZipFile, done: ThreadExport,
                 max_bytes: int) -> None:
    """Each folder's regular files into ``archive``, walked without following anything."""
    for folder in folders:
        try:
            tree = thread.subdir(f"user-data/{folder}", label=folder)
        except UnsafePath as exc:
            if exc.code != "not_found":  # a folder swapped for a link: skipped like any entry
                done.skipped.append(f"{folder}: {exc.message}")
            continue
        def too_deep(rel: str, folder: str = folder) -> None:
            done.skipped.append(f"{folder}/{rel}/: more than {MAX_WALK_DEPTH} folders deep; not exported")

        with tree:
            for rel, entry in tree.walk(on_too_deep=too_deep):
                if entry.kind != "dir":
                    _add_file(tree, rel, f"{folder}/{rel}", entry.mtime_ns, archive, done, max_bytes)


def _add_file(tree: SafeDir, rel: str, name: str, mtime_ns: int, archive: zipfile.ZipFile,
              done: ThreadExport, max_bytes: int) -> None:
    """Copy one regular file into ``archive``; anything else (checked on the descriptor) is skipped."""
    try:
        fd = tree.open_file(rel)  # non-blocking open: a FIFO is refused, never waited on
    except UnsafePath as exc:
        done.skipped.append(f"{name}: {exc.message}")
        return
    with os.fdopen(fd, "rb") as src:
        if done.size + os.fstat(fd).st_size > max_bytes:
            raise ExportTooLarge(f"the export is larger than {max_bytes} bytes; export fewer folders")
        stamp = time.gmtime(max(mtime_ns // 1_000_000_000, 315_532_800))[:6]  # zip dates start in 1980
        info = zipfile.ZipInfo(name, date_time=stamp)
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w") as dst:
            while chunk := src.read(_COPY_CHUNK):
                done.size += len(chunk)
                if done.size > max_bytes:  # it grew while we read
                    raise ExportTooLarge(f"the export is larger than {max_bytes} bytes; export fewer folders")
                dst.write(chunk)
    done.files.append(name)


def _sizes(vfs: VirtualFS, paths: list[str]) -> list[int | None]:
    """Each path's size, None where it is gone, not a regular file, or not resolvable."""
    sizes: list[int | None] = []
    for path in paths:
        try:
            sizes.append(vfs.size(path))
        except ToolFailure:
            sizes.append(None)
    return sizes


__all__ = ["ARTIFACT_MAX_BYTES", "EXPORT_DEADLINE_SECONDS", "EXPORT_MAX_BYTES", "Artifact", "ArtifactFile", "ArtifactNotFound", "ArtifactReader", "ArtifactTooLarge",
           "ExportFolder", "ExportTooLarge", "ThreadExport", "ThreadFiles", "ThreadLookup", "UploadRejected",
           "export_folders", "open_off_loop", "write_export"]

"""Notebooks under a folder on this machine, when no Jupyter server runs (the CLI, an in-process
kernel): :class:`FileNotebookAccess`.

Every file under the root is reached through :class:`~deerflow.threadfs.SafeDir` (no link
followed, nothing that is not a regular file read or written), so nothing planted under the
root redirects a read or a write; a file-backed ContentsManager's files go through it too
(:class:`~deerflow.notebooks.contents.ContentsNotebookAccess`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.notebooks.access import (
    ROOT_ENV,
    NotebookAccess,
    NotebookError,
    NotebookFile,
    check_root_path,
    ensure_cell_ids,
)
from deerflow.notebooks.cache import Signature, file_signature, signature_of
from deerflow.notebooks.offdisk import off_disk
from deerflow.notebooks.parsing import parse_v4
from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:  # nbformat imports jsonschema, which compiles a grammar: loaded on first read or write
    from nbformat import NotebookNode

    from deerflow.notebooks.digest import NotebookContext, NotebookDigest
    from deerflow.notebooks.stored import DigestStore

_LISTED = 12


class FileNotebookAccess(NotebookAccess):
    """Notebooks under ``root`` on this machine (no Jupyter server)."""

    live_note = "saved to the file: reload the notebook if it is open"

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> FileNotebookAccess:
        """``$DEERFLOW_NOTEBOOK_ROOT``, else the current directory (Jupyter's own default root)."""
        env = dict(os.environ) if env is None else env
        return cls(env.get(ROOT_ENV) or os.getcwd())

    async def read(self, path: str) -> NotebookFile:
        return await off_disk(self._read, path, what=f"reading the notebook {path!r}", large=True)

    async def signature(self, path: str) -> Signature | None:
        return await off_disk(file_signature, self.root, path, what=f"checking the notebook {path!r}")

    def _load_stored(self, store: DigestStore, path: str, signature: Signature) -> NotebookDigest | None:
        """The stored version, if the file opens for reading here (no link followed) and is still
        that version: a file made unreadable to this process is not served from the store."""
        try:
            with self._open_root() as root:
                fd = root.open_file(path)
                try:
                    if signature_of(os.fstat(fd)) != signature:
                        return None
                finally:
                    os.close(fd)
        except (NotebookError, OSError):
            return None
        return store.load(signature)

    def _read_bytes(self, path: str) -> tuple[bytes, os.stat_result]:
        """The file's bytes and its stat, both from one descriptor opened without following links."""
        with self._open_root() as root:
            try:
                fd = root.open_file(path)
            except UnsafePath as exc:
                raise self._refused(root, path, exc) from None
            try:
                st = os.fstat(fd)
                with os.fdopen(fd, "rb", closefd=False) as handle:
                    return handle.read(), st
            except OSError as exc:
                raise NotebookError(f"{path!r} is not a readable notebook ({type(exc).__name__})",
                                    code="not_a_notebook") from None
            finally:
                os.close(fd)

    def _read(self, path: str) -> NotebookFile:
        data, st = self._read_bytes(path)
        return NotebookFile(path, self._parse(path, data), str(st.st_mtime_ns))

    @staticmethod
    def _parse(path: str, data: bytes) -> NotebookNode:
        import nbformat

        try:
            return ensure_cell_ids(parse_v4(data.decode("utf-8")))
        except (ValueError, nbformat.reader.NotJSONError) as exc:
            raise NotebookError(f"{path!r} is not a readable notebook ({type(exc).__name__})",
                                code="not_a_notebook") from None

    async def digest(self, path: str) -> NotebookDigest:
        return await off_disk(self._digest, path, what=f"reading the notebook {path!r}", large=True)

    async def context_from_end(self, path: str, signature: Signature, cell_id: str | None,
                               max_tokens: int) -> NotebookContext | None:
        from deerflow.notebooks.tail import context_from_end_of

        return await off_disk(context_from_end_of, self._open_root, path, signature, cell_id, max_tokens,
                              what=f"reading the notebook {path!r}", large=True)

    def _digest(self, path: str) -> NotebookDigest:
        """The light parse of the file as read (its signature from the same descriptor); a notebook
        of another shape or version goes through :func:`parse_v4`, which converts or names the error."""
        from deerflow.notebooks.digest import NotebookDigest

        data, st = self._read_bytes(path)
        signature = signature_of(st)
        light = NotebookDigest.from_bytes(data, signature)
        return light if light is not None else NotebookDigest.from_nodes(self._parse(path, data), signature)

    async def write(self, path: str, nb: NotebookNode) -> None:
        await off_disk(self._write, path, nb, what=f"writing the notebook {path!r}", large=True)

    def _write(self, path: str, nb: NotebookNode) -> None:
        import nbformat

        nbformat.validate(nb)
        self.replace(path, (nbformat.writes(nb) + "\n").encode("utf-8"))

    def replace(self, path: str, data: bytes) -> None:
        """Replace (or create) the file ``path`` with ``data``: a new file beside the old one, renamed
        over it, in its folder opened without following a link; never written through one.  The old
        file's permissions are kept (a notebook the user made private stays private)."""
        with self._open_root() as root:
            try:
                st = root.lstat(path)
                mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else 0o644
                root.write_bytes(path, data, mode=mode, makedirs=False)
            except UnsafePath as exc:
                raise self._refused(root, path, exc) from None

    def first_checkpoint(self, path: str, checkpoint: str, data: bytes) -> bool:
        """Write ``data`` (the notebook ``path`` as just saved) as its checkpoint file ``checkpoint``
        unless something is there already (a checkpoint, or a link: left alone, never written
        through); a link on the way is refused.  The notebook's permissions are kept.  Blocking."""
        with self._open_root() as root:
            try:
                if root.lstat(checkpoint) is not None:
                    return False
                st = root.lstat(path)
                mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else 0o644
                root.write_bytes(checkpoint, data, mode=mode, makedirs=True)
            except UnsafePath as exc:
                raise self._refused(root, checkpoint, exc) from None
        return True

    async def make_dirs(self, path: str) -> None:
        path = check_root_path(path)
        await off_disk(self.make_dirs_now, path, what=f"making the folder {path!r}")

    def make_dirs_now(self, path: str) -> None:
        """Blocking :meth:`make_dirs` (a link on the way is refused)."""
        self._safely("makedirs", path)

    async def put_file(self, path: str, data: bytes) -> None:
        path = check_root_path(path)
        await off_disk(self._safely, "write_bytes", path, data, what=f"writing the file {path!r}", large=True)

    def check_plain(self, path: str) -> None:
        """Refuse ``path`` if a link (or a FIFO, a device...) is on it; a missing last part is fine."""
        with self._open_root() as root:
            try:
                st = root.lstat(path)
            except UnsafePath as exc:
                raise self._refused(root, path, exc) from None
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise self._refused(root, path, UnsafePath("symlink", path, f"{path} is a link"))
            if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise self._refused(root, path, UnsafePath("not_regular", path, f"{path} is not a regular file"))

    def _safely(self, method: str, path: str, *args: Any) -> None:
        """A SafeDir write under the root: a planted link or FIFO is refused, never written through."""
        with self._open_root() as root:
            try:
                getattr(root, method)(path, *args)
            except UnsafePath as exc:
                raise self._refused(root, path, exc) from None

    def _open_root(self) -> SafeDir:
        """The root, opened once per call; every path below it is opened without following links,
        so nothing planted under the root (a link, a FIFO, a swap between check and use) redirects
        a read or a write."""
        try:
            return SafeDir.open(self.root, label="notebook root")
        except UnsafePath as exc:
            raise NotebookError(f"the notebook root {str(self.root)!r} cannot be opened ({exc.code})",
                                code="unavailable") from None

    @staticmethod
    def _refused(root: SafeDir, path: str, exc: UnsafePath) -> NotebookError:
        if exc.code in ("not_found", "not_dir"):
            return NotebookError(f"no notebook {path!r}; {_nearby(root, path)}", code="not_found")
        if exc.code == "symlink":
            return NotebookError(f"{path!r} goes through a link, which is not followed (it could lead "
                                 "outside the notebook root)", code="path_outside_root")
        if exc.code == "is_dir":
            return NotebookError(f"{path!r} is a directory, not a notebook", code="not_a_notebook")
        return NotebookError(f"{path!r} is not a regular notebook file ({exc.code})", code="not_a_notebook")


def _nearby(root: SafeDir, path: str) -> str:
    folder = "/".join(path.split("/")[:-1])
    try:
        names = sorted(f"{folder}/{e.name}" if folder else e.name for e in root.scandir(folder)
                       if e.kind == "file" and e.name.endswith(".ipynb") and not e.name.startswith("."))
    except OSError:
        names = []
    if not names:
        return "there is no notebook in that folder"
    return "notebooks there: " + ", ".join(names[:_LISTED]) + (" …" if len(names) > _LISTED else "")

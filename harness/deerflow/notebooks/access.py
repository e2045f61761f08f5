"""Reading and writing the user's notebooks, behind one small seam.

The harness never imports Jupyter's server: the host hands it a
:class:`NotebookAccess` as ``RunContext.services.notebooks``.

* :class:`~deerflow.notebooks.contents.ContentsNotebookAccess` (in
  :mod:`deerflow.notebooks.contents`) wraps the Jupyter server's ContentsManager
  (sync or async), so paths honour the server's root, its hidden-file rules and
  whatever storage it uses (JupyterHub, S3 contents managers...).  A file-backed
  manager's files are read and written through :class:`SafeDir` (its save steps
  replayed around the write), so an open JupyterLab sees them as the manager's own
  saves (jupyter-collaboration reloads a document whose file changed; without it the
  user reloads).
* :class:`FileNotebookAccess` is the fallback when no server runs (CLI,
  in-process kernel): ``.ipynb`` files under a notebook root, read and written
  with nbformat, refusing any path that leaves the root (``..``, absolute
  paths, symlinks pointing out).
* :class:`~deerflow.notebooks.live.LiveDocuments` reaches the notebooks open in
  JupyterLab when jupyter-collaboration runs in the server: a notebook with a live
  document room is read from, and written into, that shared document (so the open
  notebook changes in place, unsaved edits included, and the room saves the file); a
  notebook nobody has open goes through the ContentsManager.
* A run's context reads a notebook as a :class:`~deerflow.notebooks.digest.NotebookDigest`
  (:meth:`NotebookAccess.digest`, the light parse) and :meth:`NotebookAccess.prewarm`
  prepares it when the server opens or saves the notebook.

Every path is checked by :func:`check_notebook_path` first, whatever the
backend: relative, no ``..``, no hidden segment, ends in ``.ipynb``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from deerflow.errors import UserError
from deerflow.notebooks.cache import ContextCache, Signature, file_signature, signature_of
from deerflow.notebooks.live import LiveDocuments
from deerflow.notebooks.parsing import parse_v4, positional_ids
from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:  # nbformat imports jsonschema, which compiles a grammar: loaded on first read or write
    from nbformat import NotebookNode

    from deerflow.notebooks.digest import NotebookContext, NotebookDigest
    from deerflow.notebooks.stored import DigestStore

__all__ = ["ContextCache", "FileNotebookAccess", "LiveDocuments", "NotebookAccess",
           "NotebookError", "NotebookFile", "Signature", "check_notebook_path", "check_root_path",
           "ensure_cell_ids", "file_signature"]

ROOT_ENV = "DEERFLOW_NOTEBOOK_ROOT"
_LISTED = 12
log = logging.getLogger(__name__)


class NotebookError(UserError):
    """A notebook request that cannot be served; the message names what exists instead.

    Args:
        message: One line, no host paths.
        code: ``path_outside_root``, ``not_found``, ``not_a_notebook``, ``unknown_cell``,
            ``conflict``, ``invalid_operation``, ``unavailable``.
    """

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class NotebookFile:
    """A notebook as read: its root-relative path, content (nbformat v4) and version stamp."""

    path: str
    nb: NotebookNode
    last_modified: str | None = None


def check_notebook_path(path: Any) -> str:
    """The normalized root-relative path, or :class:`NotebookError` naming the rule it broke."""
    if not isinstance(path, str) or not path.strip():
        raise NotebookError("give the notebook's path relative to the Jupyter root, e.g. 'work.ipynb'",
                            code="invalid_path")
    parts = _root_parts(path)
    if not parts or not parts[-1].endswith(".ipynb"):
        raise NotebookError(f"{path.strip()!r} is not a notebook (.ipynb)", code="not_a_notebook")
    return "/".join(parts)


def check_root_path(path: str) -> str:
    """Any root-relative path (a file or folder the hand-over writes), by the same rules."""
    parts = _root_parts(path)
    if not parts:
        raise NotebookError("an empty path names the Jupyter root itself", code="invalid_path")
    return "/".join(parts)


def _root_parts(path: str) -> list[str]:
    raw = path.strip()
    if "\x00" in raw or "\\" in raw or raw.startswith(("/", "~")) or (len(raw) > 1 and raw[1] == ":"):
        raise NotebookError(f"{raw!r} is not a path relative to the Jupyter root: use e.g. 'work.ipynb' or "
                            "'folder/work.ipynb'", code="path_outside_root")
    parts = [p for p in PurePosixPath(raw).parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise NotebookError(f"{raw!r} leaves the Jupyter root ('..' is not allowed)", code="path_outside_root")
    if any(p.startswith(".") for p in parts):
        raise NotebookError(f"{raw!r} is a hidden path; hidden files are not reachable", code="not_found")
    return parts


def ensure_cell_ids(nb: NotebookNode) -> NotebookNode:
    """Give cells without an id (nbformat < 4.5) a positional one, and mark the notebook 4.5.

    Positional ids are stable until the notebook is first written by us, which persists them.
    """
    for cell, cell_id in zip(nb.cells, positional_ids([c.get("id") for c in nb.cells]), strict=True):
        if not cell.get("id"):
            cell["id"] = cell_id
    nb["nbformat_minor"] = max(int(nb.get("nbformat_minor", 0)), 5)
    return nb


class NotebookAccess(ABC):
    """Where the user's notebooks live (see the module docstring)."""

    live_note: str = ""
    _locks: dict[str, asyncio.Lock] | None = None
    _contexts: ContextCache | None = None
    _digests: ContextCache | None = None
    _warming: dict[str, asyncio.Future[None]] | None = None
    _again: set[str] | None = None
    _keeping: set[asyncio.Future[None]] | None = None
    stored: DigestStore | None = None
    """Rendered notebook versions on disk (:meth:`keep_in`); None: kept in memory only."""

    def keep_in(self, folder: Path) -> None:
        """Keep rendered notebook versions in ``folder`` too (``$DEERFLOW_HOME/cache/notebooks``),
        so another process (the CLI, a kernel's client, a restarted server) finds them."""
        from deerflow.notebooks.stored import DigestStore

        self.stored = DigestStore(folder)  # consulted only for a local file's signature

    async def stored_digest(self, path: str, signature: Signature) -> NotebookDigest | None:
        """The version ``signature`` of ``path`` as rendered before by any process (None: never)."""
        store = self.stored
        if store is None:
            return None
        found = await asyncio.to_thread(self._load_stored, store, path, signature)
        if found is not None:
            self.digests.put((path, signature), found)
        return found

    def _load_stored(self, store: DigestStore, path: str, signature: Signature) -> NotebookDigest | None:
        """:meth:`DigestStore.load`, only for a file this process may read: the store never serves
        what a read would refuse (blocking; a backend with local files checks it by opening one)."""
        return None

    def keep_soon(self, path: str, digest: NotebookDigest) -> None:
        """After a run read ``path`` cold: render the rest of its cells in the background and keep
        them (memory and disk), so the next run in any cell of this version parses nothing."""
        if digest.signature is None:
            return
        if self._keeping is None:
            self._keeping = set()
        keeping = self._keeping

        async def keep() -> None:
            try:
                built = await asyncio.to_thread(_warm, digest, path, self.stored)
            except Exception:
                log.warning("keeping notebook %r failed", path, exc_info=True)
                return
            self._keep(path, digest, built)

        task = asyncio.ensure_future(keep())
        keeping.add(task)
        task.add_done_callback(keeping.discard)

    def _keep(self, path: str, digest: NotebookDigest, built: list[tuple[tuple[Any, ...], Any]]) -> None:
        assert digest.signature is not None
        self.digests.put((path, digest.signature), digest)
        for key, context in built:
            self.contexts.put(key, context)

    @property
    def contexts(self) -> ContextCache:
        """This host's cache of built notebook contexts (see :class:`ContextCache`): a few kB to
        ~35 kB each, the pre-warm's included."""
        if self._contexts is None:
            self._contexts = ContextCache(size=64)
        return self._contexts

    @property
    def digests(self) -> ContextCache:
        """Pre-warmed notebooks (:meth:`prewarm`), by ``(path, signature)``: every cell rendered."""
        if self._digests is None:
            self._digests = ContextCache()
        return self._digests

    async def signature(self, path: str) -> Signature | None:
        """The notebook file's signature (None: not a plain file on this machine, or live: no caching)."""
        return None

    async def digest(self, path: str) -> NotebookDigest:
        """The notebook at ``path`` (already checked) as a run's context reads it; a backend that
        reads local files overrides this with the light parse and the file's signature."""
        from deerflow.notebooks.digest import NotebookDigest

        return NotebookDigest.from_nodes((await self.read(path)).nb)

    async def context_from_end(self, path: str, signature: Signature, cell_id: str | None,
                               max_tokens: int) -> NotebookContext | None:
        """A run's context read from the end of the file alone (:mod:`deerflow.notebooks.tail`);
        None when that cannot tell it (the caller reads the whole file).  Local files only."""
        return None

    async def warming(self, path: str) -> bool:
        """Wait for a :meth:`prewarm` of ``path`` in flight (a run does not parse the file twice);
        whether there was one."""
        task = (self._warming or {}).get(path)
        if task is not None:
            await asyncio.shield(task)
        return task is not None

    def prewarm_soon(self, path: str) -> None:
        """:meth:`prewarm` ``path`` in the background (from an event listener or a hook); asked again
        while one runs (a save during the pre-warm of the version before), once more after it."""
        if self._warming is None or self._again is None:
            self._warming, self._again = {}, set()
        warming, again = self._warming, self._again
        if path in warming:
            again.add(path)
            return

        def done(_: asyncio.Future[None]) -> None:
            warming.pop(path, None)
            if path in again:
                again.discard(path)
                self.prewarm_soon(path)

        warming[path] = asyncio.ensure_future(self.prewarm(path))
        warming[path].add_done_callback(done)

    async def prewarm(self, path: str) -> None:
        """Read and render every cell of ``path`` now, off the event loop, and keep the texts, so the
        first ``%%deerflow`` run after the notebook was opened or saved finds them ready (issue 26's
        20 ms); the contexts of the likeliest calling cells (:meth:`NotebookDigest.anchors`) are
        built too.  Only plain local files (a signature) are kept; anything failing is left for the
        run to report, and a runtime failure is logged."""
        try:
            path = check_notebook_path(path)
            signature = await self.signature(path)
            if signature is None or self.digests.get((path, signature)) is not None:
                return
            digest = await self.stored_digest(path, signature)  # rendered before, by any process
            if digest is None:
                digest = await self.digest(path)
            built = await asyncio.to_thread(_warm, digest, path, self.stored)
            if digest.signature is not None:
                self._keep(path, digest, built)
        except NotebookError:
            return
        except Exception:
            log.warning("pre-warming notebook %r failed", path, exc_info=True)

    def note_for(self, path: str) -> str:
        """What the user is told after a write to ``path`` (live, saved, or "reload")."""
        return self.live_note

    def lock(self, path: str) -> asyncio.Lock:
        """One writer per notebook in this host: a read-replay-save is not interleaved with another."""
        if self._locks is None:
            self._locks = {}
        return self._locks.setdefault(path, asyncio.Lock())

    @abstractmethod
    async def read(self, path: str) -> NotebookFile:
        """The notebook at ``path`` (already checked) or :class:`NotebookError`."""

    @abstractmethod
    async def write(self, path: str, nb: NotebookNode) -> None:
        """Replace the notebook at ``path`` with ``nb`` (validated first: never a partial write)."""

    async def make_dirs(self, path: str) -> None:
        """Create the folder ``path`` (root-relative) and its parents (the hand-over's copies)."""
        raise NotebookError("this host cannot write files beside the notebook", code="unavailable")

    async def put_file(self, path: str, data: bytes) -> None:
        """Create or replace the file ``path`` (root-relative, its folder existing) with ``data``."""
        raise NotebookError("this host cannot write files beside the notebook", code="unavailable")


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
        return await asyncio.to_thread(self._read, path)

    async def signature(self, path: str) -> Signature | None:
        return await asyncio.to_thread(file_signature, self.root, path)

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
        return await asyncio.to_thread(self._digest, path)

    async def context_from_end(self, path: str, signature: Signature, cell_id: str | None,
                               max_tokens: int) -> NotebookContext | None:
        from deerflow.notebooks.tail import context_from_end_of

        return await asyncio.to_thread(context_from_end_of, self._open_root, path, signature, cell_id, max_tokens)

    def _digest(self, path: str) -> NotebookDigest:
        """The light parse of the file as read (its signature from the same descriptor); a notebook
        of another shape or version goes through :func:`parse_v4`, which converts or names the error."""
        from deerflow.notebooks.digest import NotebookDigest

        data, st = self._read_bytes(path)
        signature = signature_of(st)
        light = NotebookDigest.from_bytes(data, signature)
        return light if light is not None else NotebookDigest.from_nodes(self._parse(path, data), signature)

    async def write(self, path: str, nb: NotebookNode) -> None:
        await asyncio.to_thread(self._write, path, nb)

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
        await asyncio.to_thread(self.make_dirs_now, check_root_path(path))

    def make_dirs_now(self, path: str) -> None:
        """Blocking :meth:`make_dirs` (a link on the way is refused)."""
        self._safely("makedirs", path)

    async def put_file(self, path: str, data: bytes) -> None:
        await asyncio.to_thread(self._safely, "write_bytes", check_root_path(path), data)

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


def _warm(digest: NotebookDigest, path: str, store: DigestStore | None = None) -> list[tuple[tuple[Any, ...], Any]]:
    """The pre-warm's work (a worker thread's): every cell rendered (and kept in ``store`` unless it
    came from there), the likely contexts built."""
    from deerflow.notebooks.digest import CONTEXT_TOKENS, build_context, context_key

    if not digest.complete:
        digest.render_all()
        if store is not None:
            store.save(path, digest)
    return [(context_key(path, digest.signature, anchor, None, CONTEXT_TOKENS),
             build_context(digest, path, anchor, None, CONTEXT_TOKENS)) for anchor in digest.anchors()]


def __getattr__(name: str) -> Any:
    """``ContentsNotebookAccess`` where it was first defined (it lives in :mod:`deerflow.notebooks.contents`)."""
    if name == "ContentsNotebookAccess":
        from deerflow.notebooks.contents import ContentsNotebookAccess

        return ContentsNotebookAccess
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

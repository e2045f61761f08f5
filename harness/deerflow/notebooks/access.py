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
* :class:`~deerflow.notebooks.files.FileNotebookAccess` (in :mod:`deerflow.notebooks.files`)
  is the fallback when no server runs (CLI, in-process kernel): ``.ipynb`` files
  under a notebook root, read and written with nbformat, refusing any path that
  leaves the root (``..``, absolute paths, symlinks pointing out).
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
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from deerflow.errors import UserError
from deerflow.notebooks.cache import ContextCache, Signature, file_signature
from deerflow.notebooks.live import LiveDocuments
from deerflow.notebooks.offdisk import off_disk
from deerflow.notebooks.parsing import positional_ids

if TYPE_CHECKING:  # nbformat imports jsonschema, which compiles a grammar: loaded on first read or write
    from nbformat import NotebookNode

    from deerflow.notebooks.digest import NotebookContext, NotebookDigest
    from deerflow.notebooks.files import FileNotebookAccess
    from deerflow.notebooks.stored import DigestStore

__all__ = ["ContextCache", "FileNotebookAccess", "LiveDocuments", "NotebookAccess",
           "NotebookError", "NotebookFile", "Signature", "check_notebook_path", "check_root_path",
           "ensure_cell_ids", "file_signature"]

ROOT_ENV = "DEERFLOW_NOTEBOOK_ROOT"
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
        found = await off_disk(self._load_stored, store, path, signature, what=f"reading the notebook {path!r}",
                               large=True)
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
                built = await off_disk(_warm, digest, path, self.stored, what=f"rendering the notebook {path!r}",
                                       large=True)
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
            built = await off_disk(_warm, digest, path, self.stored, what=f"rendering the notebook {path!r}",
                                   large=True)
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
    """The two backends where they were first defined (they live in :mod:`deerflow.notebooks.files`
    and :mod:`deerflow.notebooks.contents`, which import this module)."""
    if name == "FileNotebookAccess":
        from deerflow.notebooks.files import FileNotebookAccess

        return FileNotebookAccess
    if name == "ContentsNotebookAccess":
        from deerflow.notebooks.contents import ContentsNotebookAccess

        return ContentsNotebookAccess
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

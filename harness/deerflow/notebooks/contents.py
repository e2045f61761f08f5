"""The Jupyter server's ContentsManager as the notebook access of a server host.

:class:`ContentsNotebookAccess` honours the server's root, its hidden-file rules and
whatever storage it uses (JupyterHub, S3 contents managers...).  A file-backed manager
(one with a local ``root_dir``) follows symbolic links, so its files are read *and written*
through :class:`~deerflow.threadfs.SafeDir` under its root instead: nothing planted under the
root (a link, a FIFO, a folder swapped for a link between a check and the use) redirects a
read or a write.  Notebooks open in JupyterLab under jupyter-collaboration are read from and
written into their live documents (:class:`~deerflow.notebooks.live.LiveDocuments`).
"""

from __future__ import annotations

import base64
import inspect
import logging
import os
from typing import TYPE_CHECKING, Any

from deerflow.notebooks.access import (
    NotebookAccess,
    NotebookError,
    NotebookFile,
    check_root_path,
    ensure_cell_ids,
)
from deerflow.notebooks.cache import Signature
from deerflow.notebooks.files import FileNotebookAccess
from deerflow.notebooks.live import LiveDocuments
from deerflow.notebooks.offdisk import off_disk

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from deerflow.notebooks.digest import NotebookContext, NotebookDigest
    from deerflow.notebooks.stored import DigestStore

log = logging.getLogger(__name__)


class ContentsNotebookAccess(NotebookAccess):
    """The Jupyter server's ContentsManager (any implementation, sync or async).

    Args:
        contents_manager: ``serverapp.contents_manager``.
    """

    live_note = "saved through Jupyter: reload the notebook if it is open"
    live_doc_note = "applied to the open notebook live"

    def __init__(self, contents_manager: Any, live: LiveDocuments | None = None) -> None:
        self.cm = contents_manager
        self.live = live
        self._written_live: set[str] = set()
        root = getattr(contents_manager, "root_dir", None)
        local = bool(root) and getattr(contents_manager, "_get_os_path", None) is not None
        self._files = FileNotebookAccess(str(root)) if local else None  # a file-backed manager's files, by SafeDir
        # jupyter_server's own file save (not a subclass's, e.g. jupytext's pairing): replayed here
        # with the write itself through SafeDir (see _save_local)
        self._own_save = local and _stock_save(contents_manager)
        self.sandboxed: tuple[str, ...] = ()  # see sandboxed_in

    def sandboxed_in(self, *folders: str | os.PathLike[str]) -> None:
        """The folders sandboxed code can write into (the DeerFlow users' folders, when they lie
        under the Jupyter root).  A manager with a ``save`` of its own writes by path, following
        links, after the link check: a folder on the path swapped for a link in between would
        redirect it.  Only code that can write into the path's folders can swap one, so such a
        manager is not asked to write anything inside these folders (:meth:`_check_by_path`)."""
        self.sandboxed = tuple(os.path.realpath(f) for f in folders)

    async def _check_by_path(self, path: str) -> None:
        """Refuse a write through a path-following ``save`` into a sandbox-writable folder."""
        if self._own_save or self._files is None or not self.sandboxed:
            return
        joined = os.path.join(self._files.root, *path.split("/"))
        real: str = await off_disk(lambda: os.path.realpath(joined), what=f"checking the path {path!r}")
        if any(real == folder or real.startswith(folder.rstrip(os.sep) + os.sep) for folder in self.sandboxed):
            raise NotebookError(f"{path!r} is inside a DeerFlow thread's folder: this server's contents manager "
                                "saves by path, so DeerFlow does not write there through it", code="path_outside_root")

    def watch(self) -> bool:
        """Pre-warm a notebook's context when the server opens or saves it: a listener on the
        manager's contents events (jupyter_server emits ``get`` and ``save`` with the path).
        Call it once, on the server's event loop; False when the manager emits no events or has
        no local files (nothing the cache could keep)."""
        logger, schema = getattr(self.cm, "event_logger", None), getattr(self.cm, "event_schema_id", None)
        if self._files is None or logger is None or not schema or not hasattr(logger, "add_listener"):
            return False

        async def heard(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            path = data.get("path")
            if data.get("action") in ("get", "save") and isinstance(path, str) and path.endswith(".ipynb"):
                self.prewarm_soon(path.strip("/"))

        logger.add_listener(schema_id=schema, listener=heard)
        return True

    def note_for(self, path: str) -> str:
        return self.live_doc_note if path in self._written_live else self.live_note

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call the manager as jupyter_server's own handlers do (``ensure_async``).

        A sync manager runs on the calling (server) thread: its notary's SQLite
        connection and other state belong to that thread, exactly as for the
        server's contents API.  jupyter_server's default managers are async.
        """
        result = getattr(self.cm, method)(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    async def _check_local(self, path: str) -> None:
        """A file-backed manager follows links: refuse a path with a link anywhere on it (or a FIFO...).

        Reads then go through SafeDir themselves (no check-then-use), and so do writes to
        jupyter_server's own managers (:meth:`_save_local`); a manager with a save of its own
        (jupytext's...) is called right after this check.
        """
        if self._files is not None:
            await off_disk(self._files.check_plain, path, what=f"checking the path {path!r}")

    async def signature(self, path: str) -> Signature | None:
        """A file-backed manager's file, stat'ed by SafeDir's rules under its root; None for an open
        live document (its content is not the file's) or a manager without local files."""
        if self._files is None or (self.live is not None and await self.live.document(path) is not None):
            return None
        return await self._files.signature(path)

    def _load_stored(self, store: DigestStore, path: str, signature: Signature) -> NotebookDigest | None:
        return self._files._load_stored(store, path, signature) if self._files is not None else None

    async def digest(self, path: str) -> NotebookDigest:
        await self._check_local(path)
        if self._files is not None and (self.live is None or await self.live.document(path) is None):
            return await self._files.digest(path)
        return await super().digest(path)

    async def context_from_end(self, path: str, signature: Signature, cell_id: str | None,
                               max_tokens: int) -> NotebookContext | None:
        """A file-backed manager's file, read from its end as :class:`FileNotebookAccess` does."""
        await self._check_local(path)
        if self._files is None:
            return None
        return await self._files.context_from_end(path, signature, cell_id, max_tokens)

    async def read(self, path: str) -> NotebookFile:
        import nbformat

        await self._check_local(path)
        document = await self.live.document(path) if self.live else None
        if document is not None:  # what the user sees, unsaved edits included
            return NotebookFile(path, ensure_cell_ids(nbformat.from_dict(document.get())), "live")
        if self._files is not None:  # opened without following a link: nothing to swap in between
            return await self._files.read(path)
        try:
            model = await self._call("get", path, content=True, type="notebook")
        except Exception as exc:  # noqa: BLE001 - tornado HTTPError from any contents manager
            raise self._translate(path, exc) from None
        nb = model["content"]
        if not isinstance(nb, nbformat.NotebookNode):
            nb = nbformat.from_dict(nb)
        return NotebookFile(path, ensure_cell_ids(nb), str(model.get("last_modified") or ""))

    async def write(self, path: str, nb: NotebookNode) -> None:
        import nbformat

        await self._check_local(path)
        await off_disk(nbformat.validate, nb, what=f"checking the notebook {path!r}", large=True)  # seconds on a large one
        document = await self.live.document(path) if self.live else None
        if document is not None and self.live is not None:
            await self.live.write(document, nb)
            self._written_live.add(path)
            return
        self._written_live.discard(path)
        model = {"type": "notebook", "format": "json", "content": nb}
        if self._own_save:
            await self._save_local(path, model)
            return
        await self._check_by_path(path)
        try:
            await self._call("save", model, path)
        except Exception as exc:  # noqa: BLE001 - tornado HTTPError from any contents manager
            raise self._translate(path, exc) from None

    async def make_dirs(self, path: str) -> None:
        parts = check_root_path(path).split("/")
        if self._own_save and self._files is not None:  # each folder created beneath the last, no link followed
            await off_disk(self._files.make_dirs_now, "/".join(parts), what=f"making the folder {path!r}")
            return
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            await self._check_local(folder)
            await self._check_by_path(folder)
            try:
                if not await self._call("dir_exists", folder):
                    await self._call("save", {"type": "directory"}, folder)
            except Exception as exc:  # noqa: BLE001 - tornado HTTPError from any contents manager
                raise self._translate(folder, exc) from None

    async def put_file(self, path: str, data: bytes) -> None:
        path = check_root_path(path)
        await self._check_local(path)
        model = {"type": "file", "format": "base64", "content": base64.b64encode(data).decode("ascii")}
        if self._own_save:
            await self._save_local(path, model, data)
            return
        await self._check_by_path(path)
        try:
            await self._call("save", model, path)
        except Exception as exc:  # noqa: BLE001 - tornado HTTPError from any contents manager
            raise self._translate(path, exc) from None

    async def _save_local(self, path: str, model: dict[str, Any], data: bytes | None = None) -> None:
        """jupyter_server's file save, step for step, with the write through SafeDir.

        The manager's ``save`` opens the path it joined onto its root, following links: a folder
        on the path swapped for a link after :meth:`_check_local` (code with write access under
        the root, e.g. a sandboxed thread whose folder is there) would redirect the write outside
        the root.  Here the new file is written beside the old one and renamed over it, in its
        folder opened without following a link (:meth:`FileNotebookAccess.replace`): a swap at any
        moment is refused, never followed.  Around it, what the manager's save does: its pre-save
        hooks (which may change the model), trust signing, post-save hooks and ``save`` event.
        A notebook's first checkpoint (the manager's save makes one when there is none) is
        written from the bytes just saved (:meth:`_first_checkpoint`), never copied by path.
        """
        cm, files = self.cm, self._files
        assert files is not None  # _own_save implies a local root
        nb = None
        try:
            cm.run_pre_save_hooks(model=model, path=path)
            if model["type"] == "notebook":
                import nbformat

                nb = nbformat.from_dict(model["content"])
                cm.check_and_sign(nb, path)
        except Exception as exc:  # noqa: BLE001 - a hook's HTTPError refuses the save, as in the manager
            raise self._translate(path, exc) from None
        written = (data or b"") if nb is None else \
            await off_disk(_notebook_bytes, nb, what=f"writing the notebook {path!r}", large=True)  # seconds if large
        await off_disk(files.replace, path, written, what=f"writing the notebook {path!r}", large=True)
        if nb is not None:
            await self._first_checkpoint(path, written)
        saved = {**{k: v for k, v in model.items() if k != "content"}, "content": None, "path": path,
                 "name": path.rsplit("/", 1)[-1]}
        cm.run_post_save_hooks(model=saved, os_path=os.path.join(files.root, *path.split("/")))
        emit = getattr(cm, "emit", None)
        if callable(emit):
            emit(data={"action": "save", "path": path})

    async def _first_checkpoint(self, path: str, written: bytes) -> None:
        """The checkpoint jupyter_server's save makes for a notebook that has none ("File > Revert"
        goes back to it), made without following a link.

        The manager's own ``create_checkpoint`` copies the notebook by path, following links: a
        link planted in place of the notebook right after the save would copy the file it points
        to (outside the root, or a secret) into the checkpoint folder beside the notebook.  For
        jupyter_server's file checkpoints it is written here from the bytes just saved, through
        SafeDir (a link at the checkpoint or on the way to it is left alone, never written
        through); other checkpoints (a database, S3) are asked through the ContentsManager, which
        reads its own storage.  A checkpoint that cannot be made does not fail the save (nor does
        it in the manager, whose fallback folder for a read-only one is not replayed); it is logged.
        """
        checkpoints = getattr(self.cm, "checkpoints", None)
        try:
            rel = _file_checkpoint(checkpoints, path)
            if rel is not None and self._files is not None:
                await off_disk(self._files.first_checkpoint, path, rel, written,
                               what=f"making the checkpoint of {path!r}", large=True)
            elif checkpoints is not None and not _stock_checkpoints(checkpoints) \
                    and not await self._call("list_checkpoints", path):
                await self._call("create_checkpoint", path)
        except NotebookError as exc:  # a link on the way to it (refused): one line, not a traceback
            log.warning("the first checkpoint of %r was not made: %s", path, exc)
        except Exception:
            log.warning("the first checkpoint of %r was not made", path, exc_info=True)

    def _translate(self, path: str, exc: Exception) -> NotebookError:
        status = getattr(exc, "status_code", None)
        if status == 404:
            return NotebookError(f"no notebook {path!r} under the Jupyter root", code="not_found")
        if status == 400:
            return NotebookError(f"{path!r} is not a notebook", code="not_a_notebook")
        if status == 403:
            return NotebookError(f"{path!r} is not accessible", code="not_found")
        raise exc  # a runtime failure of the contents manager: logged by the caller


def _notebook_bytes(nb: NotebookNode) -> bytes:
    import nbformat

    return (nbformat.writes(nb) + "\n").encode("utf-8")


def _stock_checkpoints(checkpoints: Any) -> bool:
    """Whether ``checkpoints`` are jupyter_server's file checkpoints (copies beside the notebook)."""
    from jupyter_server.services.contents.filecheckpoints import (
        AsyncFileCheckpoints,
        FileCheckpoints,
    )

    return type(checkpoints) in (FileCheckpoints, AsyncFileCheckpoints)


def _file_checkpoint(checkpoints: Any, path: str) -> str | None:
    """The root-relative path of notebook ``path``'s first checkpoint under jupyter_server's file
    checkpoints (``folder/.ipynb_checkpoints/name-checkpoint.ipynb``); None for other checkpoints
    or a checkpoint folder that is not one plain name."""
    if checkpoints is None or not _stock_checkpoints(checkpoints):
        return None
    folder = getattr(checkpoints, "checkpoint_dir", "")
    if not isinstance(folder, str) or not folder or "/" in folder or "\\" in folder or folder in (".", ".."):
        return None
    parent, _, name = path.rpartition("/")
    base, ext = os.path.splitext(name)
    return "/".join(p for p in (parent, folder, f"{base}-checkpoint{ext}") if p)


def _stock_save(contents_manager: Any) -> bool:
    """Whether the manager saves with jupyter_server's own file managers' ``save`` (not overridden)."""
    save = getattr(type(contents_manager), "save", None)
    return getattr(save, "__module__", "").startswith("jupyter_server.services.contents.") \
        and all(hasattr(contents_manager, m) for m in ("run_pre_save_hooks", "run_post_save_hooks", "check_and_sign"))

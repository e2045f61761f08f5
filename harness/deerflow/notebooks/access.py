"""Reading and writing the user's notebooks, behind one small seam.

The harness never imports Jupyter's server: the host hands it a
:class:`NotebookAccess` as ``RunContext.services.notebooks``.

* :class:`ContentsNotebookAccess` wraps the Jupyter server's ContentsManager
  (sync or async), so paths honour the server's root, its hidden-file rules and
  whatever storage it uses (JupyterHub, S3 contents managers...).  Writes go
  through ``save``, so an open JupyterLab sees them (jupyter-collaboration
  reloads a document whose file changed; without it the user reloads).
* :class:`FileNotebookAccess` is the fallback when no server runs (CLI,
  in-process kernel): ``.ipynb`` files under a notebook root, read and written
  with nbformat, refusing any path that leaves the root (``..``, absolute
  paths, symlinks pointing out).
* :class:`LiveDocuments` reaches the notebooks open in JupyterLab when
  jupyter-collaboration runs in the server: a notebook with a live document
  room is read from, and written into, that shared document (so the open
  notebook changes in place, unsaved edits included, and the room saves the
  file); a notebook nobody has open goes through the ContentsManager.

Every path is checked by :func:`check_notebook_path` first, whatever the
backend: relative, no ``..``, no hidden segment, ends in ``.ipynb``.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import os
import stat
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from deerflow.errors import UserError
from deerflow.notebooks.parsing import parse_v4
from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:  # nbformat imports jsonschema, which compiles a grammar: loaded on first read or write
    from nbformat import NotebookNode

ROOT_ENV = "DEERFLOW_NOTEBOOK_ROOT"
_LISTED = 12


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
    taken = {c.get("id") for c in nb.cells}
    for index, cell in enumerate(nb.cells):
        if not cell.get("id"):
            candidate = f"cell-{index + 1}"
            while candidate in taken:
                candidate += "x"
            cell["id"] = candidate
            taken.add(candidate)
    nb["nbformat_minor"] = max(int(nb.get("nbformat_minor", 0)), 5)
    return nb


Signature = tuple[int, int, int, int, int]
"""A notebook file's identity and version: device, inode, size, mtime and ctime in nanoseconds."""


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
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class ContextCache:
    """The last few notebook contexts built, by (path, file signature, what was asked): a run in the
    same unchanged notebook does not parse it again.  Any write changes the signature (a new inode,
    size or mtime), so an entry is never stale; it lives on the host's access, on its event loop."""

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


class NotebookAccess(ABC):
    """Where the user's notebooks live (see the module docstring)."""

    live_note: str = ""
    _locks: dict[str, asyncio.Lock] | None = None
    _contexts: ContextCache | None = None

    @property
    def contexts(self) -> ContextCache:
        """This host's cache of built notebook contexts (see :class:`ContextCache`)."""
        if self._contexts is None:
            self._contexts = ContextCache()
        return self._contexts

    async def signature(self, path: str) -> Signature | None:
        """The notebook file's signature (None: not a plain file on this machine, or live: no caching)."""
        return None

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

    def _read(self, path: str) -> NotebookFile:
        with self._open_root() as root:
            try:
                fd = root.open_file(path)
            except UnsafePath as exc:
                raise self._refused(root, path, exc) from None
            try:
                stamp = str(os.fstat(fd).st_mtime_ns)
                with os.fdopen(fd, "rb", closefd=False) as handle:
                    text = handle.read().decode("utf-8")
            except (OSError, ValueError) as exc:
                raise NotebookError(f"{path!r} is not a readable notebook ({type(exc).__name__})",
                                    code="not_a_notebook") from None
            finally:
                os.close(fd)
        import nbformat

        try:
            nb = parse_v4(text)
        except (ValueError, nbformat.reader.NotJSONError) as exc:
            raise NotebookError(f"{path!r} is not a readable notebook ({type(exc).__name__})",
                                code="not_a_notebook") from None
        return NotebookFile(path, ensure_cell_ids(nb), stamp)

    async def write(self, path: str, nb: NotebookNode) -> None:
        await asyncio.to_thread(self._write, path, nb)

    def _write(self, path: str, nb: NotebookNode) -> None:
        import nbformat

        nbformat.validate(nb)
        with self._open_root() as root:
            try:  # a new file beside the old one, renamed over it: never written through a link
                root.write_text(path, nbformat.writes(nb) + "\n", makedirs=False)
            except UnsafePath as exc:
                raise self._refused(root, path, exc) from None

    async def make_dirs(self, path: str) -> None:
        await asyncio.to_thread(self._safely, "makedirs", check_root_path(path))

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
        local = getattr(contents_manager, "_get_os_path", None) is not None
        self._files = FileNotebookAccess(root) if root and local else None  # a file-backed manager's files, by SafeDir

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

        Reads then go through SafeDir themselves (no check-then-use); writes go through the
        manager (its trust signing and save hooks) right after this check.
        """
        if self._files is not None:
            await asyncio.to_thread(self._files.check_plain, path)

    async def signature(self, path: str) -> Signature | None:
        """A file-backed manager's file, stat'ed by SafeDir's rules under its root; None for an open
        live document (its content is not the file's) or a manager without local files."""
        if self._files is None or (self.live is not None and await self.live.document(path) is not None):
            return None
        return await self._files.signature(path)

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
        nbformat.validate(nb)
        live = self.live
        document = await live.document(path) if live else None
        if live and document is not None:
            await live.write(document, nb)
            self._written_live.add(path)
            return
        self._written_live.discard(path)
        try:
            await self._call("save", {"type": "notebook", "format": "json", "content": nb}, path)
        except Exception as exc:  # noqa: BLE001 - tornado HTTPError from any contents manager
            raise self._translate(path, exc) from None

    async def make_dirs(self, path: str) -> None:
        parts = check_root_path(path).split("/")
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            await self._check_local(folder)
            try:
                if not await self._call("dir_exists", folder):
                    await self._call("save", {"type": "directory"}, folder)
            except Exception as exc:  # noqa: BLE001 - tornado HTTPError from any contents manager
                raise self._translate(folder, exc) from None

    async def put_file(self, path: str, data: bytes) -> None:
        path = check_root_path(path)
        await self._check_local(path)
        model = {"type": "file", "format": "base64", "content": base64.b64encode(data).decode("ascii")}
        try:
            await self._call("save", model, path)
        except Exception as exc:  # noqa: BLE001 - tornado HTTPError from any contents manager
            raise self._translate(path, exc) from None

    def _translate(self, path: str, exc: Exception) -> NotebookError:
        status = getattr(exc, "status_code", None)
        if status == 404:
            return NotebookError(f"no notebook {path!r} under the Jupyter root", code="not_found")
        if status == 400:
            return NotebookError(f"{path!r} is not a notebook", code="not_a_notebook")
        if status == 403:
            return NotebookError(f"{path!r} is not accessible", code="not_found")
        raise exc  # a runtime failure of the contents manager: logged by the caller


class LiveDocuments:
    """The live notebooks of jupyter-collaboration's document rooms (duck-typed: no import of it here).

    Args:
        collaboration: Returns the server's ``YDocExtension`` (``settings["jupyter_server_ydoc"]``),
            or None when jupyter-collaboration is not running; asked on every use, since
            server extensions load in any order.
    """

    def __init__(self, collaboration: Any) -> None:
        self._collaboration = collaboration

    async def document(self, path: str) -> Any | None:
        """The shared ``YNotebook`` of an open room for ``path``; None when nobody has it open.

        No room is created: a notebook that is not open is read and saved as a file.
        """
        extension = self._collaboration()
        if extension is None:
            return None
        try:
            return await extension.get_document(path=path, content_type="notebook", file_format="json", copy=False)
        except Exception:  # noqa: BLE001 - a broken collaboration extension: fall back to the file
            return None

    @staticmethod
    async def write(document: Any, nb: NotebookNode) -> None:
        """Set the shared document to ``nb``: jupyter_ydoc updates cells in place by id (a changed
        source is edited, others are untouched), the room broadcasts it and saves the file."""
        value = json.loads(json.dumps(nb))  # plain data; sources as strings, as the document keeps them
        for cell in value["cells"]:
            if isinstance(cell.get("source"), list):
                cell["source"] = "".join(cell["source"])
        setter = getattr(document, "aset", None)
        if setter is not None:
            await setter(value)
        else:
            document.set(value)

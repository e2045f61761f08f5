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
import inspect
import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import nbformat
from nbformat import NotebookNode

from deerflow.errors import UserError
from deerflow.threadfs import SafeDir, UnsafePath

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
    raw = path.strip()
    if "\x00" in raw or "\\" in raw or raw.startswith(("/", "~")) or (len(raw) > 1 and raw[1] == ":"):
        raise NotebookError(f"{raw!r} is not a path relative to the Jupyter root: use e.g. 'work.ipynb' or "
                            "'folder/work.ipynb'", code="path_outside_root")
    parts = [p for p in PurePosixPath(raw).parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise NotebookError(f"{raw!r} leaves the Jupyter root ('..' is not allowed)", code="path_outside_root")
    if any(p.startswith(".") for p in parts):
        raise NotebookError(f"{raw!r} is a hidden path; hidden files are not reachable", code="not_found")
    if not parts or not parts[-1].endswith(".ipynb"):
        raise NotebookError(f"{raw!r} is not a notebook (.ipynb)", code="not_a_notebook")
    return "/".join(parts)


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


class NotebookAccess(ABC):
    """Where the user's notebooks live (see the module docstring)."""

    live_note: str = ""
    _locks: dict[str, asyncio.Lock] | None = None

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
        try:
            nb = _parse_v4(text)
        except (ValueError, nbformat.reader.NotJSONError) as exc:
            raise NotebookError(f"{path!r} is not a readable notebook ({type(exc).__name__})",
                                code="not_a_notebook") from None
        return NotebookFile(path, ensure_cell_ids(nb), stamp)

    async def write(self, path: str, nb: NotebookNode) -> None:
        await asyncio.to_thread(self._write, path, nb)

    def _write(self, path: str, nb: NotebookNode) -> None:
        nbformat.validate(nb)
        with self._open_root() as root:
            try:  # a new file beside the old one, renamed over it: never written through a link
                root.write_text(path, nbformat.writes(nb) + "\n", makedirs=False)
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


def _parse_v4(text: str) -> NotebookNode:
    """A notebook's JSON as nbformat v4, without schema validation on read (writes validate).

    nbformat's validation is most of a read's cost (2.5x the parse on a 500-cell notebook),
    and reading for context or a diff needs only the cells; other versions are converted.
    """
    data = json.loads(text)
    if isinstance(data, dict) and data.get("nbformat") == 4 and isinstance(data.get("cells"), list):
        return nbformat.from_dict(data)
    return nbformat.reads(text, as_version=4)


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

    def _check_real_path(self, path: str) -> None:
        """File-backed managers follow symlinks; refuse one that leads out of the root."""
        locate = getattr(self.cm, "_get_os_path", None)
        root = getattr(self.cm, "root_dir", None)
        if locate is None or not root:
            return
        try:
            real = Path(locate(path)).resolve()
        except Exception as exc:
            raise NotebookError(f"{path!r} is outside the Jupyter root", code="path_outside_root") from exc
        if not real.is_relative_to(Path(root).resolve()):
            raise NotebookError(f"{path!r} leads outside the Jupyter root (a link pointing out is not followed)",
                                code="path_outside_root")

    async def read(self, path: str) -> NotebookFile:
        self._check_real_path(path)
        document = await self.live.document(path) if self.live else None
        if document is not None:  # what the user sees, unsaved edits included
            return NotebookFile(path, ensure_cell_ids(nbformat.from_dict(document.get())), "live")
        try:
            model = await self._call("get", path, content=True, type="notebook")
        except Exception as exc:  # noqa: BLE001 - tornado HTTPError from any contents manager
            raise self._translate(path, exc) from None
        nb = model["content"]
        if not isinstance(nb, NotebookNode):
            nb = nbformat.from_dict(nb)
        return NotebookFile(path, ensure_cell_ids(nb), str(model.get("last_modified") or ""))

    async def write(self, path: str, nb: NotebookNode) -> None:
        self._check_real_path(path)
        nbformat.validate(nb)
        document = await self.live.document(path) if self.live else None
        if document is not None:
            await self.live.write(document, nb)
            self._written_live.add(path)
            return
        self._written_live.discard(path)
        try:
            await self._call("save", {"type": "notebook", "format": "json", "content": nb}, path)
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

"""The notebooks open in JupyterLab under jupyter-collaboration: read from and written into their
shared documents (see :class:`LiveDocuments`); used by
:class:`~deerflow.notebooks.access.ContentsNotebookAccess`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbformat import NotebookNode


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

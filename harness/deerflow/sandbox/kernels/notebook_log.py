"""``agent.ipynb``: every cell the agent ran, with its outputs.

Each thread's workspace holds one notebook that grows by one code cell per
``python`` call (plus a markdown note when the kernel was restarted, so a
reader knows state was lost there).  It is a real nbformat v4 notebook with
a ``python3`` kernelspec: open it in JupyterLab or re-run it with nbclient.

Writes are atomic (temporary file in the same directory, then
a rename through :class:`~deerflow.threadfs.SafeDir`, which follows no link
and uses an unpredictable temporary name), so a crash or a concurrent reader never sees half a file.
The notebook is kept in memory between writes and reloaded only when the
file changed underneath (the user edited it, or code in the sandbox did).
A file that no longer parses is moved aside, never overwritten, and a new
notebook started.

Appends must stay cheap as the notebook grows (a long session has hundreds
of cells, some with images), so only the new cell is validated and
serialised; the serialised text of earlier cells is cached and the file is
assembled from it, in nbformat's own layout (sorted keys, one-space indent,
multi-line strings split into lists).
"""

from __future__ import annotations

import copy
import json
import logging
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:  # nbformat is imported on first use: its jsonschema import costs ~1.5 s
    from nbformat import NotebookNode

logger = logging.getLogger(__name__)

NOTEBOOK_NAME = "agent.ipynb"
_KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
_CELLS_PLACEHOLDER = '"cells": []'
# A file changed underneath is re-read on the kernel pool's loop, and building and validating each
# cell holds the GIL (about a second per 20k small cells): bounds keep a file the sandboxed code
# wrote from stalling the server on every python call.  A larger file is moved aside, not parsed.
_MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
_MAX_NOTEBOOK_CELLS = 10_000


class _TooManyCells(ValueError):
    """A notebook with more cells than the log re-reads."""


def _dumps(value: object) -> str:
    return json.dumps(value, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False)


def _cell_json(cell: NotebookNode) -> str:
    """One cell as it appears inside the file's ``cells`` list."""
    from nbformat import NotebookNode
    from nbformat.v4.rwbase import split_lines

    stored = copy.deepcopy(cell)
    stored.metadata.pop("trusted", None)
    split = split_lines(NotebookNode(cells=[stored])).cells[0]
    return textwrap.indent(_dumps(split), "  ")


def _check_cell_count(text: str) -> None:
    """Refuse a notebook of more than :data:`_MAX_NOTEBOOK_CELLS` cells before nbformat builds them
    (json's own parse is fast; a bad document is left for nbformat to report)."""
    try:
        cells = json.loads(text).get("cells")
    except (json.JSONDecodeError, AttributeError):
        return
    if isinstance(cells, list) and len(cells) > _MAX_NOTEBOOK_CELLS:
        raise _TooManyCells(f"{len(cells)} cells, more than the {_MAX_NOTEBOOK_CELLS} the log re-reads")


class NotebookLog:
    """Appends executed cells to a notebook file.

    Args:
        path: The notebook file (``<workspace>/agent.ipynb``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._nb: NotebookNode | None = None
        self._cells_json: list[str] = []
        self._stamp: tuple[int, int] | None = None

    def _dir(self) -> SafeDir:
        """The workspace, held by descriptor: the agent's code can plant links and
        FIFOs at our file's name, and the host must never follow or block on them."""
        return SafeDir.open(self.path.parent, create=True)

    def _file_stamp(self) -> tuple[int, int] | None:
        with self._dir() as root:
            st = root.lstat(self.path.name)
        return None if st is None else (st.st_mtime_ns, st.st_size)

    def _notebook(self) -> NotebookNode:
        """The current notebook, reloaded if the file changed since our write."""
        if self._nb is not None and self._file_stamp() == self._stamp:
            return self._nb
        self._nb = self._read()
        self._cells_json = [_cell_json(c) for c in self._nb.cells]
        return self._nb

    def _read(self) -> NotebookNode:
        import nbformat
        from nbformat.v4 import new_notebook

        with self._dir() as root:
            if root.kind(self.path.name) is None:
                return new_notebook(
                    metadata={"kernelspec": _KERNELSPEC, "language_info": {"name": "python"}}
                )
            try:
                text = root.read_text(self.path.name, max_bytes=_MAX_NOTEBOOK_BYTES)
                _check_cell_count(text)
                return nbformat.reads(text, as_version=4)
            except (
                _TooManyCells,
                RecursionError,  # nesting deeper than json decodes
                UnsafePath,
                json.JSONDecodeError,
                nbformat.reader.NotJSONError,
                nbformat.ValidationError,
                UnicodeDecodeError,
            ) as exc:
                aside = self._aside_name(root)
                logger.warning(
                    "%s is not a readable notebook (%s); moved to %s", self.path.name, exc, aside
                )
                root.rename(self.path.name, aside)
        return self._read()

    def _aside_name(self, root: SafeDir) -> str:
        n = 1
        while root.kind(candidate := f"{self.path.stem}.corrupt-{n}.ipynb") is not None:
            n += 1
        return candidate

    @property
    def next_cell_number(self) -> int:
        """1-based number the next code cell will have (stable across kernel restarts)."""
        return sum(1 for c in self._notebook().cells if c.cell_type == "code") + 1

    def append_code(
        self, source: str, outputs: list[NotebookNode], execution_count: int | None
    ) -> None:
        """Append one executed code cell with its outputs and save."""
        import nbformat
        from nbformat.v4 import new_code_cell

        cell = new_code_cell(source=source, outputs=outputs, execution_count=execution_count)
        nbformat.validate(cell, ref="code_cell", version=4)
        self._append(cell)

    def append_note(self, text: str) -> None:
        """Append a markdown note (kernel restarts and similar events)."""
        from nbformat.v4 import new_markdown_cell

        self._append(new_markdown_cell(text))

    def _append(self, cell: NotebookNode) -> None:
        nb = self._notebook()
        nb.cells.append(cell)
        self._cells_json.append(_cell_json(cell))
        self._write(nb)

    def _write(self, nb: NotebookNode) -> None:
        head = {k: v for k, v in nb.items() if k != "cells"}
        for key in ("orig_nbformat", "orig_nbformat_minor", "signature"):
            head.get("metadata", {}).pop(key, None)
        cells = "[\n" + ",\n".join(self._cells_json) + "\n ]" if self._cells_json else "[]"
        text = _dumps({"cells": [], **head}).replace(_CELLS_PLACEHOLDER, f'"cells": {cells}', 1)
        with self._dir() as root:  # random O_EXCL temp name, renamed over: never through a link
            root.write_text(self.path.name, text + "\n")
        self._stamp = self._file_stamp()

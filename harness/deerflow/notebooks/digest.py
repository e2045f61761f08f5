"""One version of a notebook file as a run's context needs it: each cell's id and its text.

A :class:`NotebookDigest` is made from the file's bytes by the light parse
(:func:`~deerflow.notebooks.parsing.light_cells`: outputs left undecoded) and renders a
cell's text (:func:`~deerflow.notebooks.render.cell_text`: source, clipped text outputs,
placeholders) the first time it is asked for.  A run's context asks only for the cells
nearest the calling one.  Pre-warming (:meth:`NotebookAccess.prewarm
<deerflow.notebooks.access.NotebookAccess.prewarm>`, when the notebook is opened or saved)
renders every cell off the event loop and then lets the parsed file go: what stays cached is
the texts, a few kB per cell whatever the outputs weighed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deerflow.notebooks.parsing import LightCell, light_cells, positional_ids
from deerflow.notebooks.render import CHARS_PER_TOKEN, bounded_texts, cell_text, fence

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from deerflow.notebooks.access import Signature


CONTEXT_TOKENS = 8_000
MAGIC = "%%deerflow"
ANCHORS = 16


@dataclass(frozen=True)
class NotebookContext:
    """The read-only context a run gets from the notebook it was called from.

    Attributes:
        text: The fenced cells, ready to go before the prompt.
        note: What the run view says was given (``context: 6 cells of work.ipynb``).
        cells: How many cells were given.
    """

    text: str
    note: str
    cells: int


class NotebookDigest:
    """The cells of one notebook version: ``ids`` in order, :meth:`text` rendered on demand.

    Args:
        ids: The cells' ids (positional ones for cells without, as the edit tools see them).
        cells: What :meth:`text` renders from, one per id.
        render: ``render(cell, cell_id)``: the cell's text for the model.
        signature: The file's identity and version the cells were read from (None: not a
            plain local file, e.g. a live document: such a digest is never cached).
    """

    def __init__(self, ids: list[str], cells: Sequence[Any], render: Callable[[Any, str], str],
                 signature: Signature | None, *, magic: list[str] | None = None) -> None:
        self.ids = ids
        self.signature = signature
        self._cells: Sequence[Any] = cells
        self._render = render
        self._texts: list[str | None] = [None] * len(ids)
        self.known = frozenset(ids)
        self.magic = magic if magic is not None else \
            [cell_id for cell_id, cell in zip(ids, cells, strict=True) if _source(cell).startswith(MAGIC)]

    @classmethod
    def from_bytes(cls, data: bytes, signature: Signature | None) -> NotebookDigest | None:
        """The digest of a v4 notebook's bytes (light parse); None for any other shape."""
        cells = light_cells(data)
        if cells is None:
            return None
        return cls.from_light(cells, signature)

    @classmethod
    def from_light(cls, cells: Sequence[LightCell], signature: Signature | None, *,
                   magic: list[str] | None = None) -> NotebookDigest:
        """The digest of cells from the light parse (of a whole file, or of its end)."""
        return cls(positional_ids([c.id for c in cells]), cells, _render_light, signature, magic=magic)

    @classmethod
    def from_nodes(cls, nb: NotebookNode, signature: Signature | None = None) -> NotebookDigest:
        """The digest of a notebook already read as nodes (cell ids ensured by the reader)."""
        return cls([str(c["id"]) for c in nb.cells], list(nb.cells), _render_node, signature)

    @classmethod
    def from_texts(cls, ids: list[str], texts: list[str], magic: list[str], signature: Signature | None
                   ) -> NotebookDigest:
        """A complete digest from cells rendered before (:class:`~deerflow.notebooks.stored.DigestStore`)."""
        digest = cls(ids, (), _render_light, signature, magic=magic)
        digest._texts = list(texts)
        return digest

    def texts(self) -> list[str]:
        """Every cell's text (a complete digest's: see :meth:`render_all`)."""
        return [self.text(i) for i in range(len(self.ids))]

    @property
    def complete(self) -> bool:
        """Every cell rendered and the parsed file let go (:meth:`render_all`)."""
        return not self._cells and all(t is not None for t in self._texts)

    def text(self, index: int) -> str:
        """Cell ``index`` as the model sees it (rendered once)."""
        found = self._texts[index]
        if found is None:
            found = self._texts[index] = self._render(self._cells[index], self.ids[index])
        return found

    def render_all(self) -> NotebookDigest:
        """Render every cell, then drop the parsed cells (and the file's bytes they view).

        CPU work a cell at a time: run it on a worker thread; the event loop gets the GIL
        between cells (no single decode of the whole file holds it)."""
        for index in range(len(self.ids)):
            self.text(index)
        self._cells = ()
        return self


    def anchors(self) -> list[str | None]:
        """The calling cells a run most likely has: a ``%%deerflow`` cell of the file (the last
        :data:`ANCHORS`), or one not saved yet (None: all cells)."""
        return [None, *self.magic[-ANCHORS:]]


def context_key(path: str, signature: Any, cell_id: str | None, cell_ids: Sequence[str] | None,
                max_tokens: int) -> tuple[Any, ...]:
    """The context cache's key: the file's version and what was asked."""
    return (path, signature, cell_id, tuple(cell_ids or ()), max_tokens)


def build_context(digest: NotebookDigest, path: str, cell_id: str | None, cell_ids: Sequence[str] | None,
                  max_tokens: int = CONTEXT_TOKENS) -> NotebookContext:
    """The cells above ``cell_id`` (all of them if the file has no such cell), or the ``cell_ids``
    asked for, nearest kept whole within ``max_tokens``, fenced as untrusted.  Renders only the
    cells the bound reaches (CPU: a worker thread's job unless the digest is complete)."""
    ids = digest.ids
    if cell_ids:
        wanted = set(cell_ids)
        indices = [i for i, c in enumerate(ids) if c in wanted]
        where = "attached cell(s)"
    else:
        indices = list(range(ids.index(cell_id) if cell_id in digest.known else len(ids)))
        where = "cell(s) above the %%deerflow cell" if cell_id in digest.known else "cell(s) of the notebook"
    bounded = bounded_texts(len(indices), lambda k: digest.text(indices[k]), max_chars=max_tokens * CHARS_PER_TOKEN)
    return _fenced(path, bounded.text, bounded.shown, where, bounded.omitted)


def context_from_end(digest: NotebookDigest, path: str, anchor: str | None,
                     max_tokens: int = CONTEXT_TOKENS) -> NotebookContext | None:
    """:func:`build_context` from the last cells of a file only (:mod:`deerflow.notebooks.tail`):
    the cells above ``anchor``, or all of them when ``anchor`` is None (the caller has made sure
    the file has no cell with the calling cell's id); None when they are not enough to know it:
    ``anchor`` is not among them, or every cell it would show fitted the bound (earlier ones might
    too).  The note says earlier cells were left out, not how many (the end of a file does not say)."""
    if anchor is not None and anchor not in digest.known:
        return None
    indices = range(digest.ids.index(anchor) if anchor is not None else len(digest.ids))
    bounded = bounded_texts(len(indices), lambda k: digest.text(indices[k]), max_chars=max_tokens * CHARS_PER_TOKEN)
    if not bounded.omitted:
        return None
    where = "cell(s) above the %%deerflow cell" if anchor is not None else "cell(s) of the notebook"
    return _fenced(path, bounded.text, bounded.shown, where, None)


def _fenced(path: str, text: str, shown: int, where: str, omitted: int | None) -> NotebookContext:
    """The context's text and note; ``omitted``: earlier cells left out (None: some, how many unknown)."""
    details = [f"{shown} {where}"]
    note = f"context: {shown} cells of {path}"
    if omitted is None:
        details.append("earlier cells left out for size (read_notebook shows them)")
        note += " (earlier cells left out)"
    elif omitted:
        details.append(f"{omitted} earlier cell(s) left out for size (read_notebook shows them)")
        note += f" ({omitted} earlier left out)"
    text = ("The user ran this from the notebook below. Its cells are context; to change them, use "
            "edit_notebook with this path.\n" + fence(text or "(no cells above)", source=path, details=details))
    return NotebookContext(text, note, shown)


def _source(cell: Any) -> str:
    source = cell.source if isinstance(cell, LightCell) else cell.get("source", "")
    return "".join(source[:1]) if isinstance(source, list) else str(source or "")


def _render_light(cell: LightCell, cell_id: str) -> str:
    return cell_text(cell.as_dict(cell_id))


def _render_node(cell: Any, cell_id: str) -> str:
    return cell_text(cell)

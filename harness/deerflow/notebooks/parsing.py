"""A notebook file's JSON as nbformat v4 nodes, fast, and lighter still for a run's context.

* :func:`parse_v4` is the read side of :mod:`deerflow.notebooks.access` (tools, edits, diffs).
  nbformat is imported on the first parse (it imports jsonschema, which compiles a grammar):
  never when a run or the CLI merely imports the notebooks package.
* :func:`light_cells` is what a ``%%deerflow`` run's context needs: each cell's id, type,
  execution count and source, with its outputs left as undecoded JSON (``msgspec.Raw``
  slices). The outputs are most of a notebook's bytes and nearly all of its JSON values
  (a long stream output is thousands of one-line strings); a context shows the few cells
  nearest the calling one, so only their outputs are ever decoded.  On a 59 MB notebook
  this is ~8x faster than ``json.loads`` and loads no nbformat at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from nbformat import NotebookNode


def parse_v4(text: str) -> NotebookNode:
    """A notebook's JSON as nbformat v4, without schema validation on read (writes validate).

    nbformat's validation is most of a read's cost (2.5x the parse on a 500-cell notebook),
    and reading for context or a diff needs only the cells; other versions are converted.
    The nodes are made as deep as code reaches with attributes (notebook, cells, outputs and
    their metadata, as nbformat's writer does): ``from_dict`` would also walk every line of
    every output, 10x the cost of this on a 59 MB notebook.
    """
    import nbformat

    data = json.loads(text)
    if isinstance(data, dict) and data.get("nbformat") == 4 and isinstance(data.get("cells"), list) \
            and all(isinstance(c, dict) for c in data["cells"]):
        return _nodes(data)
    return nbformat.reads(text, as_version=4)


def _nodes(data: dict[str, Any]) -> NotebookNode:
    from nbformat import NotebookNode  # loaded by the caller already: on first read, not on import

    nb = NotebookNode(data)
    nb["metadata"] = NotebookNode(data.get("metadata") or {})
    cells = []
    for raw in data["cells"]:
        cell = NotebookNode(raw)
        cell["metadata"] = NotebookNode(raw.get("metadata") or {})
        if isinstance(raw.get("outputs"), list):
            cell["outputs"] = [NotebookNode(o) if isinstance(o, dict) else o for o in raw["outputs"]]
        cells.append(cell)
    nb["cells"] = cells
    return nb


def positional_ids(ids: Sequence[Any]) -> list[str]:
    """The cells' ids, a missing one (nbformat < 4.5) replaced by ``cell-N`` (its 1-based place),
    suffixed with ``x`` until unique: the ids :func:`~deerflow.notebooks.access.ensure_cell_ids`
    gives, so a context and the edit tools name the same cells."""
    taken = {i for i in ids if i}
    named = []
    for index, given in enumerate(ids):
        if not given:
            given = f"cell-{index + 1}"
            while given in taken:
                given += "x"
            taken.add(given)
        named.append(str(given))
    return named


class LightCell(msgspec.Struct):
    """A cell as a context needs it; ``outputs`` are undecoded JSON (see :func:`output_values`)."""

    cell_type: str = ""
    id: str | None = None
    source: str | list[str] = ""
    execution_count: int | None = None
    outputs: list[msgspec.Raw] = []

    def as_dict(self, cell_id: str) -> dict[str, Any]:
        """The cell as :func:`~deerflow.notebooks.render.cell_text` takes it, its outputs decoded now."""
        return {"id": cell_id, "cell_type": self.cell_type, "source": self.source,
                "execution_count": self.execution_count, "outputs": output_values(self.outputs)}


class _LightNotebook(msgspec.Struct):
    nbformat: int
    cells: list[LightCell]


_DECODER = msgspec.json.Decoder(_LightNotebook)
_ANY = msgspec.json.Decoder()


def light_cells(data: bytes) -> list[LightCell] | None:
    """The cells of a v4 notebook's JSON, outputs undecoded; None when the file is not that shape
    (another nbformat version, a field of an unexpected type, not JSON): the caller then reads
    it with :func:`parse_v4`, which converts or names the error.

    The ``Raw`` outputs are views of ``data``: the buffer lives as long as any cell does.
    """
    try:
        notebook = _DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return notebook.cells if notebook.nbformat == 4 else None


def output_values(outputs: Sequence[msgspec.Raw]) -> list[Any]:
    """Decode undecoded outputs (an output that is not JSON object is kept as the renderer's
    placeholder input: an empty dict)."""
    values = []
    for raw in outputs:
        try:
            value = _ANY.decode(raw)
        except msgspec.DecodeError:
            value = {}
        values.append(value if isinstance(value, dict) else {})
    return values

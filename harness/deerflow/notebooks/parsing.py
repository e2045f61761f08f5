"""A notebook file's JSON as nbformat v4 nodes, fast: the read side of :mod:`deerflow.notebooks.access`.

nbformat is imported on the first parse (it imports jsonschema, which compiles a grammar):
never when a run or the CLI merely imports the notebooks package.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

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

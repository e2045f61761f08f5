"""Cell edits as data: plan them, diff them, replay them against a fresh copy, invert them.

An ``edit_notebook`` call is a list of :class:`CellOp`.  :func:`plan_edits`
applies them to a *copy* of the notebook and returns one :class:`CellChange`
per operation, holding the whole cell before and after.  Nothing is written
while planning, and any bad operation fails the whole call (no partial write).

The same changes then serve three purposes:

* :func:`cell_diff` shows them as a unified diff per cell (the proposal);
* :func:`replay` applies them to the notebook *as it is now*, refusing when a
  target cell changed since the plan (the user kept working) — that is how a
  proposal is applied later and how an auto-applied edit is written;
* :func:`invert` turns them into the changes that undo them.
"""

from __future__ import annotations

import copy
import difflib
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from deerflow.notebooks.access import NotebookError

if TYPE_CHECKING:  # nbformat (jsonschema's grammar) loads when a cell is first made, not on import
    from nbformat import NotebookNode

MAX_OPERATIONS = 50
_LISTED = 15


class CellOp(BaseModel):
    """One operation of ``edit_notebook`` (the contract's fields)."""

    model_config = ConfigDict(extra="forbid")

    op: Literal["insert", "replace", "delete"]
    cell_id: str | None = Field(None, description="replace/delete: the target cell; insert: optional new id")
    after: str | None = Field(None, description="insert: the cell id to insert after ('' = at the top; "
                              "omitted = at the end)")
    cell_type: Literal["code", "markdown", "raw"] | None = None
    source: str | None = None


@dataclass
class CellChange:
    """One cell's change: the whole cell before and after (None when absent), and where it sits.

    Attributes:
        op: ``insert``, ``replace`` or ``delete``.
        cell_id: The cell concerned.
        before: The cell before (None for an insert).
        after: The cell after (None for a delete).
        anchor: The id of the cell just above it (None: first cell) — where an insert goes
            and where a deleted cell comes back on undo.
    """

    op: str
    cell_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    anchor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellChange:
        return cls(op=data["op"], cell_id=data["cell_id"], before=data.get("before"), after=data.get("after"),
                   anchor=data.get("anchor"))


def source_of(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return ""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _index(nb: NotebookNode) -> dict[str, int]:
    return {c["id"]: i for i, c in enumerate(nb.cells)}


def _unknown(cell_id: Any, nb: NotebookNode) -> NotebookError:
    ids = [c["id"] for c in nb.cells]
    shown = ", ".join(ids[:_LISTED]) + (" …" if len(ids) > _LISTED else "")
    return NotebookError(f"unknown cell id {cell_id!r}; the notebook's cells are: {shown or '(none)'}",
                         code="unknown_cell")


def _new_cell(cell_type: str, source: str, cell_id: str) -> dict[str, Any]:
    import nbformat

    maker = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
             "raw": nbformat.v4.new_raw_cell}[cell_type]
    cell = maker(source=source)
    cell["id"] = cell_id
    return dict(cell)


def parse_ops(operations: Any) -> list[CellOp]:
    """Validate the model's ``operations`` (a list of dicts) into :class:`CellOp`."""
    if not isinstance(operations, list) or not operations:
        raise NotebookError("operations must be a non-empty list of {op, cell_id, after, cell_type, source}",
                            code="invalid_operation")
    if len(operations) > MAX_OPERATIONS:
        raise NotebookError(f"at most {MAX_OPERATIONS} operations per call", code="invalid_operation")
    ops = []
    for n, raw in enumerate(operations, 1):
        try:
            ops.append(CellOp.model_validate(raw))
        except ValueError as exc:
            first = str(exc).splitlines()
            raise NotebookError(f"operation {n} is invalid: {' '.join(first[1:3]).strip() or first[0]}",
                                code="invalid_operation") from None
    return ops


def plan_edits(nb: NotebookNode, ops: list[CellOp]) -> tuple[NotebookNode, list[CellChange]]:
    """Apply ``ops`` in order to a copy of ``nb``; the new notebook and one change per op.

    Inserts of one call aimed at the same place (the same ``after``, or the top)
    land in the order given: the second goes below the first, not above it, as
    anyone listing cells top to bottom means.
    """
    work = copy.deepcopy(nb)
    placed: dict[str, str] = {}  # where an insert was aimed -> the last cell inserted there
    changes = []
    for n, op in enumerate(ops, 1):
        aimed = op.after
        if op.op == "insert" and aimed is not None and placed.get(aimed) in _index(work):
            op = op.model_copy(update={"after": placed[aimed]})
        change = _plan_one(work, op, n)
        if op.op == "insert" and aimed is not None:
            placed[aimed] = change.cell_id
        changes.append(change)
    return work, changes


HANDOVER_KEY = "deerflow"


def handover_mark(cell: dict[str, Any]) -> dict[str, Any] | None:
    """The hand-over mark of a cell the user inserted from a run view, if any."""
    mark = (cell.get("metadata") or {}).get(HANDOVER_KEY)
    return mark.get("handover") if isinstance(mark, dict) and isinstance(mark.get("handover"), dict) else None


def handover_slot(nb: NotebookNode, below: str, *, run_id: str, number: int | None) -> str:
    """The cell a handed-over agent cell goes after: ``below`` (the ``%%deerflow`` cell), past the
    cells already handed over there, stopping before a later cell of the same run.

    So cells inserted one click at a time (in any order) read in the agent's order, and
    a later run's cells come after an earlier run's.
    """
    where = _index(nb)
    if below not in where:
        raise _unknown(below, nb)
    slot = below
    for cell in nb.cells[where[below] + 1:]:
        mark = handover_mark(cell)
        if mark is None or mark.get("below") != below:
            break
        later = isinstance(mark.get("cell"), int) and number is not None and mark["cell"] > number
        if mark.get("run") == run_id and later:
            break
        slot = cell["id"]
    return slot


def _plan_one(nb: NotebookNode, op: CellOp, n: int) -> CellChange:
    where = _index(nb)
    if op.op == "insert":
        if op.source is None:
            raise NotebookError(f"operation {n} (insert) needs a source", code="invalid_operation")
        if op.after and op.after not in where:
            raise _unknown(op.after, nb)
        new_id = op.cell_id or uuid.uuid4().hex[:8]
        if new_id in where:
            raise NotebookError(f"operation {n}: a cell {new_id!r} already exists; omit cell_id for a new one",
                                code="invalid_operation")
        anchor = (nb.cells[-1]["id"] if nb.cells else None) if op.after is None else (op.after or None)
        cell = _new_cell(op.cell_type or "code", op.source, new_id)
        change = CellChange("insert", new_id, None, cell, anchor)
    else:
        if not op.cell_id:
            raise NotebookError(f"operation {n} ({op.op}) needs the cell_id of its target", code="invalid_operation")
        if op.cell_id not in where:
            raise _unknown(op.cell_id, nb)
        i = where[op.cell_id]
        before = copy.deepcopy(dict(nb.cells[i]))
        anchor = nb.cells[i - 1]["id"] if i else None
        if op.op == "delete":
            change = CellChange("delete", op.cell_id, before, None, anchor)
        else:
            if op.source is None and op.cell_type is None:
                raise NotebookError(f"operation {n} (replace) needs a source", code="invalid_operation")
            kind = op.cell_type or before["cell_type"]
            source = source_of(before) if op.source is None else op.source
            after = _new_cell(kind, source, op.cell_id)
            if kind == before["cell_type"]:
                after["metadata"] = copy.deepcopy(before.get("metadata", {}))
            change = CellChange("replace", op.cell_id, before, after, anchor)
    _apply(nb, change)
    return change


def _apply(nb: NotebookNode, change: CellChange) -> None:
    import nbformat

    where = _index(nb)
    if change.op == "insert":
        pos = 0 if change.anchor is None else where[change.anchor] + 1
        nb.cells.insert(pos, nbformat.from_dict(copy.deepcopy(change.after)))
    elif change.op == "delete":
        del nb.cells[where[change.cell_id]]
    else:
        nb.cells[where[change.cell_id]] = nbformat.from_dict(copy.deepcopy(change.after))


def replay(nb: NotebookNode, changes: list[CellChange]) -> NotebookNode:
    """Apply ``changes`` to a copy of ``nb`` as it is now, if every target is as the plan saw it.

    Raises:
        NotebookError: ``conflict`` — a target cell was edited, removed or added meanwhile.
    """
    work = copy.deepcopy(nb)
    for change in changes:
        where = _index(work)
        if change.op == "insert":
            if change.cell_id in where:
                raise NotebookError(f"cell {change.cell_id!r} already exists: the notebook changed since the "
                                    "edit was made", code="conflict")
            if change.anchor is not None and change.anchor not in where:
                raise NotebookError(f"cell {change.anchor!r} (where the new cell goes) is gone: the notebook "
                                    "changed since the edit was made", code="conflict")
        else:
            if change.cell_id not in where:
                raise NotebookError(f"cell {change.cell_id!r} is gone: the notebook changed since the edit "
                                    "was made", code="conflict")
            current, before = work.cells[where[change.cell_id]], change.before
            assert before is not None, "only an insert has no cell before"
            if source_of(current) != source_of(before) or current["cell_type"] != before["cell_type"]:
                raise NotebookError(f"cell {change.cell_id!r} was edited since the edit was made; nothing was "
                                    "changed", code="conflict")
        _apply(work, change)
    return work


def invert(changes: list[CellChange]) -> list[CellChange]:
    """The changes that undo ``changes`` (applied in reverse order)."""
    flipped = {"insert": "delete", "delete": "insert", "replace": "replace"}
    return [CellChange(flipped[c.op], c.cell_id, c.after, c.before, c.anchor) for c in reversed(changes)]


def cell_diff(change: CellChange, path: str) -> str:
    """A unified diff of one cell's source (and a note when its type changes)."""
    old, new = source_of(change.before), source_of(change.after)
    label = f"{path} cell {change.cell_id}"
    lines = list(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile="/dev/null" if change.before is None else f"a/{label}",
        tofile="/dev/null" if change.after is None else f"b/{label}", lineterm=""))
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if change.before and change.after and change.before["cell_type"] != change.after["cell_type"]:
        text += f"(cell type {change.before['cell_type']} → {change.after['cell_type']})\n"
    return text or f"(cell {change.cell_id}: no change to its source)\n"

"""What the tools, the magics and the API do with the user's notebooks.

Each function takes the host's :class:`~deerflow.notebooks.access.NotebookAccess`
and the thread's :class:`~deerflow.notebooks.records.EditRecords`; none keeps
state of its own.  Edits are planned against the notebook as read, and
written (now, or when a proposal is applied) by replaying the per-cell changes
against the notebook *as it is then*: a cell the user edited meanwhile turns
the write into a one-line conflict, never a silent overwrite.
"""

from __future__ import annotations

from typing import Any

from deerflow.notebooks.access import NotebookAccess, NotebookError, Signature, check_notebook_path
from deerflow.notebooks.digest import (
    CONTEXT_TOKENS,
    NotebookContext,
    NotebookDigest,
    build_context,
    context_key,
)
from deerflow.notebooks.edits import (
    HANDOVER_KEY,
    CellChange,
    cell_diff,
    handover_slot,
    invert,
    parse_ops,
    plan_edits,
    replay,
)
from deerflow.notebooks.handover import localize
from deerflow.notebooks.offdisk import off_disk
from deerflow.notebooks.records import EditRecord, EditRecords
from deerflow.notebooks.render import (
    bounded_cells,
    cell_text,
    fence,
)

READ_MAX_CHARS = 40_000
EDIT_MODES = ("propose", "apply")


async def read_cells(access: NotebookAccess, path: str, cell_ids: list[str] | None = None,
                     *, max_chars: int = READ_MAX_CHARS) -> tuple[str, dict[str, Any]]:
    """``read_notebook``: the cells (all, or ``cell_ids`` in notebook order), fenced as untrusted."""
    path = check_notebook_path(path)
    nb = (await access.read(path)).nb
    cells = list(nb.cells)
    if cell_ids:
        known = {c["id"] for c in cells}
        missing = [c for c in cell_ids if c not in known]
        if missing:
            shown = ", ".join(c["id"] for c in cells[:15])
            raise NotebookError(f"unknown cell id(s) {', '.join(map(repr, missing))}; the notebook's cells "
                                f"are: {shown}", code="unknown_cell")
        cells = [c for c in cells if c["id"] in set(cell_ids)]
    body = "\n\n".join(cell_text(c) for c in cells)
    details = [f"{len(cells)} of {len(nb.cells)} cells"]
    if len(body) > max_chars:
        bounded = bounded_cells(cells, max_chars=max_chars)
        body = bounded.text
        details.append(f"the first {bounded.omitted} cells are left out for size: ask for them by cell_ids")
    artifact = {"status": "ok", "path": path, "cells": [{"id": c["id"], "cell_type": c["cell_type"]} for c in cells]}
    return fence(body, source=path, details=details), artifact


async def edit_cells(access: NotebookAccess, records: EditRecords, path: str, operations: Any, *,
                     run_id: str, mode: str) -> tuple[str, dict[str, Any]]:
    """``edit_notebook``: plan the operations; propose them (default) or write them with an undo record."""
    path = check_notebook_path(path)
    ops = parse_ops(operations)
    current = await access.read(path)
    _, changes = plan_edits(current.nb, ops)  # every op checked before anything is written
    diff = "".join(cell_diff(c, path) for c in changes)
    record = EditRecord(id=records.new_id(), run_id=run_id, path=path, changes=changes, diff=diff)
    if mode != "apply":
        await off_disk(records.save_proposal, record, what="saving the proposal")
        text = (f"Proposed {len(changes)} cell edit(s) to {path} (proposal {record.id}); nothing is changed "
                f"until the user applies it (%deerflow apply).\n\n{diff}")
        return text, {**record.summary(), "status": "proposed", "proposal_id": record.id}
    await _write(access, record)
    await off_disk(records.save_applied, record, what="saving the undo record")
    text = f"Applied {len(changes)} cell edit(s) to {path} ({access.note_for(path)}).\n\n{diff}"
    return text, {**record.summary(), "status": "applied"}


async def insert_handover(access: NotebookAccess, records: EditRecords, path: str, operations: Any, *,
                          run_id: str, number: int | None = None, vfs: Any = None,
                          thread_id: str = "") -> dict[str, Any]:
    """The user's hand-over: the agent's cells inserted below the ``%%deerflow`` cell, in the agent's order.

    Every operation is an insert ``after`` that cell.  They go below it *and* below the
    cells already handed over there (:func:`~deerflow.notebooks.edits.handover_slot`),
    each marked in its metadata (``deerflow.handover``: the cell it was inserted below, the
    run, the agent cell's ``number``) so the next click finds its place.  Read, place and
    write happen under the notebook's lock: two quick clicks cannot take the same slot.

    Given the thread's ``vfs``, the cells' ``/mnt/user-data`` paths are rewritten to a folder
    beside the notebook and the files they name copied there
    (:func:`~deerflow.notebooks.handover.localize`), so the cell runs in the user's kernel.
    """
    path = check_notebook_path(path)
    ops = parse_ops(operations)
    below = {op.after for op in ops}
    if any(op.op != "insert" for op in ops) or len(below) != 1 or not next(iter(below)):
        raise NotebookError("insert: every operation inserts after the same cell (the %%deerflow cell)",
                            code="invalid_operation")
    anchor = str(next(iter(below)))
    async with access.lock(path):
        current = await access.read(path)
        slot = handover_slot(current.nb, anchor, run_id=run_id, number=number)
        moved = None
        if vfs is not None:
            moved = await localize(access, vfs, path, thread_id, [op.source or "" for op in ops])
            ops = [op.model_copy(update={"source": src}) for op, src in zip(ops, moved.sources, strict=True)]
        _, changes = plan_edits(current.nb, [op.model_copy(update={"after": slot}) for op in ops])
        for i, change in enumerate(changes):
            mark = {"below": anchor, "run": run_id, **({"cell": number + i} if number is not None else {})}
            assert change.after is not None, "an insert has the cell it inserts"
            change.after.setdefault("metadata", {})[HANDOVER_KEY] = {"handover": mark}
        await access.write(path, replay(current.nb, changes))
    record = EditRecord(id=records.new_id(), run_id=run_id, path=path, changes=changes,
                        diff="".join(cell_diff(c, path) for c in changes))
    await off_disk(records.save_applied, record, what="saving the undo record")
    files = moved.note() if moved is not None else ""
    return {**record.summary(), "status": "applied", "note": access.note_for(path), "files": files}


async def _write(access: NotebookAccess, record: EditRecord, changes: list[CellChange] | None = None) -> None:
    """Replay ``changes`` (default: the record's) on the notebook as it is now, then save it."""
    async with access.lock(record.path):
        fresh = await access.read(record.path)
        await access.write(record.path, replay(fresh.nb, record.changes if changes is None else changes))


async def apply_proposal(access: NotebookAccess, records: EditRecords, proposal_id: str | None) -> dict[str, Any]:
    """Write a pending proposal (target cells must be unchanged) and keep its undo record."""
    proposal = await off_disk(records.proposal, proposal_id, what="reading the proposal")
    await _write(access, proposal)
    proposal.status = "applied"
    await off_disk(records.save_proposal, proposal, what="saving the proposal")
    applied = EditRecord(id=proposal.id, run_id=proposal.run_id, path=proposal.path, changes=proposal.changes,
                         diff=proposal.diff)
    await off_disk(records.save_applied, applied, what="saving the undo record")
    return {**proposal.summary(), "note": access.note_for(proposal.path)}


def discard_proposal(records: EditRecords, proposal_id: str | None) -> dict[str, Any]:
    proposal = records.proposal(proposal_id)
    proposal.status = "discarded"
    records.save_proposal(proposal)
    return proposal.summary()


async def undo_run(access: NotebookAccess, records: EditRecords, run_id: str | None = None) -> dict[str, Any]:
    """Restore the cells a run's applied edits changed (default: the latest run with live edits)."""
    live = [(name, r) for name, r in await off_disk(records.applied, what="reading the undo records") if r.status == "applied"]
    if not live:
        raise NotebookError("no applied notebook edits to undo on this thread", code="not_found")
    run_id = run_id or live[-1][1].run_id
    mine = [(name, r) for name, r in live if r.run_id == run_id]
    if not mine:
        raise NotebookError(f"run {run_id} has no applied notebook edits to undo", code="not_found")
    for name, record in reversed(mine):
        await _write(access, record, invert(record.changes))
        await off_disk(records.mark_undone, name, record, what="saving the undo record")
    paths = sorted({r.path for _, r in mine})
    return {"status": "undone", "run_id": run_id, "paths": paths,
            "cells": [c.cell_id for _, r in mine for c in r.changes],
            "note": "; ".join(sorted({access.note_for(p) for p in paths}))}


async def notebook_context(access: NotebookAccess, path: str, *, cell_id: str | None = None,
                           cell_ids: list[str] | None = None, max_tokens: int = CONTEXT_TOKENS) -> NotebookContext:
    """The cells above ``cell_id`` (all cells if it is not saved yet), nearest kept whole, fenced.

    ``cell_ids`` (cells attached to a chat message) gives those cells instead, in notebook order;
    ids the notebook no longer has are skipped (the user may have deleted them since).

    What it costs a run (issue 26: under 20 ms): a context built from the same file (same
    signature, see :func:`~deerflow.notebooks.cache.file_signature`) is reused; a notebook the
    server pre-warmed when it was opened or saved (:meth:`NotebookAccess.prewarm`) has its
    cells' texts ready; otherwise the file is read with the light parse (outputs left undecoded)
    and only the cells the context shows are rendered, off the event loop.
    """
    path = check_notebook_path(path)
    signature = await access.signature(path)
    if signature is not None:  # ready, or read from the end: a pre-warm in flight is not waited for
        found = await _prepared(access, path, signature, cell_id, cell_ids, max_tokens)
        if found is None and not cell_ids:
            found = await access.context_from_end(path, signature, cell_id, max_tokens)
            if found is not None:
                access.contexts.put(context_key(path, signature, cell_id, None, max_tokens), found)
                access.prewarm_soon(path)  # the whole file read and kept in the background, for the next run
        if found is not None:
            return found
    waited = await access.warming(path)  # a pre-warm in flight finishes first: the file is not parsed twice
    if waited and signature is not None and (found := await _prepared(access, path, signature, cell_id, cell_ids,
                                                           max_tokens)) is not None:
        return found
    digest = await access.digest(path)
    built = await off_disk(build_context, digest, path, cell_id, cell_ids, max_tokens,
                           what=f"rendering the notebook {path!r}", large=True)
    access.keep_soon(path, digest)  # the rest rendered in the background, kept for the next run
    return _remember(access, path, digest, built, cell_id, cell_ids, max_tokens)


async def _prepared(access: NotebookAccess, path: str, signature: Signature, cell_id: str | None,
                    cell_ids: list[str] | None, max_tokens: int) -> NotebookContext | None:
    """The context built before from this version, or built now from its cells rendered before
    (a pre-warm, or any process's, kept on disk); None: the file must be read."""
    if (cached := access.contexts.get(context_key(path, signature, cell_id, cell_ids, max_tokens))) is not None:
        return cached  # the same file as last time (or pre-built by the pre-warm): no parse
    warm = access.digests.get((path, signature)) or await access.stored_digest(path, signature)
    if warm is None:
        return None
    anchor = cell_id if cell_id in warm.known else None  # a calling cell not saved yet: all cells
    found = access.contexts.get(context_key(path, signature, anchor, cell_ids, max_tokens))
    return found or _remember(access, path, warm, build_context(warm, path, anchor, cell_ids, max_tokens),
                              anchor, cell_ids, max_tokens)


def _remember(access: NotebookAccess, path: str, digest: NotebookDigest, built: NotebookContext,
              cell_id: str | None, cell_ids: list[str] | None, max_tokens: int) -> NotebookContext:
    """Cache ``built`` under the signature of the file it was read from (none: not cached)."""
    if digest.signature is not None:
        access.contexts.put(context_key(path, digest.signature, cell_id, cell_ids, max_tokens), built)
    return built

"""Host glue: the notebook service of a run manager, a run's notebook context, apply/undo by thread.

Hosts (the Jupyter extension, the embedded client) put a
:class:`~deerflow.notebooks.access.NotebookAccess` in ``services.notebooks``;
these helpers are what their routes and commands call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from deerflow.config.paths import ThreadPaths
from deerflow.notebooks.access import NotebookAccess, NotebookError, check_notebook_path
from deerflow.notebooks.handover import localize
from deerflow.notebooks.offdisk import off_disk
from deerflow.notebooks.records import EditRecords
from deerflow.notebooks.service import (
    apply_proposal,
    discard_proposal,
    insert_handover,
    notebook_context,
    undo_run,
)
from deerflow.persistence.offloop import DiskUnavailable
from deerflow.run_options import RunOptions
from deerflow.runtime.services import HostServices
from deerflow.sandbox.files.virtual_paths import VirtualFS

MAX_CELL_IDS = 200
ACTIONS = ("apply", "discard", "undo", "list", "insert", "localize")
MAX_SOURCES = 200


def notebook_access(access: NotebookAccess | None) -> NotebookAccess:
    """The host's notebook access (``services.notebooks``), or a one-line error saying there is none."""
    if access is None:
        raise NotebookError("the user's notebooks are not reachable from this host", code="unavailable")
    return access


async def context_for_run(services: HostServices, options: RunOptions) -> tuple[str, str] | None:
    """``(fenced context, view note)`` for a run that names its notebook; None otherwise.

    A notebook that cannot be read is not fatal to the run, nor is one whose disk does not answer
    within its deadline (:class:`DiskUnavailable`): the note says so.
    """
    ref = options.notebook_context
    if not isinstance(ref, Mapping) or not ref.get("path"):
        return None
    access = services.notebooks
    if access is None:
        return "", "context: none (notebooks are not reachable from this host)"
    cell_id = ref.get("cell_id") if isinstance(ref.get("cell_id"), str) else None
    cell_ids = [c for c in ref.get("cell_ids") or [] if isinstance(c, str)][:MAX_CELL_IDS]
    try:
        found = await notebook_context(access, str(ref["path"]), cell_id=cell_id, cell_ids=cell_ids or None)
    except (NotebookError, DiskUnavailable) as exc:
        return "", f"context: none ({exc})"
    return found.text, found.note


def with_context(prompt: str, context: str) -> str:
    """The prompt, then the notebook context (the prompt first: the thread's title comes from it)."""
    return f"{prompt}\n\n{context}" if context else prompt


class NotebookHost(Protocol):
    """What :func:`notebook_action` asks of the run manager (``deerflow.runs.manager.RunManager``)."""

    async def athread(self, thread_id: str, user_id: str) -> Any: ...

    def thread_paths(self, user_id: str, thread_id: str) -> ThreadPaths: ...

    def notebooks(self) -> NotebookAccess | None: ...


async def notebook_action(manager: NotebookHost, *, user_id: str, thread_id: str, action: str,
                          target: str | None = None, path: str | None = None,
                          operations: Any = None, number: int | None = None,
                          sources: Any = None) -> dict[str, Any]:
    """``apply``/``discard`` a proposal, ``undo`` a run's edits, or ``list`` proposals of a user's thread.

    ``localize`` rewrites ``sources`` (agent cells) for the user's kernel and copies the files they
    name beside notebook ``path`` (:func:`~deerflow.notebooks.handover.localize`), writing no cell.

    ``insert`` is the user's own hand-over (issue 22's "insert as a new cell"): ``operations``
    written to ``path`` at once with the same undo record as an applied agent edit, attributed
    to run ``target`` (so ``%deerflow undo`` takes it back); ``number`` is the agent cell's
    place in its run (1 = its first python cell), which keeps inserted cells in the agent's order.

    Raises:
        NotFoundError: unknown thread (or another user's).
        NotebookError: nothing to apply/undo, a conflict, no notebook access.
    """
    thread = await manager.athread(thread_id, user_id)  # ownership first
    paths = manager.thread_paths(user_id, thread.thread_id)
    records = EditRecords(paths.root)
    if action == "list":
        return {"proposals": [p.summary() for p in await off_disk(records.proposals, what="listing the proposals")]}
    if action == "discard":
        return await off_disk(discard_proposal, records, target, what="discarding the proposal")
    access = notebook_access(manager.notebooks())
    if action == "apply":
        return await apply_proposal(access, records, target)
    if action == "undo":
        return await undo_run(access, records, target)
    if action == "insert":
        if not path:
            raise NotebookError("insert: name the notebook (path)", code="invalid_operation")
        vfs = VirtualFS(paths)  # the agent's files, read safely
        return await insert_handover(access, records, path, operations, run_id=target or "user", number=number,
                                     vfs=vfs, thread_id=thread.thread_id)
    if action == "localize":  # %deerflow cells: the same rewrite and copies, for a cell the kernel inserts
        if not path or not isinstance(sources, list) or not all(isinstance(s, str) for s in sources) \
                or len(sources) > MAX_SOURCES:
            raise NotebookError(f"localize: name the notebook (path) and up to {MAX_SOURCES} sources",
                                code="invalid_operation")
        vfs = VirtualFS(paths)
        moved = await localize(access, vfs, check_notebook_path(path), thread.thread_id, sources)
        return {"sources": moved.sources, "files": moved.note()}
    raise NotebookError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}", code="invalid_operation")

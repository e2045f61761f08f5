"""Notebook edit proposals of a thread: list, apply, discard, undo (the request's user's threads only).

    GET  /deerflow/api/threads/{id}/notebook-edits            {"proposals": [pending...]}
    POST /deerflow/api/threads/{id}/notebook-edits/apply      {"proposal_id"?}  write a proposal
    POST /deerflow/api/threads/{id}/notebook-edits/discard    {"proposal_id"?}  drop it
    POST /deerflow/api/threads/{id}/notebook-edits/undo       {"run_id"?}       restore a run's cells
    POST /deerflow/api/threads/{id}/notebook-edits/insert     {"path", "operations", "run_id"?, "number"?}
         the user's "insert as a new cell" of the agent's code: written at once, undoable like an edit;
         ``number`` (the agent cell's place in its run) keeps several inserts in the agent's order
    POST /deerflow/api/threads/{id}/notebook-edits/localize   {"path", "sources"}
         agent cells rewritten for the user's kernel (``/mnt/user-data`` → ``deerflow_files/…``
         beside the notebook, the files they name copied there): ``{"sources", "files"}``

Without an id, the latest pending proposal (or the latest run with applied
edits) is meant.  A target cell changed since the proposal is a 409 and
nothing is written; another user's thread is a 404.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict, Field
from tornado import web

from deerflow.notebooks.host import notebook_action
from deerflow_jupyter.handlers.base import DeerFlowHandler

ACTION = r"(?P<action>apply|discard|undo|insert|localize)"


class EditTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    proposal_id: str | None = None
    run_id: str | None = None
    path: str | None = None  # insert: the notebook, and the operations written to it
    operations: list[dict[str, Any]] | None = None
    number: int | None = Field(None, ge=1, le=100_000)  # insert: the agent cell's place in its run
    sources: list[str] | None = Field(None, max_length=200)  # localize: agent cells to rewrite for the kernel


class _NotebookEditsHandler(DeerFlowHandler):
    async def act(self, thread_id: str, action: str, target: str | None = None, **payload: Any) -> None:
        found = await notebook_action(await self.manager(), user_id=self.user_id, thread_id=thread_id,
                                      action=action, target=target, **payload)  # NotebookError: error_response
        self.send_json(found)


class NotebookEditsHandler(_NotebookEditsHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        await self.act(thread_id, "list")


class NotebookEditActionHandler(_NotebookEditsHandler):
    @web.authenticated
    @authorized
    async def post(self, thread_id: str, action: str) -> None:
        await (await self.manager()).athread(thread_id, self.user_id)  # another user's thread: 404 before the body
        body = self.body(EditTarget)
        if action == "insert":
            await self.act(thread_id, action, body.run_id, path=body.path, operations=body.operations,
                           number=body.number)
            return
        if action == "localize":
            await self.act(thread_id, action, path=body.path, sources=body.sources)
            return
        await self.act(thread_id, action, body.run_id if action == "undo" else body.proposal_id)


__all__ = ["ACTION", "NotebookEditActionHandler", "NotebookEditsHandler"]

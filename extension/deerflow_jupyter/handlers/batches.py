"""Durable batches over HTTP: list, progress, owner-scoped JSONL export, cancel.

A batch belongs to the user who submitted it; another user's batch is a 404
on every route.  Results are read here (or with ``deerflow batches export``)
rather than through the lead agent's context.  Without a batch submitter
(``subagents.batches.enabled: false``) every route is a 404 saying so.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from deerflow.subagents.batches.submitter import BatchSubmitter
from deerflow_jupyter.handlers.base import DeerFlowHandler

BATCH_ID = r"(?P<batch_id>[A-Za-z0-9_-]{1,64})"


class _BatchHandler(DeerFlowHandler):
    """Every store call goes through ``submitter.store.aio`` (off the event loop; 503 when locked)."""

    async def submitter(self) -> BatchSubmitter:
        submitter = (await self.manager()).batch_submitter
        if submitter is None:
            raise web.HTTPError(404, "durable batches are not enabled on this server (subagents.batches.enabled)")
        return submitter


class BatchesHandler(_BatchHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        submitter = await self.submitter()
        self.send_json([s.to_dict() for s in await submitter.store.aio.run(submitter.list, self.user_id)])


class BatchHandler(_BatchHandler):
    @web.authenticated
    @authorized
    async def get(self, batch_id: str) -> None:
        submitter = await self.submitter()
        self.send_json((await submitter.store.aio.run(submitter.status, batch_id, self.user_id)).to_dict())


class BatchCancelHandler(_BatchHandler):
    @web.authenticated
    @authorized("write")
    async def post(self, batch_id: str) -> None:
        submitter = await self.submitter()
        self.send_json((await submitter.store.aio.run(submitter.cancel, batch_id, self.user_id)).to_dict())


class BatchExportHandler(_BatchHandler):
    """``application/x-ndjson``: one item per line, as ``deerflow batches export`` writes it."""

    @web.authenticated
    @authorized
    async def get(self, batch_id: str) -> None:
        submitter = await self.submitter()
        lines = await submitter.store.aio.run(lambda: list(submitter.export_lines(batch_id, self.user_id)))
        # (all lines read before any byte is sent: an unknown batch is still a clean 404)
        self.set_header("Content-Disposition", f'attachment; filename="{batch_id}.jsonl"')
        self.finish("".join(line + "\n" for line in lines), set_content_type="application/x-ndjson")

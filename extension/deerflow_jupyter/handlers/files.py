"""A thread's files over HTTP: uploads in, artifacts out, a zip export, per-run workspace changes.

Artifacts are untrusted content produced by the agent.  Types that a browser
would execute (HTML, SVG, XHTML, XML, JavaScript) are served as downloads
(``Content-Disposition: attachment``) with ``nosniff`` and a CSP that forbids
everything, so opening an artifact can never run script in Jupyter's origin.

File names are the agent's choice too: a download names its file with RFC 6266's
``filename*=UTF-8''…`` (percent-encoded, so any character survives) and an
ASCII ``filename="…"`` fallback with quotes, backslashes and control characters
replaced, so nothing in a name can end or inject a header.

File work runs off the event loop with a deadline (``ThreadFiles`` and, for the export's
buffer, :func:`deerflow.persistence.offloop.off_loop`): a hung disk is a 503 "try again shortly".
"""

from __future__ import annotations

import mimetypes
import tempfile
from contextlib import suppress
from dataclasses import asdict
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import quote

from jupyter_server.auth.decorator import authorized
from tornado import web

from deerflow.errors import UserError
from deerflow.persistence.offloop import DiskUnavailable, off_loop
from deerflow.sandbox.files.virtual_paths import OUTPUTS
from deerflow_jupyter.handlers.base import DeerFlowHandler

if TYPE_CHECKING:
    from deerflow.runs.thread_files import ExportFolder

ACTIVE_TYPES = frozenset({
    "text/html", "image/svg+xml", "application/xhtml+xml", "application/xml", "text/xml",
    "text/javascript", "application/javascript", "application/pdf",
})
SAFE_INLINE_PREFIXES = ("image/png", "image/jpeg", "image/gif", "image/webp", "text/plain", "text/csv",
                        "text/markdown", "application/json")


class UploadsHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        manager = await self.manager()
        self.send_json([asdict(u) for u in await manager.files.list_uploads(self.user_id, thread_id)])

    @web.authenticated
    @authorized("write")
    async def post(self, thread_id: str) -> None:
        """Multipart form (field ``file``, several allowed) or a raw body with ``?name=``.

        A refused file is an ``UploadRejected`` (422, naming it); the ones before it stay saved.
        The thread is looked up once, by ``upload_all`` (another user's thread: 404, nothing saved)."""
        manager = await self.manager()
        files: list[tuple[str, bytes | IO[bytes] | Path]] = [
            (f.filename, f.body) for f in self.request.files.get("file", [])]
        if not files:
            name = self.get_argument("name", "")
            if not name:
                await manager.athread(thread_id, self.user_id)  # another user's thread: 404, not 400
                raise web.HTTPError(400, "send a multipart 'file' field, or the raw bytes with ?name=FILENAME")
            files = [(name, self.request.body)]
        saved = await manager.files.upload_all(self.user_id, thread_id, files)
        self.send_json([asdict(u) for u in saved], status=201)


class ArtifactsHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        manager = await self.manager()
        self.send_json([asdict(a) for a in await manager.files.artifacts(self.user_id, thread_id)])


class ArtifactFileHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str, relpath: str) -> None:
        """An artifact's bytes, streamed whatever its size; anything but a regular file under
        outputs is a 404 (``ArtifactNotFound``).

        The length sent is the file's size when it was opened: a file still growing is sent as it
        was then, and one that shrinks meanwhile ends the response short (the connection closes,
        so the client sees a truncated download, never a complete-looking one)."""
        manager = await self.manager()
        with await manager.files.open_artifact(self.user_id, thread_id, f"{OUTPUTS}/{relpath}") as artifact:
            mime = mimetypes.guess_type(artifact.name)[0] or "application/octet-stream"
            self.set_header("X-Content-Type-Options", "nosniff")
            self.set_header("Content-Security-Policy", "default-src 'none'; sandbox")
            if mime in ACTIVE_TYPES or not mime.startswith(SAFE_INLINE_PREFIXES):
                self.set_header("Content-Disposition", content_disposition(artifact.name))
                mime = "application/octet-stream" if mime in ACTIVE_TYPES else mime
            self.set_header("Content-Type", mime)
            self.set_header("Content-Length", str(artifact.size))
            sent = 0
            async for chunk in artifact.chunks():
                self.write(chunk)
                await self.flush()  # one chunk in memory at a time; waits for a slow client
                sent += len(chunk)
        if sent < artifact.size:  # it shrank: close before finishing, so the response is seen as cut
            self.log.warning("artifact %s shrank while it was sent: the download was cut short", artifact.path)
            if (stream := getattr(self.request.connection, "stream", None)) is not None:
                stream.close()
        self.finish()


class ThreadExportHandler(DeerFlowHandler):
    """``GET /threads/{id}/export[?folders=outputs,workspace,uploads]``: a zip of the thread's files.

    Built by ``ThreadFiles.export`` (regular files only, nothing in the thread followed) into a
    spooled buffer of this process (memory, then an anonymous temporary file outside the thread),
    then sent in chunks.  What was left out is named in ``X-DeerFlow-Skipped`` (a count).
    """

    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        manager = await self.manager()
        folders = [f for f in self.get_argument("folders", "outputs").split(",") if f]
        if not folders or any(f not in EXPORT_FOLDERS for f in folders):
            raise UserError("folders: a comma-separated list of outputs, workspace, uploads")
        buffer = tempfile.SpooledTemporaryFile(max_size=8 << 20)  # noqa: SIM115 - closed off the loop below
        try:
            done = await manager.files.export(self.user_id, thread_id, buffer,
                                              folders=[f for f in EXPORT_FOLDERS if f in folders])
            self.set_header("Content-Type", "application/zip")
            self.set_header("Content-Disposition", content_disposition(f"{thread_id}.zip"))
            self.set_header("X-DeerFlow-Skipped", str(len(done.skipped)))
            buffer.seek(0)
            while chunk := await off_loop(buffer.read, 1 << 20, what="sending the export"):
                self.write(chunk)
                await self.flush()
        finally:  # off the loop too: a close waits for a read or write still running on an abandoned call
            with suppress(DiskUnavailable):  # then it closes when that call ends; the answer stands
                await off_loop(buffer.close, what="closing the export")
        self.finish()


EXPORT_FOLDERS: tuple[ExportFolder, ...] = ("outputs", "workspace", "uploads")


def content_disposition(name: str, *, kind: str = "attachment") -> str:
    """A ``Content-Disposition`` value for any file name (RFC 6266 with RFC 8187 ``filename*``).

    The percent-encoded ``filename*`` carries the exact name; the quoted
    ``filename`` is an ASCII stand-in for old clients, with every character
    that could end the quoted string or the header replaced by ``_``.
    """
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\%' else "_" for c in name)[:150] or "download"
    encoded = quote(name, safe="!#$&+-.^_`|~")
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"


class RunChangesHandler(DeerFlowHandler):
    """The workspace change summary and delivery receipt recorded for a run."""

    @web.authenticated
    @authorized
    async def get(self, thread_id: str, run_id: str) -> None:
        manager = await self.manager()
        record = await manager.arun_record(run_id, self.user_id, thread_id=thread_id)
        self.send_json({"run_id": run_id, "changes": record.result.get("workspace_changes"),
                        "receipt": record.result.get("receipt")})

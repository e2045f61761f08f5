"""Runs: create, stream (SSE), wait, get, cancel, join — LangGraph Platform style."""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from deerflow.errors import NotFoundError
from deerflow.persistence.store import RunRecord
from deerflow.runs.manager import RunManager, RunRequest
from deerflow.runtime import events as ev
from deerflow.runtime.live import LiveRun
from deerflow_jupyter import wire
from deerflow_jupyter.bodies import RunCreate
from deerflow_jupyter.handlers.base import DeerFlowHandler

HEARTBEAT_SECONDS = 10.0


class _RunHandler(DeerFlowHandler):
    async def start_run(self, thread_id: str, body: RunCreate) -> tuple[RunManager, LiveRun]:
        if body.assistant_id != wire.ASSISTANT_ID:
            raise web.HTTPError(404, f"unknown assistant {body.assistant_id!r}")
        manager = await self.manager()
        options = body.options()
        check_model(manager, options.model_name)
        if body.if_not_exists == "create" and await manager.find_thread(thread_id, self.user_id) is None:
            await manager.acreate_thread(self.user_id, thread_id=thread_id)
        request = RunRequest(prompt=body.prompt(), thread_id=thread_id, user_id=self.user_id,
                             options=options)
        return manager, await manager.start(request)

    async def live_run(self, manager: RunManager, thread_id: str, run_id: str) -> LiveRun | None:
        await manager.arun_record(run_id, self.user_id, thread_id=thread_id)  # 404 for unknown/foreign runs
        return manager.live(run_id, self.user_id)

    async def final_values(self, manager: RunManager, thread_id: str, live: LiveRun | None) -> Any:
        if live is not None:
            finished = await live.wait()
            if finished.status == "error":
                return {"__error__": {"error": "RunError", "message": finished.error or "the run failed"}}
        return await manager.thread_values(thread_id, self.user_id)

    async def stream_sse(self, live: LiveRun, modes: set[str], *, after: int = -1) -> None:
        """Forward the run's frames as SSE until it ends (the run continues if the client leaves)."""
        base = f"{self.base_url}deerflow/api/threads/{live.record.thread_id}/runs/{live.run_id}"
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Accel-Buffering", "no")
        self.set_header("Content-Location", base)
        self.set_header("Location", f"{base}/stream")
        stream = getattr(self.request.connection, "stream", None)
        if stream is not None:  # each event leaves when flushed; Nagle held it for the client's delayed ACK
            stream.set_nodelay(True)  # (tornado turns it off again when the response ends)
        try:
            await self._send(wire.sse("metadata", {"run_id": live.run_id, "attempt": 1}))
            async for index, kind, data in live.stream_frames(after=after, heartbeat=HEARTBEAT_SECONDS):
                chunk = _frame_bytes(index, kind, data, modes)
                if chunk:
                    await self._send(chunk)
            await self._send(wire.sse("end", None))
        except StreamClosedError:
            return
        self.finish(set_content_type="text/event-stream")

    async def _send(self, data: bytes) -> None:
        self.write(data)
        await self.flush()


def check_model(manager: RunManager, name: Any) -> None:
    """A run naming a model the config lacks is the caller's mistake: 400 with the models that exist.

    (Left to the harness it is a ConfigError deep in the run's setup, answered 500.)
    """
    if name is None:
        return
    known = [m.name for m in manager.config.models]
    if name not in known:
        raise web.HTTPError(400, "%s", f"unknown model {str(name)[:80]!r}; configured models: "
                            f"{', '.join(known) or '(none)'}")


class ModelsHandler(DeerFlowHandler):
    """``GET /deerflow/api/models``: the configured model names (what ``--model`` accepts)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        config = self.host.loaded().config
        self.send_json({"models": [{"name": m.name, "display_name": getattr(m, "display_name", None) or m.name}
                                   for m in config.models]})


def _frame_bytes(index: int, kind: str, data: Any, modes: set[str]) -> bytes | None:
    if kind == "heartbeat":
        return b": heartbeat\n\n"
    if kind == "event":
        out = b""
        if isinstance(data, ev.Error):
            out += wire.sse("error", {"error": data.kind, "message": data.message}, event_id=index)
        if "custom" in modes:
            out += wire.frame_to_sse(kind, data, event_id=index) or b""
        return out or None
    return wire.frame_to_sse(kind, data, event_id=index) if kind in modes else None


class RunStreamHandler(_RunHandler):
    @web.authenticated
    @authorized("execute")
    async def post(self, thread_id: str) -> None:
        body = self.body(RunCreate)
        _, live = await self.start_run(thread_id, body)
        await self.stream_sse(live, body.modes())


class RunJoinStreamHandler(_RunHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str, run_id: str) -> None:
        manager = await self.manager()
        live = await self.live_run(manager, thread_id, run_id)
        if live is None:
            raise web.HTTPError(410, "the run has finished and its live stream is gone; read its events instead")
        modes = set(self.get_arguments("stream_mode")) or {"values", "custom"}
        last = self.request.headers.get("Last-Event-ID")
        await self.stream_sse(live, {"messages" if m == "messages-tuple" else m for m in modes},
                              after=int(last) if last and last.isdigit() else -1)


class RunWaitHandler(_RunHandler):
    @web.authenticated
    @authorized("execute")
    async def post(self, thread_id: str) -> None:
        manager, live = await self.start_run(thread_id, self.body(RunCreate))
        self.send_json(await self.final_values(manager, thread_id, live))


class RunsHandler(_RunHandler):
    @web.authenticated
    @authorized("execute")
    async def post(self, thread_id: str) -> None:
        _, live = await self.start_run(thread_id, self.body(RunCreate))
        self.send_json(wire.run(live.record))

    @web.authenticated
    @authorized
    async def get(self, thread_id: str) -> None:
        manager = await self.manager()
        await manager.athread(thread_id, self.user_id)
        records: list[RunRecord] = await manager.list_runs(thread_id, self.user_id)
        live = {r.run_id: found.record for r in records if (found := manager.live(r.run_id, self.user_id))}
        self.send_json([wire.run(live.get(r.run_id, r)) for r in reversed(records)])


class RunHandler(_RunHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str, run_id: str) -> None:
        manager = await self.manager()
        self.send_json(wire.run(await manager.arun_record(run_id, self.user_id, thread_id=thread_id)))


class RunCancelHandler(_RunHandler):
    @web.authenticated
    @authorized("execute")
    async def post(self, thread_id: str, run_id: str) -> None:
        manager = await self.manager()
        live = await self.live_run(manager, thread_id, run_id)
        cancelled = await manager.cancel(run_id, self.user_id) if live is not None else False
        record = await manager.arun_record(run_id, self.user_id, thread_id=thread_id)
        self.send_json({**wire.run(record), "cancelled": cancelled}, status=200 if cancelled else 409)


class RunJoinHandler(_RunHandler):
    @web.authenticated
    @authorized
    async def get(self, thread_id: str, run_id: str) -> None:
        manager = await self.manager()
        live = await self.live_run(manager, thread_id, run_id)
        self.send_json(await self.final_values(manager, thread_id, live))


class RunEventsHandler(_RunHandler):
    """DeerFlow's typed events of a run (live or stored)."""

    @web.authenticated
    @authorized
    async def get(self, thread_id: str, run_id: str) -> None:
        manager = await self.manager()
        await manager.arun_record(run_id, self.user_id, thread_id=thread_id)
        try:
            events = await manager.arecorded_events(run_id, self.user_id)
        except NotFoundError:
            raise web.HTTPError(404, f"unknown run {run_id!r}") from None
        self.send_json(events)

"""Long-running MCP work: a local task id for the model, a background service for the rest.

Some servers expose a *submit / status / cancel* trio instead of one slow
tool (named in the server's ``tasks`` config).  The model sees only the submit
tool; calling it records a :class:`TaskRecord` with a DeerFlow-local id
(``mcptask-…``) and returns at once.  The remote handle stays in the store,
never in the conversation.

:class:`TaskService` polls each running task through the same session pool
as ordinary calls, honours cancellation requests, gives up after the task's
``timeout`` and keeps a *bounded* result.  Results reach the thread two ways:
``mcp_task_status`` (the model asks), or the next run of the thread, which is
told about every task that finished since (``collect_finished``).  Records
live in SQLite (``$DEERFLOW_HOME/mcp-tasks.db``), so a restart resumes polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from deerflow.mcp.config import TaskTools
from deerflow.mcp.transport import ServerUnavailable, transport_errors
from deerflow.persistence.sqlite import SqliteStore

if TYPE_CHECKING:  # a result exists only once a session (and so the MCP SDK) has loaded
    import mcp_types

logger = logging.getLogger(__name__)

TERMINAL = frozenset({"completed", "failed", "cancelled", "timed_out"})
MAX_POLL_FAILURES = 5

RemoteCall = Callable[[str, str, str, str, dict[str, Any]], Awaitable["mcp_types.CallToolResult"]]
"""(server, user, thread, remote tool, arguments) → result, through the session pool."""


@dataclass
class TaskRecord:
    """One submitted task (``remote_handle`` is never shown to the model)."""

    id: str
    server: str
    tool: str
    user_id: str
    thread_id: str
    remote_handle: str
    status: str = "running"
    result: str | None = None
    error: str | None = None
    cancel_requested: int = 0
    delivered: int = 0
    submitted_at: float = 0.0
    updated_at: float = 0.0

    def public(self) -> dict[str, Any]:
        """The fields the model and the user may see."""
        data = {k: v for k, v in asdict(self).items() if k not in {"remote_handle", "user_id", "delivered"}}
        data["cancel_requested"] = bool(self.cancel_requested)
        return data


class TaskStore(SqliteStore):
    """Task records in SQLite or PostgreSQL (one small table); async code awaits the same methods on ``.aio``."""

    schema = ("CREATE TABLE IF NOT EXISTS mcp_tasks (id TEXT PRIMARY KEY, server TEXT, tool TEXT, user_id TEXT, "
              "thread_id TEXT, remote_handle TEXT, status TEXT, result TEXT, error TEXT, "
              "cancel_requested INTEGER, delivered INTEGER, submitted_at REAL, updated_at REAL);")
    schema_part = "mcp_tasks"
    loop_guarded = True  # see deerflow.persistence.aio
    _COLUMNS = tuple(f.name for f in fields(TaskRecord))

    def add(self, record: TaskRecord) -> None:
        marks = ",".join("?" for _ in self._COLUMNS)
        with self._connect() as db:
            db.execute(f"INSERT INTO mcp_tasks ({','.join(self._COLUMNS)}) VALUES ({marks})",
                       tuple(getattr(record, c) for c in self._COLUMNS))

    def update(self, task_id: str, **changes: Any) -> None:
        changes["updated_at"] = time.time()
        assignments = ",".join(f"{k}=?" for k in changes)
        with self._connect() as db:
            db.execute(f"UPDATE mcp_tasks SET {assignments} WHERE id=?", (*changes.values(), task_id))

    def _select(self, where: str, args: tuple[Any, ...]) -> list[TaskRecord]:
        with self._connect() as db:
            rows = db.execute(f"SELECT {','.join(self._COLUMNS)} FROM mcp_tasks WHERE {where} "
                              "ORDER BY submitted_at", args).fetchall()
        return [TaskRecord(**dict(row)) for row in rows]

    def get(self, task_id: str, user_id: str) -> TaskRecord | None:
        found = self._select("id=? AND user_id=?", (task_id, user_id))
        return found[0] if found else None

    def for_thread(self, user_id: str, thread_id: str) -> list[TaskRecord]:
        return self._select("user_id=? AND thread_id=?", (user_id, thread_id))

    def running(self) -> list[TaskRecord]:
        return self._select("status='running'", ())

    def undelivered(self, user_id: str, thread_id: str) -> list[TaskRecord]:
        marks = ",".join("?" for _ in TERMINAL)
        return self._select(f"user_id=? AND thread_id=? AND delivered=0 AND status IN ({marks})",
                            (user_id, thread_id, *sorted(TERMINAL)))

    def close(self) -> None:
        """Stop the ``.aio`` executor (connections are per call: nothing else stays open)."""
        self.aio.close()


class TaskService:
    """Submits, polls and cancels long-running MCP tasks."""

    def __init__(self, store: TaskStore, remote: RemoteCall, config_for: Callable[[str], Awaitable[TaskTools | None]],
                 *, redact: Callable[[str], str] = str) -> None:
        self.store = store
        self._remote = remote
        self._redact = redact
        self._config_for = config_for
        self._pollers: dict[str, asyncio.Task[None]] = {}
        self._resumed = False

    async def resume(self) -> None:
        """Start polling tasks left running by an earlier process (once)."""
        if self._resumed:
            return
        self._resumed = True
        for record in await self.store.aio.running():
            self._start_poller(record)

    async def submitted(self, *, server: str, tool: str, user_id: str, thread_id: str,
                  result: mcp_types.CallToolResult) -> TaskRecord:
        """Record a task from the submit tool's result and start polling it.

        Raises:
            ValueError: the result carries no task handle in the configured field.
        """
        config = await self._config_for(server)
        assert config is not None
        handle = _field(result, config.id_field)
        if handle is None:
            raise ValueError(f"the submit tool returned no '{config.id_field}'")
        now = time.time()
        record = TaskRecord(id=f"mcptask-{uuid.uuid4().hex[:12]}", server=server, tool=tool, user_id=user_id,
                            thread_id=thread_id, remote_handle=str(handle), submitted_at=now, updated_at=now)
        await self.store.aio.add(record)
        self._start_poller(record)
        return record

    async def request_cancel(self, task_id: str, user_id: str) -> TaskRecord | None:
        """Record a cancellation request; the poller makes the remote call."""
        record = await self.store.aio.get(task_id, user_id)
        if record is not None and record.status == "running":
            await self.store.aio.update(task_id, cancel_requested=1)
            record.cancel_requested = 1
        return record

    def collect_finished(self, user_id: str, thread_id: str) -> list[TaskRecord]:
        """Finished tasks of a thread not yet reported to it; they count as reported from now (sync callers)."""
        records = self.store.undelivered(user_id, thread_id)
        for record in records:
            self.store.update(record.id, delivered=1)
        return records

    async def acollect_finished(self, user_id: str, thread_id: str) -> list[TaskRecord]:
        """:meth:`collect_finished` for async code: off the event loop, within the store's deadline."""
        return await self.store.aio.run(self.collect_finished, user_id, thread_id)

    def _start_poller(self, record: TaskRecord) -> None:
        task = asyncio.get_running_loop().create_task(self._poll(record), name=f"mcp-task-{record.id}")
        self._pollers[record.id] = task
        task.add_done_callback(lambda _t, rid=record.id: self._pollers.pop(rid, None))

    async def _poll(self, record: TaskRecord) -> None:
        config = await self._config_for(record.server)
        if config is None:
            await self.store.aio.update(record.id, status="failed", error="the server's task tools are no longer configured")
            return
        failures = 0
        while True:
            await asyncio.sleep(config.poll_interval)
            current = await self.store.aio.get(record.id, record.user_id)
            if current is None or current.status in TERMINAL:
                return
            try:
                if await self._step(current, config):
                    return
                failures = 0
            except (ServerUnavailable, *transport_errors()) as exc:
                failures += 1
                logger.warning("MCP task %s: polling failed (%s)", record.id, type(exc).__name__)
                if failures >= MAX_POLL_FAILURES:
                    await self.store.aio.update(record.id, status="failed", error="the server stopped answering status calls")
                    return

    async def _step(self, record: TaskRecord, config: TaskTools) -> bool:
        """One poll; True once the task reached a terminal status."""
        args = {config.id_field: record.remote_handle}
        if record.cancel_requested and config.cancel:
            await self._remote(record.server, record.user_id, record.thread_id, config.cancel, args)
            await self.store.aio.update(record.id, status="cancelled")
            return True
        if time.time() - record.submitted_at > config.timeout:
            if config.cancel:
                with contextlib.suppress(ServerUnavailable, *transport_errors()):
                    await self._remote(record.server, record.user_id, record.thread_id, config.cancel, args)
            await self.store.aio.update(record.id, status="timed_out", error=f"no result within {config.timeout:g}s")
            return True
        result = await self._remote(record.server, record.user_id, record.thread_id, config.status, args)
        status = str(_field(result, config.status_field) or "")
        if result.is_error or status in config.failed_values:
            final = "cancelled" if status == "cancelled" else "failed"
            await self.store.aio.update(record.id, status=final,
                              error=_bounded(self._redact(_text(result)), config.max_result_chars))
            return True
        if status in config.done_values:
            value = _field(result, config.result_field)
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            await self.store.aio.update(record.id, status="completed",
                              result=_bounded(self._redact(text), config.max_result_chars))
            return True
        return False

    async def aclose(self) -> None:
        for task in list(self._pollers.values()):
            task.cancel()
        await asyncio.gather(*self._pollers.values(), return_exceptions=True)
        self.store.close()


def _field(result: mcp_types.CallToolResult, name: str) -> Any:
    data = result.structured_content
    if not isinstance(data, dict):
        try:
            data = json.loads(_text(result))
        except ValueError:
            return None
    return data.get(name) if isinstance(data, dict) else None


def _text(result: mcp_types.CallToolResult) -> str:
    import mcp_types

    return "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[… {len(text) - limit} more characters not shown]"


def finished_note(records: list[TaskRecord]) -> str:
    """The note the next run of a thread gets about its finished tasks."""
    lines = ["<mcp_task_results>", "Background MCP tasks of this thread finished since your last turn:"]
    for record in records:
        lines.append(f"- {record.id} ({record.server}/{record.tool}): {record.status}")
        body = record.result if record.status == "completed" else record.error
        if body:
            lines.append("  " + body.replace("\n", "\n  "))
    lines.append("</mcp_task_results>")
    return "\n".join(lines)

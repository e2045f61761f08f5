"""``mcp_task_status`` and ``mcp_task_cancel``: the model's view of long-running MCP tasks.

Both take the DeerFlow-local task id the submit call returned; neither ever
shows the server's own handle.  Cancelling only records the request and
returns at once — the background service makes the remote call.
"""

from __future__ import annotations

import json
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool

from deerflow.errors import ToolFailure
from deerflow.mcp.tasks import TaskService

STATUS_TOOL = "mcp_task_status"
CANCEL_TOOL = "mcp_task_cancel"
_TASK_ID = {"type": "string", "description": "The task id returned when the task was submitted (mcptask-...)."}
_CANCEL_SCHEMA = {"type": "object", "properties": {"task_id": _TASK_ID}, "required": ["task_id"]}
_STATUS_SCHEMA = {"type": "object", "properties": {"task_id": {
    **_TASK_ID, "description": _TASK_ID["description"] + " Omit it to list this thread's tasks."}}}


def make_task_tools(service: TaskService) -> list[BaseTool]:
    """The two task tools, bound to the manager's task service."""

    async def status(runtime: ToolRuntime[Any], task_id: str | None = None) -> str:
        ctx = runtime.context
        if not task_id:
            records = await service.store.aio.for_thread(ctx.user_id, ctx.thread_id)
            if not records:
                return "this thread has no MCP tasks"
            for record in records:
                if record.status != "running":
                    await service.store.aio.update(record.id, delivered=1)
            return json.dumps([r.public() for r in records], ensure_ascii=False, indent=1)
        record = await service.store.aio.get(task_id, ctx.user_id)
        if record is None:
            raise ToolFailure(f"no MCP task {task_id!r} for you; use the id the submit call returned",
                              code="not_found")
        if record.status != "running" and record.thread_id == ctx.thread_id:
            await service.store.aio.update(record.id, delivered=1)
        return json.dumps(record.public(), ensure_ascii=False, indent=1)

    async def cancel(runtime: ToolRuntime[Any], task_id: str) -> str:
        record = await service.request_cancel(task_id, runtime.context.user_id)
        if record is None:
            raise ToolFailure(f"no MCP task {task_id!r} for you", code="not_found")
        if record.status != "running":
            return f"task {task_id} already ended: {record.status}"
        return f"cancellation of task {task_id} requested; it stops at the next status check"

    return [
        StructuredTool(name=STATUS_TOOL, coroutine=status, args_schema=_STATUS_SCHEMA,
                       description="Status of a long-running MCP task you submitted, and its result once done."),
        StructuredTool(name=CANCEL_TOOL, coroutine=cancel, args_schema=_CANCEL_SCHEMA,
                       description="Ask for a long-running MCP task you submitted to be cancelled."),
    ]

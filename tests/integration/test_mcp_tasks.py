"""Long-running MCP tasks: a local id for the model, background polling, results back in the thread, cancel."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from deerflow import AsyncDeerFlowClient, DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log
from fixtures.mcp_servers import call, scripted_config, stdio_entry, write_extensions

pytestmark = pytest.mark.integration

TASKS = {"submit": "job_submit", "status": "job_status", "cancel": "job_cancel", "poll_interval": 0.1,
         "max_result_chars": 200}


def results(events) -> list[ev.ToolResult]:
    return [e for e in events if isinstance(e, ev.ToolResult)]


def task_status(home: Path, task_id: str) -> str:
    with sqlite3.connect(home / "mcp-tasks.db") as db:
        return db.execute("SELECT status FROM mcp_tasks WHERE id=?", (task_id,)).fetchone()[0]


def wait_for(home: Path, task_id: str, wanted: str) -> None:
    deadline = time.monotonic() + 30
    while task_status(home, task_id) != wanted and time.monotonic() < deadline:
        time.sleep(0.1)
    assert task_status(home, task_id) == wanted


def test_a_finished_task_is_reported_to_the_next_run_of_its_thread(deerflow_home: Path, tmp_path: Path):
    config, log = scripted_config(tmp_path, [
        {"tool_calls": [call("test_job_submit", seconds=0.3, payload="abcd")]},
        "It runs in the background.",
        {"tool_calls": [call("mcp_task_status")]},
        "Here is the result.",
    ])
    write_extensions(tmp_path / "extensions_config.json", {"test": stdio_entry(tasks=TASKS)})
    with DeerFlowClient(config_path=config) as client:
        first = client.chat("Start the job")
        (submitted,) = results(first.events)
        task_id = re.search(r"mcptask-[0-9a-f]+", submitted.text).group(0)
        wait_for(deerflow_home, task_id, "completed")
        second = client.chat("How did it go?", first.thread_id)

    offered = read_log(log)[0]["tools"]
    assert {"test_job_submit", "mcp_task_status", "mcp_task_cancel"} <= set(offered)
    assert not {"test_job_status", "test_job_cancel"} & set(offered)  # the remote trio stays internal
    assert submitted.status == "success" and "background task" in submitted.text
    assert "job_id" not in submitted.text  # the remote handle never reaches the model

    note = read_log(log)[2]["messages"][-1]["text"]
    assert note.startswith("<mcp_task_results>") and f"{task_id} (test/job_submit): completed" in note
    assert "job result: abcdabcd" in note and "more characters not shown" in note  # bounded to 200
    assert [n.data["task_id"] for n in second.notices if n.kind == "mcp_task_finished"] == [task_id]
    (listed,) = results(second.events)  # mcp_task_status without an id: this thread's tasks
    assert [(t["id"], t["status"]) for t in json.loads(listed.text)] == [(task_id, "completed")]


async def test_a_cancel_request_reaches_the_server(deerflow_home: Path, tmp_path: Path):
    config, _ = scripted_config(tmp_path, [{"tool_calls": [call("test_job_submit", seconds=60)]}, "started"])
    write_extensions(tmp_path / "extensions_config.json", {"test": stdio_entry(tasks=TASKS)})
    async with AsyncDeerFlowClient(config_path=config) as client:
        result = await client.chat("Start a long job")
        task_id = re.search(r"mcptask-[0-9a-f]+", results(result.events)[0].text).group(0)
        service = (await client.mcp())._tasks_service()
        assert (await service.request_cancel(task_id, "local")).cancel_requested
        for _ in range(300):
            if task_status(deerflow_home, task_id) == "cancelled":
                break
            await asyncio.sleep(0.1)
    assert task_status(deerflow_home, task_id) == "cancelled"

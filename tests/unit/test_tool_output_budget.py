"""Oversized tool results: saved to a file, replaced by a bounded synopsis."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from deerflow.agents.middlewares.tool_output_budget import (
    ToolOutputBudgetMiddleware,
    budget_message,
    make_excerpt,
    result_file_name,
)
from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.config.schema import AppConfig
from deerflow.runtime.context import RunContext
from deerflow.sandbox.files import fs_ops
from deerflow.sandbox.files.virtual_paths import VirtualFS

RESULTS = "/mnt/user-data/outputs/.tool-results"


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    return HomePaths(tmp_path / "home").thread("alice", "t1").ensure()


def numbered(lines: int) -> str:
    return "".join(f"line {i:05d} {'.' * 40}\n" for i in range(1, lines + 1))


def tool_message(text: str, call_id: str = "call_3", name: str = "grep") -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=call_id, name=name)


def test_small_results_pass_untouched(thread: ThreadPaths) -> None:
    message = tool_message("short")
    assert budget_message(message, VirtualFS(thread), max_chars=1000, synopsis_chars=200) is message
    assert not (thread.outputs / ".tool-results").exists()


def test_large_result_is_saved_and_summarised(thread: ThreadPaths) -> None:
    text = numbered(5000)
    out = budget_message(tool_message(text), VirtualFS(thread), max_chars=2000, synopsis_chars=600)
    saved = thread.outputs / ".tool-results" / "grep-call_3.txt"
    assert saved.read_text() == text
    synopsis = out.content
    assert isinstance(synopsis, str) and len(synopsis) < 2000
    assert "line 00001" in synopsis and "line 05000" in synopsis  # head and tail
    assert f"{len(text):,} characters, 5,000 lines" in synopsis
    assert f'read_file(path="{RESULTS}/grep-call_3.txt", start_line=' in synopsis
    assert str(thread.root) not in synopsis
    assert out.tool_call_id == "call_3" and out.response_metadata["tool_output"]["path"] == f"{RESULTS}/grep-call_3.txt"


def test_the_suggested_read_continues_where_the_head_stops(thread: ThreadPaths) -> None:
    vfs = VirtualFS(thread)
    out = budget_message(tool_message(numbered(3000)), vfs, max_chars=2000, synopsis_chars=600)
    ex = make_excerpt(numbered(3000), 600)
    shown_last = ex.head.rstrip("\n").splitlines()[-1]
    assert f"start_line={ex.next_line}," in out.content
    page = fs_ops.read_file(vfs, f"{RESULTS}/grep-call_3.txt", ex.next_line, ex.next_line + 1)
    assert page.text.splitlines()[0] == f"line {ex.next_line:05d} {'.' * 40}"
    assert shown_last == f"line {ex.next_line - 1:05d} {'.' * 40}"


def test_excerpt_line_numbers() -> None:
    ex = make_excerpt(numbered(100), 400)
    assert ex.total_lines == 100 and ex.head.endswith("\n") and ex.tail.startswith("line ")
    assert ex.tail.splitlines()[0] == f"line {ex.tail_line:05d} {'.' * 40}"
    one_line = make_excerpt("y" * 10_000, 400)
    assert (one_line.total_lines, one_line.next_line, one_line.tail_line) == (1, 1, 1)


def test_same_call_id_never_overwrites(thread: ThreadPaths) -> None:
    vfs = VirtualFS(thread)
    budget_message(tool_message("a" * 5000), vfs, max_chars=1000, synopsis_chars=200)
    out = budget_message(tool_message("b" * 5000), vfs, max_chars=1000, synopsis_chars=200)
    assert (thread.outputs / ".tool-results" / "grep-call_3.txt").read_text() == "a" * 5000
    assert (thread.outputs / ".tool-results" / "grep-call_3-2.txt").read_text() == "b" * 5000
    assert "grep-call_3-2.txt" in out.content


def test_file_names_are_sanitized() -> None:
    assert result_file_name("mcp/server:tool", "../../etc") == "mcp_server_tool-etc.txt"
    assert result_file_name("", "") == "tool-call.txt"


def test_unwritable_results_dir_falls_back_to_truncation(thread: ThreadPaths) -> None:
    (thread.outputs / ".tool-results").write_text("in the way")
    out = budget_message(tool_message(numbered(5000)), VirtualFS(thread), max_chars=2000, synopsis_chars=600)
    assert len(out.content) < 2000
    assert "could not be saved" in out.content and "read_file" not in out.content
    assert "line 00001" in out.content and "line 05000" in out.content
    assert out.response_metadata["tool_output"]["path"] is None


def request_for(thread: ThreadPaths, call_id: str = "call_9") -> ToolCallRequest:
    ctx = RunContext(user_id="alice", thread_id="t1", run_id="r1", paths=thread, config=AppConfig())
    return ToolCallRequest(tool_call={"name": "dump", "args": {}, "id": call_id, "type": "tool_call"},
                           tool=None, state={}, runtime=SimpleNamespace(context=ctx))


def test_middleware_budgets_command_results_too(thread: ThreadPaths) -> None:
    middleware = ToolOutputBudgetMiddleware(max_chars=1000, synopsis_chars=300)
    big = ToolMessage(content="z" * 50_000, tool_call_id="call_9", name="dump")
    result = middleware.wrap_tool_call(
        request_for(thread), lambda _req: Command(update={"messages": [big], "artifacts": ["x"]}))
    assert isinstance(result, Command) and result.update["artifacts"] == ["x"]
    (message,) = result.update["messages"]
    assert len(message.content) < 1000
    assert (thread.outputs / ".tool-results" / "dump-call_9.txt").stat().st_size == 50_000


async def test_async_path_externalizes(thread: ThreadPaths) -> None:
    middleware = ToolOutputBudgetMiddleware(max_chars=1000, synopsis_chars=300)

    async def handler(_req: ToolCallRequest) -> ToolMessage:
        return ToolMessage(content="q\n" * 10_000, tool_call_id="call_9", name="dump")

    message = await middleware.awrap_tool_call(request_for(thread), handler)
    assert len(message.content) < 1000 and "dump-call_9.txt" in message.content

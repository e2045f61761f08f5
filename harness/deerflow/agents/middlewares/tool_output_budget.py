"""Tool output budget: an oversized tool result becomes a file and a synopsis.

A tool that returns megabytes (a grep over a data dump, a verbose build log)
would otherwise be stored in the thread and resent to the model on every later
turn.  A result longer than ``tool_output.max_chars`` is written to
``/mnt/user-data/outputs/.tool-results/{tool}-{call id}.txt`` and the model is
given a synopsis instead: the size, the first and last lines (within
``synopsis_chars``) and an exact ``read_file`` call with a line range to read
more.  ``.tool-results`` is internal process feedback: change summaries and
delivery receipts ignore it (see :mod:`deerflow.sandbox.files.changes`).

If the file cannot be written, the model gets the same head and tail with a
note that the rest is lost, never the whole result.  All work is linear in the
result's size (one slice, one line count, one chunked write), so a 50 MB result
costs tens of milliseconds and never reaches the checkpoint.

This middleware sits inside tool error handling: it sees successful results and
error ToolMessages a tool returned itself, while exceptions pass through it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from deerflow.errors import ToolFailure
from deerflow.runtime.context import RunContext
from deerflow.runtime.projection import message_text
from deerflow.sandbox.files.changes import TOOL_RESULTS
from deerflow.sandbox.files.failures import tool_failure
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.threadfs import UnsafePath

Result = ToolMessage | Command[Any]

READ_MORE_LINES = 200
_WRITE_CHUNK = 1 << 20
_MAX_NAME_PART = 64
_MAX_NAME_ATTEMPTS = 100


@dataclass(frozen=True)
class Excerpt:
    """The start and end of a long text, cut on line boundaries where possible.

    Attributes:
        head: The start of the text.
        tail: The end of the text.
        total_chars: Length of the whole text.
        total_lines: Number of lines of the whole text.
        next_line: First line not fully shown by ``head`` (where reading goes on).
        tail_line: Line number where ``tail`` starts.
    """

    head: str
    tail: str
    total_chars: int
    total_lines: int
    next_line: int
    tail_line: int


def make_excerpt(text: str, budget: int) -> Excerpt:
    """Head and tail of ``text`` within ``budget`` characters together (``text`` longer than budget)."""
    half = max(budget // 2, 1)
    total_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    head = text[:half]
    cut = head.rfind("\n")
    if cut >= half // 2:
        head = head[: cut + 1]
    tail = text[-half:]
    cut = tail.find("\n", 0, half // 2)
    if text[-half - 1] != "\n" and 0 <= cut < len(tail) - 1:  # start the tail on a line boundary
        tail = tail[cut + 1 :]
    tail_lines = tail.count("\n") + (0 if tail.endswith("\n") else 1)
    return Excerpt(head, tail, len(text), total_lines, head.count("\n") + 1, total_lines - tail_lines + 1)


def result_file_name(tool_name: str, call_id: str, attempt: int = 0) -> str:
    """``{tool}-{call id}.txt`` with both parts reduced to safe file-name characters."""

    def clean(part: str, fallback: str) -> str:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", part).strip("._-")[:_MAX_NAME_PART]
        return safe or fallback

    suffix = f"-{attempt + 1}" if attempt else ""
    return f"{clean(tool_name, 'tool')}-{clean(call_id, 'call')}{suffix}.txt"


def render_synopsis(tool_name: str, excerpt: Excerpt, *, max_chars: int, saved_to: str | None,
                    failure: str | None = None) -> str:
    """The text the model sees instead of an oversized result.

    Args:
        tool_name: The tool that produced the result.
        excerpt: Head and tail of the result.
        max_chars: The budget that was exceeded.
        saved_to: Virtual path of the full result, or ``None`` when it could not be saved.
        failure: Why saving failed, when it did.
    """
    size = f"{excerpt.total_chars:,} characters, {excerpt.total_lines:,} lines"
    if saved_to is not None:
        intro = (f"[The output of {tool_name} was too long for the conversation ({size}; the limit is "
                 f"{max_chars:,} characters). The full output is saved at {saved_to}; its start and end follow.]")
    else:
        intro = (f"[The output of {tool_name} was too long for the conversation ({size}; the limit is "
                 f"{max_chars:,} characters) and could not be saved to a file ({failure or 'unknown error'}). "
                 "Only its start and end are shown; call the tool again with narrower arguments to see the rest.]")
    omitted_lines = max(excerpt.tail_line - excerpt.next_line, 0)
    omitted_chars = excerpt.total_chars - len(excerpt.head) - len(excerpt.tail)
    gap = f"[… {omitted_chars:,} characters ({omitted_lines:,} lines) omitted …]"
    parts = [intro, "", excerpt.head.rstrip("\n"), gap, excerpt.tail.rstrip("\n")]
    if saved_to is not None:
        end = min(excerpt.next_line + READ_MORE_LINES - 1, excerpt.total_lines)
        parts += ["", f'[To read more: read_file(path="{saved_to}", start_line={excerpt.next_line}, '
                      f"end_line={end}); choose other line ranges the same way (1-{excerpt.total_lines:,}).]"]
    return "\n".join(parts)


def save_result(vfs: VirtualFS, tool_name: str, call_id: str, text: str) -> str:
    """Write ``text`` under ``.tool-results`` without overwriting anything; return its virtual path.

    Raises:
        OSError: The file could not be written.
        ToolFailure: The results directory leads outside the outputs mount.
    """
    directory = vfs.locate(str(TOOL_RESULTS), write=True)
    data = text.encode("utf-8", errors="replace")
    with vfs.open_mount(directory.mount, create=True) as root:
        try:
            root.makedirs(directory.rel)
        except UnsafePath as exc:
            raise tool_failure(exc, shown=directory.virtual) from None
        for attempt in range(_MAX_NAME_ATTEMPTS):
            located = vfs.locate(f"{TOOL_RESULTS}/{result_file_name(tool_name, call_id, attempt)}", write=True)
            try:
                root.create_exclusive(located.rel, data)
            except UnsafePath as exc:
                if exc.code == "exists":
                    continue
                raise tool_failure(exc, shown=located.virtual) from None
            return located.canonical
    raise FileExistsError(f"{_MAX_NAME_ATTEMPTS} result files for this call already exist")


def budget_message(
    message: ToolMessage, vfs: VirtualFS | None, *, max_chars: int, synopsis_chars: int
) -> ToolMessage:
    """``message`` unchanged if within ``max_chars``, else with a synopsis as its content.

    Args:
        message: The tool's result.
        vfs: The thread's files, where the full result is saved; ``None`` when
            the run has no thread filesystem (the result is then only truncated).
        max_chars: Longest result kept as is.
        synopsis_chars: Room for the head and tail in the synopsis.
    """
    text = message_text(message)
    if len(text) <= max_chars:
        return message
    name = message.name or "tool"
    saved_to: str | None = None
    failure: str | None = "no thread filesystem" if vfs is None else None
    try:
        saved_to = save_result(vfs, name, message.tool_call_id, text) if vfs is not None else None
    except ToolFailure as exc:
        failure = exc.code
    except OSError as exc:
        failure = exc.strerror or type(exc).__name__
    excerpt = make_excerpt(text, min(synopsis_chars, max_chars // 2))
    synopsis = render_synopsis(name, excerpt, max_chars=max_chars, saved_to=saved_to, failure=failure)
    synopsis = vfs.mask(synopsis) if vfs is not None else synopsis
    kept = [b for b in message.content if isinstance(b, dict) and b.get("type") != "text"] \
        if isinstance(message.content, list) else []
    metadata = {**message.response_metadata, "tool_output": {
        "path": saved_to, "chars": excerpt.total_chars, "lines": excerpt.total_lines}}
    content: Any = [{"type": "text", "text": synopsis}, *kept] if kept else synopsis
    return message.model_copy(update={"content": content, "response_metadata": metadata})


class ToolOutputBudgetMiddleware(AgentMiddleware):
    """Externalizes tool results longer than ``max_chars`` (see the module docstring)."""

    def __init__(self, *, max_chars: int, synopsis_chars: int) -> None:
        super().__init__()
        self.max_chars = max_chars
        self.synopsis_chars = synopsis_chars

    def _oversized(self, result: Result) -> bool:
        return any(len(message_text(m)) > self.max_chars for m in _tool_messages(result))

    def _apply(self, result: Result, context: Any) -> Result:
        vfs = None
        if isinstance(context, RunContext):
            vfs = VirtualFS(context.paths, skills_root=context.services.skills_root)

        def fit(message: ToolMessage) -> ToolMessage:
            return budget_message(message, vfs, max_chars=self.max_chars, synopsis_chars=self.synopsis_chars)

        if isinstance(result, ToolMessage):
            return fit(result)
        update = dict(result.update or {})  # a Command whose update holds ToolMessages
        messages = update["messages"]
        update["messages"] = [fit(m) if isinstance(m, ToolMessage) else m for m in messages]
        return dataclasses.replace(result, update=update)

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        result = handler(request)
        if not self._oversized(result):
            return result
        return self._apply(result, _context(request))

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        result = await handler(request)
        if not self._oversized(result):
            return result
        return await asyncio.to_thread(self._apply, result, _context(request))


def _context(request: ToolCallRequest) -> Any:
    return request.runtime.context if request.runtime is not None else None


def _tool_messages(result: Result) -> list[ToolMessage]:
    """The ToolMessages a tool result carries (directly, or in a Command's ``messages`` update)."""
    if isinstance(result, ToolMessage):
        return [result]
    update = getattr(result, "update", None)
    messages = update.get("messages") if isinstance(update, dict) else None
    return [m for m in messages if isinstance(m, ToolMessage)] if isinstance(messages, list) else []

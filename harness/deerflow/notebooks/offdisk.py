"""The notebooks' blocking file work: off the event loop, with a deadline, bounded per caller.

The same reads and writes serve an HTTP request (apply, undo, insert, a run's notebook context)
and a tool call (``read_notebook``, ``edit_notebook``), so each call site awaits
:func:`off_disk`, which picks the bound by who is calling:

* a request (the default) goes through :func:`~deerflow.persistence.offloop.off_loop`: past its
  deadline the caller gets :class:`~deerflow.persistence.offloop.DiskUnavailable`, a one-line
  HTTP 503 "try again shortly";
* a tool call (inside :func:`for_tool`) goes through the tool offloader with the conversation's
  key (:mod:`deerflow.tools.offload`): past its deadline the model gets a ``tool_timeout``
  :class:`~deerflow.errors.ToolFailure`, and one conversation's stuck calls cannot take the
  threads the server's requests need.  The offloader *refuses* a conversation's call past a few
  in flight, so a conversation's notebook calls take at most :data:`LANES` of them at once and
  the others wait their turn on the loop (no thread held), within their deadline: a model's 25
  parallel edits of one notebook in a turn queue (the notebook's lock serializes them anyway)
  instead of being refused.

A call past its deadline is abandoned, not stopped (Python cannot kill a thread): a notebook
write replaces the whole file (a new file renamed over the old one), so what lands later is the
whole new notebook or nothing, never part of one.  The deadlines are read at each call (tests
shorten them).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from deerflow.errors import ToolFailure
from deerflow.persistence.offloop import off_loop

if TYPE_CHECKING:  # the tools layer sits above this one: the offloader is handed in by the tool
    from deerflow.tools.offload import Offloader

__all__ = ["FILE_DEADLINE_S", "NOTEBOOK_DEADLINE_S", "for_tool", "off_disk"]

T = TypeVar("T")

NOTEBOOK_DEADLINE_S = 120.0
"""Reading, parsing, rendering, validating or writing a whole notebook, or copying a hand-over
file (up to 50 MB): a notebook with large outputs is hundreds of MB, and a slow network disk
moves a few MB a second, so this is four times the off-loop default; still finite, so a hung
mount answers within two minutes."""
FILE_DEADLINE_S = 30.0
"""A stat, a link check, a folder made, an edit record (a small JSON file in the thread folder)
read or written: no large data, so the off-loop default."""
LANES = 2
"""A conversation's notebook calls on the tool offloader at once (the offloader allows four of its
calls in flight: two are left for its other tools)."""

_TOOL: contextvars.ContextVar[tuple[Offloader, str] | None] = contextvars.ContextVar(
    "deerflow_notebook_tool", default=None)


@contextlib.contextmanager
def for_tool(offloader: Offloader, key: str) -> Iterator[None]:
    """Within this block, :func:`off_disk` runs on ``offloader`` under ``key`` (the conversation)."""
    token = _TOOL.set((offloader, key))
    try:
        yield
    finally:
        _TOOL.reset(token)


async def off_disk(fn: Callable[..., T], *args: Any, what: str, large: bool = False, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` off the event loop within :data:`NOTEBOOK_DEADLINE_S` (``large``:
    a whole notebook or file) or :data:`FILE_DEADLINE_S`; see the module docstring.

    Args:
        what: What the call does, for the one-line error ("reading the notebook 'a.ipynb'").

    Raises:
        DiskUnavailable: a request's call past its deadline (or too many stuck).
        ToolFailure: a tool's call past its deadline (or too many of its conversation's stuck).
    """
    deadline = NOTEBOOK_DEADLINE_S if large else FILE_DEADLINE_S
    tool = _TOOL.get()
    if tool is None:
        return await off_loop(fn, *args, what=what, deadline=deadline, **kwargs)
    offloader, key = tool
    async with _lane(offloader, key, what, deadline):
        return await offloader.arun(fn, *args, key=key, what=what, deadline=deadline, **kwargs)


_lanes: dict[tuple[asyncio.AbstractEventLoop, int, str], tuple[asyncio.Semaphore, list[int]]] = {}
"""Per loop, offloader and conversation: the lanes and how many calls use or wait for them (an
entry goes when none does)."""


@contextlib.asynccontextmanager
async def _lane(offloader: Offloader, key: str, what: str, deadline: float) -> AsyncIterator[None]:
    """One of the conversation's :data:`LANES`, waited for at most ``deadline`` seconds (then a
    ``tool_busy`` :class:`ToolFailure`: its earlier calls are still running)."""
    ident = (asyncio.get_running_loop(), id(offloader), key)
    lanes, users = _lanes.setdefault(ident, (asyncio.Semaphore(LANES), [0]))
    users[0] += 1
    try:
        try:
            async with asyncio.timeout(deadline):
                await lanes.acquire()
        except TimeoutError:
            raise ToolFailure(f"{what} was not started within {deadline:g}s: this conversation's earlier "
                              "notebook operations are still running (a very large notebook or a slow disk). "
                              "Wait for them and try again.", code="tool_busy") from None
        try:
            yield
        finally:
            lanes.release()
    finally:
        users[0] -= 1
        if users[0] == 0:
            _lanes.pop(ident, None)

"""Blocking tool work runs on bounded threads: hung calls cost their own thread, not the server.

The scenario from issue 17: eight calls in one conversation thread hang (a
FIFO read never gets a writer).  Each waits out its deadline and fails for
the model; the fifth and later are refused outright; a call from another
thread, and the event loop itself, carry on.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.tools.builtins import file_tools
from deerflow.tools.errors import ToolFailure
from deerflow.tools.offload import Offloader
from fixtures.tool_runtime import make_runtime

pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")

HANG_GUARD_S = 20.0


async def _outcome(coro: Any) -> str:
    try:
        await coro
    except ToolFailure as exc:
        return exc.code
    return "ok"


def test_hung_calls_in_one_key_cannot_starve_another() -> None:
    offloader = Offloader(per_key=4, total=64)
    release = threading.Event()

    async def scenario() -> tuple[list[str], str, int]:
        hung = [
            offloader.arun(release.wait, key="a", what="read_file", deadline=0.2)
            for _ in range(8)
        ]
        outcomes = await asyncio.gather(*(_outcome(c) for c in hung))
        other = await offloader.arun(lambda: "done", key="b", what="ls", deadline=HANG_GUARD_S)
        return outcomes, other, offloader.in_flight("a")

    outcomes, other, stuck = asyncio.run(scenario())
    assert sorted(outcomes) == ["tool_busy"] * 4 + ["tool_timeout"] * 4
    assert other == "done"
    assert stuck == 4
    release.set()
    for _ in range(int(HANG_GUARD_S * 10)):
        if offloader.in_flight() == 0:
            break
        threading.Event().wait(0.1)
    assert offloader.in_flight() == 0  # abandoned calls give their slot back when they end


def test_sync_path_has_the_same_deadline_and_passes_errors_through() -> None:
    offloader = Offloader()
    release = threading.Event()
    with pytest.raises(ToolFailure) as caught:
        offloader.run(release.wait, key="a", what="grep", deadline=0.2)
    assert caught.value.code == "tool_timeout" and "grep did not finish" in caught.value.message
    release.set()
    with pytest.raises(ZeroDivisionError):
        offloader.run(lambda: 1 / 0, key="a", what="x", deadline=HANG_GUARD_S)


def test_the_total_bound_refuses_when_the_process_is_full() -> None:
    offloader = Offloader(per_key=8, total=2)
    release = threading.Event()
    for key in ("a", "b"):
        with pytest.raises(ToolFailure):
            offloader.run(release.wait, key=key, what="ls", deadline=0.05)
    with pytest.raises(ToolFailure) as caught:
        offloader.run(lambda: None, key="c", what="ls", deadline=HANG_GUARD_S)
    assert caught.value.code == "tool_busy" and "server is busy" in caught.value.message
    release.set()


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    return HomePaths(tmp_path / "home").thread("alice", "t1").ensure()


def test_read_of_a_fifo_does_not_hold_the_loop_or_other_threads(
    thread: ThreadPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO read either is refused or times out; the loop keeps ticking meanwhile."""
    monkeypatch.setattr(file_tools, "FILE_OP_DEADLINE_S", 0.5)
    fifo = thread.workspace / "pipe"
    os.mkfifo(fifo)
    offloader = Offloader(per_key=4)
    tools = {t.name: t for t in file_tools.FILE_READ_TOOLS}
    hostile = make_runtime(thread, offloader=offloader)
    other_paths = HomePaths(tmp_path / "home").thread("bob", "t2").ensure()
    (other_paths.workspace / "note.txt").write_text("hello\n")
    friendly = make_runtime(other_paths, offloader=offloader)

    async def call(name: str, runtime: Any, **args: Any) -> str:
        """The tool's text, or ``error:<code>`` for a failure the model would see."""
        try:
            message = await tools[name].ainvoke(
                {"type": "tool_call", "id": "c", "name": name, "args": {**args, "runtime": runtime}}
            )
        except ToolFailure as exc:
            return f"error:{exc.code}"
        return str(message.content)

    async def scenario() -> tuple[list[str], str, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.create_task(ticker())
        hostile_calls = [call("read_file", hostile, path="pipe") for _ in range(8)]
        results = await asyncio.wait_for(asyncio.gather(*hostile_calls), HANG_GUARD_S)
        other = await asyncio.wait_for(call("read_file", friendly, path="note.txt"), HANG_GUARD_S)
        tick.cancel()
        return results, other, ticks

    try:
        results, other, ticks = asyncio.run(scenario())
    finally:
        _unblock_readers(fifo)
    assert all(r.startswith("error:") for r in results), results
    assert other == "hello\n"
    assert ticks > 0


def _unblock_readers(fifo: Path) -> None:
    """Open and close the write end so readers still blocked in ``open()`` see EOF."""
    for _ in range(8):
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: no reader left
            return
        threading.Event().wait(0.05)


def test_an_ended_calls_thread_takes_the_next_call_with_its_own_context() -> None:
    """A finished call's thread waits for the next one (no thread start per call); context never leaks."""
    import contextvars

    offloader = Offloader(per_key=2, total=4)
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    def seen(value: str) -> tuple[int, str]:
        before = var.get()
        var.set(value)  # set inside the call: must not reach the next call on this thread
        return threading.get_ident(), before

    first_thread, _ = offloader.run(seen, "a", key="k", what="first", deadline=HANG_GUARD_S)
    token = var.set("caller's")
    try:
        second_thread, second_saw = offloader.run(seen, "b", key="k", what="second", deadline=HANG_GUARD_S)
    finally:
        var.reset(token)
    assert second_thread == first_thread
    assert second_saw == "caller's"  # the caller's context, not what the first call set
    assert offloader.in_flight() == 0


def test_a_hung_call_keeps_its_thread_and_the_next_call_gets_another() -> None:
    offloader = Offloader(per_key=2, total=4)
    release = threading.Event()
    with pytest.raises(ToolFailure) as hung:
        offloader.run(release.wait, key="k", what="hang", deadline=0.2)
    assert hung.value.code == "tool_timeout"
    try:
        assert offloader.run(lambda: "ok", key="k", what="next", deadline=HANG_GUARD_S) == "ok"
        assert offloader.in_flight("k") == 1  # the abandoned call still holds its slot
    finally:
        release.set()


async def test_a_timeout_raised_by_the_call_itself_is_its_own_answer() -> None:
    def own_timeout() -> None:
        raise TimeoutError("the socket's own timeout")

    offloader = Offloader()
    with pytest.raises(TimeoutError, match="the socket's own timeout"):  # not a tool_timeout ToolFailure
        await offloader.arun(own_timeout, key="t", what="a read", deadline=30)
    with pytest.raises(TimeoutError, match="the socket's own timeout"):
        await asyncio.to_thread(offloader.run, own_timeout, key="t", what="a read", deadline=30)

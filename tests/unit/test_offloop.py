"""``off_loop``: blocking file work on threads of its own, awaited for at most a deadline.

Hung calls wait on a ``threading.Event`` the test sets at the end; no timing is asserted
(deadlines are short so the tests are quick, hang guards long so a slow machine still passes).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from deerflow.persistence.aio import StoreUnavailable
from deerflow.persistence.offloop import DiskUnavailable, OffLoop
from deerflow_jupyter.handlers.base import error_response

GUARD_S = 20.0  # a hang guard, not a timing assertion


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of every test: no hung call outlives it."""
    event = threading.Event()
    yield event
    event.set()


def hang(release: threading.Event, started: list[str] | None = None) -> Callable[[], str]:
    def call() -> str:
        if started is not None:
            started.append(threading.current_thread().name)
        release.wait(GUARD_S)
        return "late"

    return call


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(GUARD_S):
        while not condition():
            await asyncio.sleep(0.01)


async def test_results_and_errors_pass_through_on_the_pools_own_threads():
    pool = OffLoop(deadline=GUARD_S)
    default_used: list[Any] = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            default_used.append(fn)
            return super().submit(fn, *args, **kwargs)

    asyncio.get_running_loop().set_default_executor(Recording(1))
    assert await pool.run(lambda a, *, b: (a, b, threading.current_thread().name), 1, b=2,
                          what="adding") == (1, 2, "deerflow-offloop")

    def broken() -> None:
        raise FileNotFoundError("gone")

    with pytest.raises(FileNotFoundError, match="gone"):
        await pool.run(broken, what="reading")
    assert default_used == []  # never the loop's default executor


async def test_a_call_past_its_deadline_is_a_one_line_503_and_is_abandoned(release):
    pool = OffLoop(deadline=0.2)
    with pytest.raises(DiskUnavailable) as raised:
        await asyncio.wait_for(pool.run(hang(release), what="listing the skills"), GUARD_S)
    message = str(raised.value)
    assert message.startswith("listing the skills did not finish within 0.2 s") and "try again" in message
    assert isinstance(raised.value, StoreUnavailable) and error_response(raised.value) == (503, message)
    assert "\n" not in message
    assert pool.stuck() == 1  # its thread is still held
    release.set()
    await until(lambda: pool.stuck() == 0)
    assert await pool.run(lambda: "fine", what="reading") == "fine"


async def test_a_per_call_deadline_overrides_the_pools(release):
    pool = OffLoop(deadline=GUARD_S)
    with pytest.raises(DiskUnavailable, match=r"installing did not finish within 0\.1 s"):
        await asyncio.wait_for(pool.run(hang(release), what="installing", deadline=0.1), GUARD_S)


async def test_past_the_abandoned_bound_new_calls_are_refused_at_once(release):
    pool = OffLoop(deadline=0.1, workers=1, max_stuck=2)
    for _ in range(2):
        with pytest.raises(DiskUnavailable, match="did not finish"):
            await pool.run(hang(release), what="reading")
    ran: list[bool] = []
    with pytest.raises(DiskUnavailable, match="was not started: 2 earlier file operations are still stuck"):
        await pool.run(lambda: ran.append(True), what="listing the agents")
    assert ran == [] and pool.stuck() == 2 and pool.threads() <= 3
    release.set()  # the disk answers again: the stuck calls end, new ones run
    await until(lambda: pool.stuck() == 0)
    assert await pool.run(lambda: "fine", what="reading") == "fine"


async def test_a_call_still_queued_at_its_deadline_never_runs_and_is_not_stuck(release):
    pool = OffLoop(deadline=GUARD_S, workers=1, max_stuck=1)  # two threads
    started: list[str] = []
    held = [asyncio.create_task(pool.run(hang(release, started), what="reading")) for _ in range(2)]
    await until(lambda: len(started) == 2)
    ran: list[bool] = []
    with pytest.raises(DiskUnavailable, match="did not finish"):
        await pool.run(lambda: ran.append(True), what="queued", deadline=0.1)
    assert pool.stuck() == 0 and pool.threads() == 2
    release.set()
    assert await asyncio.gather(*held) == ["late", "late"]
    assert ran == []  # given up before a thread took it


async def test_stuck_calls_do_not_take_the_loops_default_executor(release):
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1))
    pool = OffLoop(deadline=0.1, workers=1, max_stuck=1)
    with pytest.raises(DiskUnavailable):
        await pool.run(hang(release), what="reading")
    with pytest.raises(DiskUnavailable, match="not started"):
        await pool.run(hang(release), what="reading")
    # the default executor's only worker is free for everyone else
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), GUARD_S) == "free"


def test_a_pool_needs_a_worker_and_room_for_one_stuck_call():
    with pytest.raises(ValueError, match="at least one"):
        OffLoop(max_stuck=0)


async def test_a_timeout_raised_by_the_call_itself_is_not_the_deadline():
    pool = OffLoop(deadline=GUARD_S)

    def times_out() -> None:
        raise TimeoutError("the lock's own timeout")

    with pytest.raises(TimeoutError, match="the lock's own timeout"):
        await pool.run(times_out, what="reading")
    assert pool.stuck() == 0


async def test_a_caller_that_goes_away_abandons_its_call(release):
    pool = OffLoop(deadline=GUARD_S, workers=1, max_stuck=1)
    started: list[str] = []
    waiting = asyncio.create_task(pool.run(hang(release, started), what="reading"))
    await until(lambda: started != [])
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pool.stuck() == 1  # still holding its thread: counted against the bound
    release.set()
    await until(lambda: pool.stuck() == 0)


async def test_when_no_thread_can_be_started_the_call_never_runs_later(monkeypatch):
    from types import SimpleNamespace

    from deerflow.persistence import offloop

    class NoThread:
        def __init__(self, **_: Any) -> None:
            pass

        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    pool = OffLoop(deadline=GUARD_S)
    monkeypatch.setattr(offloop, "threading", SimpleNamespace(Thread=NoThread))
    ran: list[bool] = []
    with pytest.raises(RuntimeError, match="can't start new thread"):
        await pool.run(lambda: ran.append(True), what="reading")
    monkeypatch.undo()
    assert pool.threads() == 0
    assert await pool.run(lambda: "fine", what="reading") == "fine"
    assert ran == []  # the refused call was dropped, not run by the next thread

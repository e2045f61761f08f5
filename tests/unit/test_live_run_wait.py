"""``LiveRun.wait`` returns the run's ``run_finished`` without being woken for each frame before it.

A caller that wants only the end (the HTTP API's ``?wait``, the scheduler, an embedded client) waits
on its own event: the frames' condition wakes only the streams that read them.
"""

from __future__ import annotations

import asyncio

from deerflow.persistence.store import RunRecord
from deerflow.runtime import events as ev
from deerflow.runtime.live import LiveRun


def live_run() -> LiveRun:
    return LiveRun(RunRecord("r1", "t1", "local", "running", 0.0, 0.0))


def finished(seq: int) -> ev.RunFinished:
    return ev.RunFinished(run_id="r1", thread_id="t1", seq=seq, status="success", text="done")


async def test_wait_returns_the_end_and_is_not_a_waiter_on_the_frames() -> None:
    live = live_run()
    waiter = asyncio.create_task(live.wait())
    await asyncio.sleep(0)
    for i in range(50):
        await live.publish(ev.Notice(run_id="r1", thread_id="t1", seq=i + 1, kind="k", text=str(i)))
        await live.publish_raw("values", {"i": i})
        assert not waiter.done()
        assert not live._changed._waiters  # type: ignore[attr-defined]  # nothing woken per frame
    end = finished(51)
    await live.publish(end)
    assert await asyncio.wait_for(waiter, 5) is end
    assert await asyncio.wait_for(live.wait(), 5) is end  # a caller after the end returns at once


async def test_a_stream_still_sees_every_frame_and_ends_with_the_run() -> None:
    live = live_run()

    async def read() -> list[str]:
        return [kind async for _, kind, _ in live.stream_frames()]

    reader = asyncio.create_task(read())
    await asyncio.sleep(0)
    await live.publish_raw("updates", {"x": 1})
    await live.publish(ev.Notice(run_id="r1", thread_id="t1", seq=1, kind="k", text="t"))
    await live.publish(finished(2))
    assert await asyncio.wait_for(reader, 5) == ["updates", "event", "event"]
    assert (await live.wait()).seq == 2


async def test_streams_attaching_at_any_moment_see_every_frame_from_their_start() -> None:
    """Frames are appended without the condition's lock while no stream is attached: a stream that
    attaches between two appends, or while the run publishes without yielding, still reads them all."""
    import random

    live = live_run()
    rng = random.Random(7)
    readers: list[asyncio.Task[list[int]]] = []

    async def read() -> list[int]:
        return [index async for index, _, _ in live.stream_frames()]

    for i in range(200):
        if rng.random() < 0.1:
            readers.append(asyncio.create_task(read()))
        await live.publish_raw("updates", {"i": i})
        if rng.random() < 0.3:
            await asyncio.sleep(0)  # sometimes the readers run between frames, sometimes not
    await live.publish(finished(1))
    total = len(live.frames)
    for reader in readers:
        assert await asyncio.wait_for(reader, 5) == list(range(total))  # index 0 on: the whole log, in order
    assert readers and live._readers == 0  # type: ignore[attr-defined]

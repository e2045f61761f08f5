"""Finished runs kept in memory hold their events, not copies of their thread's state.

Each raw ``values`` chunk of a run is the whole thread state; a server that kept
them for its last 256 finished runs grew with every long thread.  Structure, not
timing: a finished run the manager keeps holds no message of its thread (no raw
chunk at all), its typed events and the thread's history are still there, a
stream attached during the run still gets every raw frame, and the runs kept are
bounded in number and in frames.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.runs.manager import RunManager, RunRequest
from deerflow.runtime.live import RAW_KINDS

RUNS = 6


def reachable(obj: Any, seen: set[int] | None = None) -> Iterator[Any]:
    """Every value reachable from ``obj`` through containers, dataclasses and pydantic models."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield obj
    if isinstance(obj, dict):
        children: Any = [*obj.keys(), *obj.values()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = obj
    elif isinstance(obj, BaseModel):
        children = list(vars(obj).values())
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        children = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    else:
        return
    for child in children:
        yield from reachable(child, seen)


@contextlib.asynccontextmanager
async def open_manager(deerflow_home: Path, tmp_path: Path) -> AsyncIterator[RunManager]:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [f"noted {i}" for i in range(40)]}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"models": [
        {"name": "s", "use": "deerflow.models.scripted:ScriptedChatModel", "script": str(script)}]}))
    manager = await RunManager.open(loaded=load_config(config), home=HomePaths(deerflow_home))
    try:
        yield manager
    finally:
        await manager.close()


async def run_on(manager: RunManager, thread_id: str, prompt: str) -> Any:
    live = await manager.start(RunRequest(prompt=prompt, thread_id=thread_id))
    assert (await live.wait()).status == "success"
    return live


async def test_finished_runs_hold_no_thread_messages(deerflow_home: Path, tmp_path: Path) -> None:
    async with open_manager(deerflow_home, tmp_path) as manager:
        await _finished_runs_hold_no_thread_messages(manager)


async def _finished_runs_hold_no_thread_messages(manager: RunManager) -> None:
    thread = await manager.acreate_thread("local")
    runs = [await run_on(manager, thread.thread_id, f"note {i}") for i in range(RUNS)]
    for live in runs:  # the newest too: the thread's history grew under every one of them
        assert manager.live(live.run_id, "local") is live  # still joinable...
        held = [o for o in reachable((live.frames, live.record, live.finished)) if isinstance(o, BaseMessage)]
        assert held == [], f"run {live.run_id} holds {len(held)} thread messages"  # ...without the thread
        assert not [k for k, _ in live.frames if k in RAW_KINDS]
        assert [e.type for e in live.events][-1] == "run_finished"
    frames = [k async for _, k, _ in runs[0].stream_frames()]  # a late join ends cleanly on typed events
    assert "values" not in frames and frames[-1] == "event"
    values = await manager.thread_values(thread.thread_id, "local")
    assert sum(m.type == "human" for m in values["messages"]) == RUNS  # history from the checkpointer


async def test_a_stream_attached_during_the_run_gets_every_raw_frame(deerflow_home: Path, tmp_path: Path) -> None:
    async with open_manager(deerflow_home, tmp_path) as manager:
        await _a_stream_attached_during_the_run_gets_every_raw_frame(manager)


async def _a_stream_attached_during_the_run_gets_every_raw_frame(manager: RunManager) -> None:
    """A slow reader (it reads only after the run ended) still gets the state chunks; then they go."""
    thread = await manager.acreate_thread("local")
    await run_on(manager, thread.thread_id, "first")
    live = await manager.start(RunRequest(prompt="second", thread_id=thread.thread_id))
    reader = live.stream_frames()
    first = await reader.__anext__()  # attached while the run is going
    await live.wait()
    kinds = [first[1]] + [k async for _, k, _ in reader]
    assert "values" in kinds and "dropped" not in kinds
    assert not [k for k, _ in live.frames if k in RAW_KINDS]  # released once that reader was done


async def test_runs_kept_in_memory_are_bounded(deerflow_home: Path, tmp_path: Path) -> None:
    async with open_manager(deerflow_home, tmp_path) as manager:
        await _runs_kept_in_memory_are_bounded(manager)


async def _runs_kept_in_memory_are_bounded(manager: RunManager) -> None:
    manager.finished_runs_kept = 2
    thread = await manager.acreate_thread("local")
    runs = [await run_on(manager, thread.thread_id, f"note {i}") for i in range(4)]
    kept = [lv for lv in runs if manager.live(lv.run_id, "local") is not None]
    assert kept == runs[-2:]
    events = await manager.arecorded_events(runs[0].run_id, "local")  # a forgotten run: from the store
    assert [e.type for e in events][-1] == "run_finished"
    manager.finished_frames_kept = 1  # a frame budget smaller than one run: only the newest stays
    newest = await run_on(manager, thread.thread_id, "last")
    assert [lv for lv in [*runs, newest] if manager.live(lv.run_id, "local") is not None] == [newest]

"""Finished runs kept in memory hold their events, not copies of their thread's state.

Each raw ``values`` chunk of a run is the whole thread state; a server that kept
them for its last 256 finished runs grew with every long thread.  Structure, not
timing: after more runs than the manager keeps raw, the older ones hold no raw
chunks, their typed events and the thread's history are still there, and the
newest run can still be joined with its raw frames.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.runtime.live import RAW_KINDS
from deerflow.runtime.manager import RunManager, RunRequest

RUNS = 20  # more than the manager keeps raw (16)


async def test_finished_runs_let_go_of_raw_state_chunks(deerflow_home: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [f"noted {i}" for i in range(RUNS)]}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"models": [
        {"name": "s", "use": "deerflow.models.scripted:ScriptedChatModel", "script": str(script)}]}))
    manager = await RunManager.open(loaded=load_config(config), home=HomePaths(deerflow_home))
    try:
        thread = await manager.acreate_thread("local")
        runs = []
        for i in range(RUNS):
            live = await manager.start(RunRequest(prompt=f"note {i}", thread_id=thread.thread_id))
            assert (await live.wait()).status == "success"
            runs.append(live)
        oldest, newest = runs[0], runs[-1]
        assert manager.live(oldest.run_id, "local") is oldest  # still joinable...
        assert not [k for k, _ in oldest.frames if k in RAW_KINDS]  # ...without the state copies
        assert [e.type for e in oldest.events][-1] == "run_finished"
        assert any(k == "values" for k, _ in newest.frames)  # the latest runs keep them for late joiners
        frames = [k async for _, k, _ in oldest.stream_frames()]  # a late join still ends cleanly
        assert "values" not in frames and frames[-1] == "event"
        values = await manager.thread_values(thread.thread_id, "local")
        assert sum(m.type == "human" for m in values["messages"]) == RUNS  # history from the checkpointer
    finally:
        await manager.close()

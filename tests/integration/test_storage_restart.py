"""The PostgreSQL server restarts (or goes away) in the middle of a run.

What an operator of a team deployment would see: a database restart or failover while a run is
in flight either lets the run finish (the pools replace their dropped connections) or ends it
with one clear error; it never hangs, and the next run on the thread succeeds.  The run is held
at a known point by a test tool (``hold``) so the restart happens mid-run, not before or after.
Each test has a cluster of its own: restarting the session's shared one would disturb others.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from langchain_core.tools import tool

from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.errors import ThreadBusy
from deerflow.persistence import pgsql
from deerflow.persistence.sqlite import StorageError
from deerflow.runs.manager import RunManager, RunRequest
from fixtures.postgres import PostgresCluster, PostgresUnavailable, throwaway_cluster

pytestmark = pytest.mark.integration

DEADLINE = 120.0  # hang guard, not a timing assertion
REACHED = threading.Event()
GATE = threading.Event()


@tool
async def hold(note: str) -> str:
    """Wait until the test lets the run go on (a test tool: the run is mid-way while it waits)."""
    REACHED.set()
    await asyncio.to_thread(GATE.wait, DEADLINE)
    return f"held {note}"


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    REACHED.clear()
    GATE.clear()
    try:
        with throwaway_cluster() as running:
            yield running
            pgsql.close_all()  # this cluster's pools go with it
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))


def write_config(tmp_path: Path, url: str) -> Path:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [
        {"tool_calls": [{"name": "hold", "args": {"note": "the data"}}]},
        {"text": "first run done"},
        {"text": "second run done"},
        {"text": "third run done"},
    ]}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "models": [{"name": "s", "use": "deerflow.models.scripted:ScriptedChatModel", "script": str(script)}],
        "tools": [{"name": "hold", "group": "test", "use": "test_storage_restart:hold"}],
        "storage": {"url": url, "connect_timeout": 3, "run_lease_seconds": 3},
        "memory": {"enabled": False},
    }))
    return config


async def wait_reached() -> None:
    assert await asyncio.to_thread(REACHED.wait, DEADLINE), "the run never reached the hold tool"


async def test_a_database_restart_mid_run_then_the_next_run_succeeds(
        cluster: PostgresCluster, tmp_path: Path, deerflow_home: Path) -> None:
    config = write_config(tmp_path, cluster.create_database())
    manager = await RunManager.open(loaded=load_config(config), home=HomePaths(deerflow_home))
    try:
        thread = await manager.acreate_thread("local")
        live = await manager.start(RunRequest(prompt="analyse", thread_id=thread.thread_id))
        await wait_reached()
        await asyncio.to_thread(cluster.restart)  # every connection of both pools is dropped
        GATE.set()
        first = await asyncio.wait_for(live.wait(), DEADLINE)
        assert first.status in ("success", "error")  # it resumed, or it failed cleanly
        if first.status == "error":
            assert first.error and "\n" not in first.error.strip()
        stored = await manager.store.aio.get_run(live.run_id, "local")
        assert stored.status == first.status  # its end was recorded, not left "running"

        second = await manager.start(RunRequest(prompt="go on", thread_id=thread.thread_id))
        assert (await asyncio.wait_for(second.wait(), DEADLINE)).status == "success"
        runs = await manager.store.aio.list_runs(thread.thread_id, "local")
        assert [r.status for r in runs][-1] == "success"
        state = await manager._state_reader().aget_state({"configurable": {"thread_id": thread.thread_id}})
        humans = [m.content for m in state.values["messages"] if m.type == "human"]
        assert humans[-1] == "go on" and "analyse" in humans
    finally:
        GATE.set()
        await manager.close()


async def test_a_database_down_mid_run_ends_it_with_an_error_not_a_hang(
        cluster: PostgresCluster, tmp_path: Path, deerflow_home: Path) -> None:
    config = write_config(tmp_path, cluster.create_database())
    manager = await RunManager.open(loaded=load_config(config), home=HomePaths(deerflow_home))
    try:
        thread = await manager.acreate_thread("local")
        live = await manager.start(RunRequest(prompt="analyse", thread_id=thread.thread_id))
        await wait_reached()
        await asyncio.to_thread(cluster.stop)
        GATE.set()  # the run goes on and must save its step: the database is not there
        first = await asyncio.wait_for(live.wait(), DEADLINE)
        assert first.status == "error", first
        assert first.error and "\n" not in first.error.strip()
        where = f"PostgreSQL at {cluster.root}:{cluster.port}/"  # the database by socket and port, not psycopg's words
        assert where in first.error and "PoolTimeout" not in first.error, first.error
        with pytest.raises(StorageError) as caught:  # reading the conversation meanwhile: the same one line (503)
            await manager._state_reader().aget_state({"configurable": {"thread_id": thread.thread_id}})
        assert where in str(caught.value) and "try again shortly" in str(caught.value)

        await asyncio.to_thread(cluster.launch)  # the database is back
        deadline = asyncio.get_running_loop().time() + DEADLINE
        second, refusal = None, None
        while second is None:  # the failed run's lease lapses (its end could not be recorded), then it is free
            assert asyncio.get_running_loop().time() < deadline, f"the thread never became free: {refusal}"
            try:
                second = await manager.start(RunRequest(prompt="go on", thread_id=thread.thread_id))
            except (ThreadBusy, StorageError) as exc:  # busy until the lease lapses; unavailable while reconnecting
                refusal = exc
                await asyncio.sleep(0.5)
        assert (await asyncio.wait_for(second.wait(), DEADLINE)).status == "success"
        dead = await manager.store.aio.get_run(live.run_id, "local")
        assert dead.status == "error"  # recorded at its end, or marked interrupted when the lease was taken over
    finally:
        GATE.set()
        await manager.close()

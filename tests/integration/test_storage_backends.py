"""One ``storage.url`` for shared state, over both backends (SQLite and a real PostgreSQL).

What an operator would notice: a run's conversation is readable by another process that shares
only the storage URL (another server, another machine); two servers starting at once on an empty
database both come up; memory saved by one is found by the next; the message channel stays a
``DeltaChannel`` (each message stored about once) on PostgreSQL as on SQLite.  PostgreSQL cases
skip, saying why, when the server binaries are absent (``tests/fixtures/postgres.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path

import pytest
import yaml
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from test_state_checkpoint import make_agent

from deerflow.agents.thread_state import ThreadState
from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.config.storage import StorageConfig
from deerflow.errors import ConfigError
from deerflow.memory.store import open_store
from deerflow.persistence.checkpointer import open_checkpointer
from deerflow.persistence.postgres import DatabaseUnavailable
from deerflow.runs.manager import RunManager, RunRequest
from fixtures.processes import running_process

pytestmark = pytest.mark.integration

PEER = Path(__file__).resolve().parents[1] / "fixtures" / "storage_peer.py"
DEADLINE = 120  # hang guard for a peer process, not a timing assertion


@pytest.fixture(params=["sqlite", "postgres"])
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage URL of each backend: an absolute SQLite file, or a fresh PostgreSQL database."""
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'shared' / 'checkpoints.db'}"


def write_config(path: Path, storage_url: str, *, turns: list[str]) -> Path:
    script = path.parent / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": turns}))
    path.write_text(yaml.safe_dump({
        "models": [{"name": "s", "use": "deerflow.models.scripted:ScriptedChatModel", "script": str(script)}],
        "storage": {"url": storage_url},
        "memory": {"enabled": False},
    }))
    return path


def peer(*args: str) -> dict:
    """Run the peer script to completion (killed and reaped by the fixture on a hang); its JSON line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with running_process([sys.executable, str(PEER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env) as proc:
        out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


async def test_a_run_is_read_back_by_another_process_sharing_only_the_storage_url(
        storage_url: str, tmp_path: Path, deerflow_home: Path) -> None:
    config = write_config(tmp_path / "config.yaml", storage_url, turns=["first answer", "second answer"])
    manager = await RunManager.open(loaded=load_config(config), home=HomePaths(deerflow_home))
    try:
        thread = await manager.acreate_thread("local")
        for prompt in ("one", "two"):
            live = await manager.start(RunRequest(prompt=prompt, thread_id=thread.thread_id))
            assert (await live.wait()).status == "success"
    finally:
        await manager.close()

    other_home = tmp_path / "other-machine"
    other_home.mkdir()
    seen = peer("history", str(config), str(other_home), thread.thread_id)
    assert seen["messages"] == [["human", "one"], ["ai", "first answer"], ["human", "two"], ["ai", "second answer"]]
    if storage_url.startswith("postgresql://"):  # nothing of it was written to the local SQLite files
        assert (seen["owner"], seen["runs"]) == ("local", ["success", "success"])
        assert not (deerflow_home / "checkpoints.db").exists()
        assert not (deerflow_home / "memory.db").exists()
        assert not (deerflow_home / "deerflow.db").exists()
    else:  # the other machine has its own metadata file
        assert seen["owner"] is None


def test_two_processes_set_the_schema_up_at_once(storage_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.yaml", storage_url, turns=["x"])
    start_at = str(time.time() + 3)  # both import, then set up together
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with ExitStack() as stack:
        procs = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            procs.append(stack.enter_context(running_process(
                [sys.executable, str(PEER), "setup", str(config), str(tmp_path / name), start_at],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)))
        results = [proc.communicate(timeout=DEADLINE) for proc in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err[-3000:]
    expected = ({"saver": "AsyncPostgresSaver", "store": "PostgresStore"} if storage_url.startswith("postgresql")
                else {"saver": "AsyncSqliteSaver", "store": "SqliteStore"})
    assert [json.loads(out.strip().splitlines()[-1]) for out, _ in results] == [expected, expected]
    if storage_url.startswith("postgresql"):
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        with psycopg.connect(storage_url) as conn:  # every migration recorded exactly once
            versions = [v for (v,) in conn.execute("SELECT v FROM checkpoint_migrations ORDER BY v")]
        assert versions == list(range(len(AsyncPostgresSaver.MIGRATIONS)))


def test_memory_round_trips_through_the_configured_store(storage_url: str, tmp_path: Path) -> None:
    storage = StorageConfig(url=storage_url)
    with ExitStack() as stack:
        store = open_store(storage, home=tmp_path, stack=stack)
        store.put(("memory", "alice", "lead"), "fact-1", {"content": "prefers R over Python", "confidence": 0.9})
        store.put(("memory", "bob", "lead"), "fact-1", {"content": "bob's own fact", "confidence": 0.9})
    with ExitStack() as stack:  # reopened: what a restarted or second server sees
        store = open_store(storage, home=tmp_path / "elsewhere", stack=stack)
        item = store.get(("memory", "alice", "lead"), "fact-1")
        assert item is not None and item.value["content"] == "prefers R over Python"
        assert [i.value["content"] for i in store.search(("memory", "alice"))] == ["prefers R over Python"]


async def test_the_message_channel_stays_a_delta_channel_on_each_backend(storage_url: str, tmp_path: Path) -> None:
    """Each message is stored about once, not once per step (the storage bound of ``ThreadState``)."""
    storage = StorageConfig(url=storage_url)
    async with AsyncExitStack() as stack:
        saver = await open_checkpointer(storage, default_path=tmp_path / "unused.db", stack=stack)
        agent = make_agent(saver, schema=ThreadState, plain=True, rounds=49, text_size=200)
        config = {"configurable": {"thread_id": "t"}, "recursion_limit": 1_000}
        result = await agent.ainvoke({"messages": [HumanMessage("go", id="h")]}, config)
        messages = result["messages"]
        assert len(messages) == 100
        serde = JsonPlusSerializer()
        raw = sum(len(serde.dumps_typed(m)[1]) for m in messages)
        stored = await stored_bytes(saver, config)
        state = await agent.aget_state(config)
    assert [m.id for m in state.values["messages"]] == [m.id for m in messages]
    assert stored < 6 * raw  # an add_messages channel re-stores the history every step: > 20x here


async def stored_bytes(saver: object, config: dict) -> int:
    """Bytes of checkpoints (blobs included) and writes the saver keeps for the thread."""
    total = 0
    async for item in saver.alist(config):  # type: ignore[attr-defined]
        total += len(JsonPlusSerializer().dumps_typed(item.checkpoint)[1])
        total += sum(len(JsonPlusSerializer().dumps_typed(w[2])[1]) for w in item.pending_writes or [])
    return total


def test_a_bad_storage_url_is_one_clear_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"storage": {"url": "mysql://root:hunter2@db/deerflow"}}))
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    message = str(caught.value)
    assert "storage.url" in message and "postgresql://" in message and "\n" not in message
    assert "hunter2" not in message
    config.write_text(yaml.safe_dump({"storage": {"url": "postgresql://db/x", "checkpointer": "sqlite"}}))
    with pytest.raises(ConfigError, match=r"drop storage\.checkpointer"):
        load_config(config)


async def test_an_unreachable_database_fails_at_start_not_hangs(tmp_path: Path) -> None:
    storage = StorageConfig(url=f"postgresql://nobody:secret@/none?host={tmp_path}&port=1", connect_timeout=2)
    async with AsyncExitStack() as stack:
        with pytest.raises(DatabaseUnavailable) as caught:
            await open_checkpointer(storage, default_path=tmp_path / "x.db", stack=stack)
    assert "secret" not in str(caught.value) and "storage.url" in str(caught.value)


async def test_thread_files_live_under_the_configured_root(tmp_path: Path, deerflow_home: Path) -> None:
    shared = tmp_path / "shared-volume"
    config = tmp_path / "config.yaml"
    write_config(config, f"sqlite:///{tmp_path / 'db' / 'checkpoints.db'}", turns=["saved"])
    data = yaml.safe_load(config.read_text())
    data["storage"]["thread_files_root"] = str(shared)
    config.write_text(yaml.safe_dump(data))
    manager = await RunManager.open(loaded=load_config(config), home=HomePaths(deerflow_home))
    try:
        thread = await manager.acreate_thread("local")
        (manager.home.thread("local", thread.thread_id).outputs / "report.md").write_text("# result")
        live = await manager.start(RunRequest(prompt="hi", thread_id=thread.thread_id))
        assert (await live.wait()).status == "success"
    finally:
        await manager.close()
    assert (shared / "local" / "threads" / thread.thread_id / "user-data" / "outputs" / "report.md").is_file()
    assert not (deerflow_home / "users" / "local" / "threads").exists()
    # another machine mounting the volume at the same path finds the same folder
    elsewhere = HomePaths(tmp_path / "other-home").with_files_root(str(shared))
    assert (elsewhere.thread("local", thread.thread_id).outputs / "report.md").read_text() == "# result"


def test_a_relative_thread_files_root_is_taken_from_the_home(tmp_path: Path) -> None:
    home = HomePaths(tmp_path).with_files_root("team-files")
    assert home.thread("ann", "t1").root == tmp_path / "team-files" / "ann" / "threads" / "t1"
    assert HomePaths(tmp_path).with_files_root(None).user_dir("ann") == tmp_path / "users" / "ann"


async def test_connections_the_database_dropped_are_replaced(postgres_url: str, tmp_path: Path) -> None:
    """A database restart or an idle timeout kills the pool's connections; the next turn still saves."""
    import psycopg

    storage = StorageConfig(url=postgres_url)
    async with AsyncExitStack() as stack:
        saver = await open_checkpointer(storage, default_path=tmp_path / "unused.db", stack=stack)
        agent = make_agent(saver, schema=ThreadState, plain=True, rounds=1)
        config = {"configurable": {"thread_id": "t"}}
        await agent.ainvoke({"messages": [HumanMessage("one", id="h1")]}, config)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()) AS t").fetchone()[0]
        assert killed >= 1  # the pool held at least one connection, now dead
        result = await agent.ainvoke({"messages": [HumanMessage("two", id="h2")]}, config)
        state = await agent.aget_state(config)
    assert [m.content for m in state.values["messages"] if m.type == "human"] == ["one", "two"]
    assert state.values["messages"][-1].id == result["messages"][-1].id


def test_the_storage_url_decides_where_the_metadata_stores_live(tmp_path: Path) -> None:
    url = "postgresql://deerflow@db.lab.example/deerflow"
    team = HomePaths(tmp_path).with_storage(StorageConfig(url=url, thread_files_root="shared"))
    waited = f"{url}?connect_timeout=10"  # storage.connect_timeout travels with the URL (default 10 s)
    assert team.metadata == waited and team.store(tmp_path / "mcp-tasks.db") == waited
    assert team.user_dir("ann") == tmp_path / "shared" / "ann"
    alone = HomePaths(tmp_path).with_storage(StorageConfig(url=f"sqlite:///{tmp_path / 'cp.db'}"))
    assert alone.metadata == tmp_path / "deerflow.db"  # SQLite: the metadata file stays in the home

"""``RunManager.start`` does a thread's file work off the event loop: while the thread's skills view is
being rebuilt (stalled here, as on a loaded disk), the loop goes on serving others; and with a
deadline: a read that never answers refuses the run instead of holding it forever.  (A new thread's
first view is not built at the start at all: its first use builds it, see test_skill_view_owed.py.)"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from deerflow.client import AsyncDeerFlowClient
from deerflow.config.paths import HomePaths
from deerflow.persistence.offloop import OFF_LOOP, DiskUnavailable
from deerflow.runs import manager as manager_module
from deerflow.skills import run as skills_run
from fixtures.hung_disk import folders_made

pytestmark = pytest.mark.integration


async def test_the_skills_view_is_copied_while_the_loop_serves_others(deerflow_home: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    copying = threading.Event()
    served = threading.Event()  # set by a task on the loop once the copy has begun: only if the loop is free
    seen: list[bool] = []
    copy = skills_run.project_skills

    def stalled_copy(*args: Any, **kwargs: Any) -> Any:
        copying.set()
        seen.append(served.wait(timeout=10))  # on the loop's thread, this would wait out its timeout
        return copy(*args, **kwargs)

    monkeypatch.setattr(skills_run, "project_skills", stalled_copy)

    async def other_work() -> None:
        while not copying.is_set():
            await asyncio.sleep(0.01)
        served.set()

    client = AsyncDeerFlowClient(home=deerflow_home)
    try:
        first = await client.chat("Hello")  # a new thread: its view is owed, not copied at the start
        assert seen == [] and first.status == "success"
        HomePaths(deerflow_home).thread("local", first.thread_id).skills_view.mkdir(exist_ok=True)  # a view to rebuild
        other = asyncio.create_task(other_work())
        result = await client.chat("Write me a report", first.thread_id)
        await asyncio.wait_for(other, 60)  # the hang guard: no copy at the start would leave it waiting
    finally:
        await client.aclose()
    assert seen == [True] and result.status == "success"


async def test_a_run_whose_skills_do_not_answer_is_refused_not_hung(deerflow_home: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The skills' read past its deadline refuses the run (503-like, one line) before anything is
    written; once the disk answers again, runs start as before."""
    disk = threading.Event()
    prepare = manager_module.prepare_run_skills

    def stalled_prepare(*args: Any, **kwargs: Any) -> Any:
        disk.wait(60)
        return prepare(*args, **kwargs)

    monkeypatch.setattr(manager_module, "prepare_run_skills", stalled_prepare)
    monkeypatch.setattr(OFF_LOOP, "deadline", 0.5)
    client = AsyncDeerFlowClient(home=deerflow_home)
    try:
        with pytest.raises(DiskUnavailable) as refused:
            await asyncio.wait_for(client.chat("Write me a report"), 60)  # the hang guard: the old code waits
        assert str(refused.value).startswith("reading the skills did not finish within 0.5 s")
        assert await client.threads() == []  # refused before a thread or a run was written
        disk.set()
        async with asyncio.timeout(60):
            while OFF_LOOP.stuck():
                await asyncio.sleep(0.02)
        monkeypatch.setattr(OFF_LOOP, "deadline", 60.0)
        assert (await client.chat("Write me a report")).status == "success"
    finally:
        disk.set()
        await client.aclose()


async def test_the_thread_folders_are_never_made_on_the_loop(deerflow_home: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The run manager makes a thread's folders while it prepares the run (off the loop); the
    run's first node then leaves the disk alone (below); file tools make them off the loop too."""
    made = folders_made(monkeypatch)  # True: on the loop
    client = AsyncDeerFlowClient(home=deerflow_home)
    try:
        result = await client.chat("Write me a report")
    finally:
        await client.aclose()
    assert result.status == "success" and made and not any(made)
    paths = deerflow_home_thread(deerflow_home, result.thread_id)
    assert all((paths.root / rel).is_dir() for rel in ("user-data/uploads", "user-data/workspace", "user-data/outputs"))


async def test_a_run_nobody_prepared_makes_its_folders_off_the_loop(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A context built without the run manager (an embedding, a test): the first node makes the
    folders, on a worker thread, not on the loop."""
    from langgraph.runtime import Runtime

    from deerflow.agents.middlewares.thread_data import THREAD_DATA, ThreadDataMiddleware
    from deerflow.config.paths import HomePaths
    from deerflow.config.schema import AppConfig
    from deerflow.runtime.context import RunContext

    made = folders_made(monkeypatch)
    paths = HomePaths(tmp_path).thread("local", "t1")
    context = RunContext(user_id="local", thread_id="t1", run_id="r1", paths=paths, config=AppConfig())
    runtime: Any = Runtime(context=context)
    update = await ThreadDataMiddleware().abefore_agent({"messages": []}, runtime)
    assert update == {"thread_data": THREAD_DATA} and made == [False]
    assert (paths.root / "user-data" / "workspace").is_dir()
    prepared = RunContext(user_id="local", thread_id="t1", run_id="r2", paths=paths, config=AppConfig(),
                          folders_ready=True)
    assert await ThreadDataMiddleware().abefore_agent({"thread_data": THREAD_DATA}, Runtime(context=prepared)) is None
    assert made == [False]  # a prepared run's node does not touch the disk


def deerflow_home_thread(home: Path, thread_id: str) -> Any:
    from deerflow.config.paths import HomePaths, default_user

    return HomePaths(home).thread(default_user(), thread_id)


async def test_a_new_threads_first_run_has_no_run_start_node_and_keeps_its_title(deerflow_home: Path) -> None:
    """A thread's first run has no history to answer (consent, network approval), so its chain has
    no run-start node: the thread data and the title come with its input, the same values the hooks
    write (the next run, which could answer a request, has the node)."""
    from deerflow.agents.middlewares.thread_data import THREAD_DATA
    from deerflow.runtime import events as ev

    client = AsyncDeerFlowClient(home=deerflow_home)
    try:
        manager = await client.manager()
        first = await client.chat("Write me a report")
        second = await client.chat("And a shorter one", first.thread_id)
        assert first.status == second.status == "success"
        config: Any = {"configurable": {"thread_id": first.thread_id}}
        inputs = [t async for t in manager.checkpointer.alist(config) if t.metadata.get("source") == "input"]
        # the node each run starts at: what START wrote into its input checkpoint, oldest run first
        starts = [sorted(w[1] for w in t.pending_writes or [] if w[1].startswith("branch:to:")) for t in inputs[::-1]]
        assert starts == [["branch:to:model"], ["branch:to:RunStart.before_agent"]]
        values = await manager.thread_values(first.thread_id, "local")
        assert values["thread_data"] == THREAD_DATA and values["title"] == "Write me a report"
        assert (await client.thread(first.thread_id)).record.title == "Write me a report"
        assert [e.title for e in first.events if isinstance(e, ev.RunFinished)] == ["Write me a report"]
    finally:
        await client.aclose()

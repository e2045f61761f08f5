"""A thread's life on the run manager: create, look up, read its state, delete (mixed into ``RunManager``).

A thread is a record in the metadata store (whose user it is), folders under the home (its
workspace, uploads, outputs) and checkpoints in the LangGraph saver (its state).  These methods
keep the three together: creating a thread claims the id and makes its folders, deleting one
removes all three, and reading its state needs no agent (:func:`state_reader`).  Whether a run
holds the thread (its lease) is asked here too, since deleting a busy thread is refused.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from deerflow.agents.thread_state import ThreadState
from deerflow.config.paths import check_id
from deerflow.errors import NotFoundError, ThreadBusy
from deerflow.persistence.store import ThreadExists, ThreadIdUnavailable, ThreadRecord
from deerflow.threadfs import remove_tree

if TYPE_CHECKING:
    from deerflow.config.paths import HomePaths
    from deerflow.persistence.store import MetadataStore


class ThreadOps:
    """The thread methods of :class:`~deerflow.runs.manager.RunManager` (which sets the parts below)."""

    home: HomePaths
    store: MetadataStore
    checkpointer: BaseCheckpointSaver
    _active_by_thread: dict[str, str]
    _reader: Any

    def create_thread(self, user_id: str, *, thread_id: str | None = None,
                      metadata: dict[str, Any] | None = None) -> ThreadRecord:
        thread_id = check_id(thread_id or uuid.uuid4().hex, kind="thread")
        try:  # one statement claims the id; only a refusal asks whose it is
            record = self.store.create_thread(thread_id, check_id(user_id, kind="user"), metadata)
        except ThreadIdUnavailable:
            if self.store.get_thread(thread_id, user_id) is not None:
                raise ThreadExists(thread_id) from None
            raise
        self.home.thread(user_id, thread_id).ensure()
        return record

    async def acreate_thread(self, user_id: str, *, thread_id: str | None = None,
                             metadata: dict[str, Any] | None = None) -> ThreadRecord:
        """:meth:`create_thread` for async callers: off the event loop, in one hop to the store's executor."""
        return await self.store.aio.run(self.create_thread, user_id, thread_id=thread_id, metadata=metadata)

    def thread(self, thread_id: str, user_id: str) -> ThreadRecord:
        return _known_thread(self.store.get_thread(thread_id, user_id), thread_id)

    async def athread(self, thread_id: str, user_id: str) -> ThreadRecord:
        """:meth:`thread` for async callers: the store is read off the event loop."""
        return _known_thread(await self.store.aio.get_thread(thread_id, user_id), thread_id)

    async def thread_values(self, thread_id: str, user_id: str) -> dict[str, Any]:
        """The thread's current state values (messages, artifacts, title…)."""
        snapshot = await self.state_snapshot(thread_id, user_id)
        return dict(snapshot.values) if snapshot is not None else {}

    async def state_snapshot(self, thread_id: str, user_id: str) -> Any:
        """The thread's latest LangGraph ``StateSnapshot`` (None before its first run)."""
        await self.athread(thread_id, user_id)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        if await self.checkpointer.aget_tuple(config) is None:
            return None
        return await self._state_reader().aget_state(config)

    async def state_history(self, thread_id: str, user_id: str, *, limit: int = 10) -> list[Any]:
        """Past snapshots of the thread, newest first."""
        await self.athread(thread_id, user_id)
        config = {"configurable": {"thread_id": thread_id}}
        return [snap async for snap in self._state_reader().aget_state_history(config, limit=limit)]

    async def delete_thread(self, thread_id: str, user_id: str) -> None:
        """Delete a thread: its record, runs, checkpoints and files.

        Raises:
            NotFoundError: unknown thread (or another user's).
            ThreadBusy: the thread has an active run (here or in another process).
        """
        await self.athread(thread_id, user_id)
        await self._check_idle(thread_id)
        await self.checkpointer.adelete_thread(thread_id)
        await self.store.aio.delete_thread(thread_id, user_id)
        await asyncio.to_thread(remove_tree, self.home.thread(user_id, thread_id).root)  # the agent's tree: off the loop

    def _state_reader(self) -> Any:
        if self._reader is None:
            self._reader = state_reader(self.checkpointer)
        return self._reader

    def thread_status(self, thread_id: str) -> str:
        """``busy`` while a run is active on the thread (in any process sharing the store), else ``idle``."""
        busy = thread_id in self._active_by_thread or self.store.thread_lease(thread_id) is not None
        return "busy" if busy else "idle"

    async def athread_status(self, thread_id: str) -> str:
        """:meth:`thread_status` for async callers: the store is read off the event loop."""
        busy = thread_id in self._active_by_thread or await self.store.aio.thread_lease(thread_id) is not None
        return "busy" if busy else "idle"

    async def _check_idle(self, thread_id: str) -> None:
        """Raise ThreadBusy when a run holds the thread, in this process or another."""
        if thread_id in self._active_by_thread:
            raise ThreadBusy(thread_id, run_id=self._active_by_thread[thread_id])
        lease = await self.store.aio.thread_lease(thread_id)
        if lease is not None:
            raise ThreadBusy(thread_id, run_id=lease.run_id, holder=lease.holder)


def _known_thread(record: ThreadRecord | None, thread_id: str) -> ThreadRecord:
    if record is None:
        raise NotFoundError(f"unknown thread {thread_id!r}")
    return record


def state_reader(checkpointer: BaseCheckpointSaver) -> Any:
    """A graph with the thread's channels only, to read state without building an agent."""
    graph = StateGraph(ThreadState)
    # Same node names as the agent graph, so pending sends in checkpoints resolve.
    graph.add_node("model", lambda state: {})
    graph.add_node("tools", lambda state: {})
    graph.add_edge(START, "model")
    graph.add_edge("model", END)
    graph.add_edge("tools", END)
    return graph.compile(checkpointer=checkpointer)

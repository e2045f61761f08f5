"""The embedded client: DeerFlow in your own Python process.

:class:`AsyncDeerFlowClient` is the async-native API over a
:class:`~deerflow.runtime.manager.RunManager`.  :class:`DeerFlowClient` offers
the same methods synchronously by running the async client on a private
event-loop thread, so it works in scripts, the CLI and inside a Jupyter
kernel (whose own loop is busy) alike.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths, default_home
from deerflow.persistence.store import ThreadRecord
from deerflow.runtime import events as ev
from deerflow.runtime.manager import RunManager, RunRequest
from deerflow.sandbox.virtual_paths import OUTPUTS, VirtualFS
from deerflow.tools.errors import ToolFailure

T = TypeVar("T")


@dataclass
class RunResult:
    """What a finished run produced."""

    run_id: str
    thread_id: str
    status: str
    text: str
    artifacts: list[str]
    events: list[Any] = field(default_factory=list)
    receipt: dict[str, Any] | None = None
    error: str | None = None
    clarification: dict[str, Any] | None = None

    @classmethod
    def from_events(cls, events: list[Any]) -> RunResult:
        finished = next(e for e in reversed(events) if isinstance(e, ev.RunFinished))
        clar = next((e.request for e in events if isinstance(e, ev.Clarification)), None)
        return cls(finished.run_id, finished.thread_id, finished.status, finished.text, list(finished.artifacts),
                   events, finished.receipt, finished.error, clar)


@dataclass
class ThreadView:
    """A thread's record and its current state."""

    record: ThreadRecord
    values: dict[str, Any]

    @property
    def messages(self) -> list[Any]:
        return list(self.values.get("messages", []))

    @property
    def artifacts(self) -> list[str]:
        return list(self.values.get("artifacts", []))


class AsyncDeerFlowClient:
    """Async embedded client.

    Args:
        config_path: A ``config.yaml`` (else the standard lookup).
        home: ``$DEERFLOW_HOME`` to use (else the environment's).
        user_id: Whose threads these are.
    """

    def __init__(self, *, config_path: str | Path | None = None, home: str | Path | None = None,
                 user_id: str = "local") -> None:
        self._loaded = load_config(config_path)
        self.home = HomePaths(Path(home).expanduser() if home else default_home())
        self.user_id = user_id
        self._manager: RunManager | None = None

    @property
    def config(self) -> Any:
        return self._loaded.config

    async def manager(self) -> RunManager:
        if self._manager is None:
            self._manager = await RunManager.open(loaded=self._loaded, home=self.home)
        return self._manager

    async def aclose(self) -> None:
        if self._manager is not None:
            await self._manager.close()
            self._manager = None

    async def __aenter__(self) -> AsyncDeerFlowClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def stream(self, prompt: str, thread_id: str | None = None, **options: Any) -> AsyncIterator[Any]:
        """Start a run and yield its events as they happen."""
        manager = await self.manager()
        live = await manager.start(RunRequest(prompt=prompt, thread_id=thread_id, user_id=self.user_id,
                                              options=options))
        async for event in live.stream():
            yield event

    async def chat(self, prompt: str, thread_id: str | None = None, **options: Any) -> RunResult:
        """Run to completion and return the result."""
        return RunResult.from_events([e async for e in self.stream(prompt, thread_id, **options)])

    async def reply(self, thread_id: str, answer: str, **options: Any) -> RunResult:
        """Answer a clarification: the answer becomes the next run's input."""
        return await self.chat(answer, thread_id, **options)

    async def cancel(self, run_id: str) -> bool:
        return await (await self.manager()).cancel(run_id, self.user_id)

    async def create_thread(self, **metadata: Any) -> str:
        return (await self.manager()).create_thread(self.user_id, metadata=metadata).thread_id

    async def threads(self) -> list[ThreadRecord]:
        return (await self.manager()).store.list_threads(self.user_id)

    async def thread(self, thread_id: str) -> ThreadView:
        manager = await self.manager()
        record = manager.thread(thread_id, self.user_id)
        return ThreadView(record, await manager.thread_values(thread_id, self.user_id))

    async def artifacts(self, thread_id: str) -> list[str]:
        return (await self.thread(thread_id)).artifacts

    async def read_artifact(self, thread_id: str, path: str) -> bytes:
        """Bytes of a file under the thread's outputs (virtual path or name)."""
        manager = await self.manager()
        manager.thread(thread_id, self.user_id)
        vfs = VirtualFS(manager.home.thread(self.user_id, thread_id))
        virtual = path if path.startswith("/") else f"{OUTPUTS}/{path}"
        located = vfs.locate(virtual, write=False)
        if str(located.mount.virtual) != str(OUTPUTS) or not located.host.is_file():
            raise ToolFailure(f"{located.virtual} is not an output file of this thread", code="not_found")
        return located.host.read_bytes()

    async def upload(self, thread_id: str, data: str | Path | bytes | IO[bytes], name: str | None = None) -> Any:
        """Put a file into the thread's uploads; returns its upload info."""
        from deerflow.sandbox.uploads import save_upload

        manager = await self.manager()
        manager.thread(thread_id, self.user_id)
        if isinstance(data, (str, Path)):
            source = Path(data)
            name = name or source.name
            data = source
        if not name:
            raise ValueError("name is required when uploading bytes or a stream")
        limits = self.config.uploads
        return save_upload(manager.home.thread(self.user_id, thread_id).ensure(), name, data,
                           max_bytes=limits.max_file_bytes, max_files=limits.max_files)


class DeerFlowClient:
    """Synchronous embedded client (same methods as :class:`AsyncDeerFlowClient`)."""

    def __init__(self, **kwargs: Any) -> None:
        self._async = AsyncDeerFlowClient(**kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="deerflow-client", daemon=True)
        self._thread.start()

    @property
    def config(self) -> Any:
        return self._async.config

    @property
    def user_id(self) -> str:
        return self._async.user_id

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        if self._loop.is_running():
            self._call(self._async.aclose())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> DeerFlowClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stream(self, prompt: str, thread_id: str | None = None, **options: Any) -> Iterator[Any]:
        agen = self._async.stream(prompt, thread_id, **options)
        try:
            while True:
                try:
                    yield self._call(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._call(agen.aclose())

    def chat(self, prompt: str, thread_id: str | None = None, **options: Any) -> RunResult:
        return self._call(self._async.chat(prompt, thread_id, **options))

    def reply(self, thread_id: str, answer: str, **options: Any) -> RunResult:
        return self._call(self._async.reply(thread_id, answer, **options))

    def cancel(self, run_id: str) -> bool:
        return self._call(self._async.cancel(run_id))

    def create_thread(self, **metadata: Any) -> str:
        return self._call(self._async.create_thread(**metadata))

    def threads(self) -> list[ThreadRecord]:
        return self._call(self._async.threads())

    def thread(self, thread_id: str) -> ThreadView:
        return self._call(self._async.thread(thread_id))

    def artifacts(self, thread_id: str) -> list[str]:
        return self._call(self._async.artifacts(thread_id))

    def read_artifact(self, thread_id: str, path: str) -> bytes:
        return self._call(self._async.read_artifact(thread_id, path))

    def upload(self, thread_id: str, data: str | Path | bytes | IO[bytes], name: str | None = None) -> Any:
        return self._call(self._async.upload(thread_id, data, name))

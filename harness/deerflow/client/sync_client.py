"""The synchronous embedded client: :class:`AsyncDeerFlowClient`'s methods, each run on a private
event-loop thread, so it works in scripts, the CLI and inside a Jupyter kernel (whose own loop
is busy) alike."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from deerflow.agents.clarification_reply import Answer
from deerflow.client.async_client import AsyncDeerFlowClient
from deerflow.client.results import RunResult, ThreadView
from deerflow.config.loader import LoadedConfig
from deerflow.config.paths import HomePaths
from deerflow.custom_agents import AgentStore, CustomAgent
from deerflow.persistence.store import ThreadRecord
from deerflow.runs.compaction import CompactResult
from deerflow.runtime import events as ev
from deerflow.sandbox.files.uploads import UploadInfo
from deerflow.scheduling import ScheduleBook, ScheduleRun
from deerflow.skills import InstallResult, Skill, SkillInfo, SkillListing

if TYPE_CHECKING:
    from collections.abc import Sequence

    from deerflow.memory.changes import ChangeRecord
    from deerflow.runs.thread_files import ExportFolder, ThreadExport

T = TypeVar("T")


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
    def loaded(self) -> LoadedConfig:
        return self._async.loaded

    @property
    def user_id(self) -> str:
        return self._async.user_id

    @property
    def home(self) -> HomePaths:
        return self._async.home

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

    def stream(self, prompt: str, thread_id: str | None = None, **options: Any) -> Iterator[ev.Event]:
        return self._iterate(self._async.stream(prompt, thread_id, **options))

    def _iterate(self, agen: AsyncGenerator[T, None]) -> Iterator[T]:
        """Drive an async iterator of the async client from this thread."""
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

    def reply(self, thread_id: str, answer: Answer, **options: Any) -> RunResult:
        return self._call(self._async.reply(thread_id, answer, **options))

    def stream_reply(self, thread_id: str, answer: Answer, **options: Any) -> Iterator[ev.Event]:
        return self._iterate(self._async.stream_reply(thread_id, answer, **options))

    def pending_clarification(self, thread_id: str) -> dict[str, Any] | None:
        return self._call(self._async.pending_clarification(thread_id))

    def cancel(self, run_id: str) -> bool:
        return self._call(self._async.cancel(run_id))

    def learned_from_run(self, run_id: str, *, agent: str | None = None, now: bool = False,
                         wait: float | None = None) -> ChangeRecord | None:
        return self._call(self._async.learned_from_run(run_id, agent=agent, now=now, wait=wait))

    def notebook_action(self, thread_id: str, action: str, target: str | None = None,
                        **payload: Any) -> dict[str, Any]:
        return self._call(self._async.notebook_action(thread_id, action, target, **payload))

    def compact(self, thread_id: str, *, model_name: str | None = None,
                keep_messages: int | None = None) -> CompactResult:
        return self._call(self._async.compact(thread_id, model_name=model_name, keep_messages=keep_messages))

    def create_thread(self, **metadata: Any) -> str:
        return self._call(self._async.create_thread(**metadata))

    def agent_store(self) -> AgentStore:
        return self._async.agent_store()

    def update_agent(self, name: str, **changes: Any) -> CustomAgent:
        return self._call(self._async.update_agent(name, **changes))

    def schedule_book(self) -> ScheduleBook:
        return self._async.schedule_book()

    def run_due_schedules(self) -> list[ScheduleRun]:
        return self._call(self._async.run_due_schedules())

    def run_schedule_now(self, schedule_id: str) -> ScheduleRun:
        return self._call(self._async.run_schedule_now(schedule_id))

    def skills(self) -> list[SkillInfo]:
        return self._async.skills()

    def skill_listing(self) -> SkillListing:
        return self._async.skill_listing()

    def skill(self, name: str) -> Skill:
        return self._async.skill(name)

    def install_skill(self, path: str | Path, *, replace: bool = False) -> InstallResult:
        return self._async.install_skill(path, replace=replace)

    def enable_skill(self, name: str) -> SkillInfo:
        return self._async.enable_skill(name)

    def disable_skill(self, name: str) -> SkillInfo:
        return self._async.disable_skill(name)

    def mcp_servers(self) -> list[dict[str, Any]]:
        return self._call(self._async.mcp_servers())

    def mcp_tools(self) -> list[dict[str, str]]:
        return self._call(self._async.mcp_tools())

    def reset_mcp(self) -> None:
        self._call(self._async.reset_mcp())

    def set_mcp_credential(self, server: str, **values: Any) -> None:
        self._call(self._async.set_mcp_credential(server, **values))

    def threads(self) -> list[ThreadRecord]:
        return self._call(self._async.threads())

    def thread(self, thread_id: str) -> ThreadView:
        return self._call(self._async.thread(thread_id))

    def artifacts(self, thread_id: str) -> list[str]:
        return self._call(self._async.artifacts(thread_id))

    def read_artifact(self, thread_id: str, path: str) -> bytes:
        return self._call(self._async.read_artifact(thread_id, path))

    def export(self, thread_id: str, dest: str | Path | IO[bytes], *,
               folders: Sequence[ExportFolder] = ("outputs",)) -> ThreadExport:
        return self._call(self._async.export(thread_id, dest, folders=folders))

    def browser_frames(self, thread_id: str, *, interval: float = 0.5,
                       max_frames: int | None = None) -> Iterator[bytes]:
        return self._iterate(self._async.browser_frames(thread_id, interval=interval, max_frames=max_frames))

    def upload(self, thread_id: str, data: str | Path | bytes | IO[bytes], name: str | None = None) -> UploadInfo:
        return self._call(self._async.upload(thread_id, data, name))

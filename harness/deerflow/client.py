"""The embedded client: DeerFlow in your own Python process.

:class:`AsyncDeerFlowClient` is the async-native API over a
:class:`~deerflow.runs.manager.RunManager`.  :class:`DeerFlowClient` offers
the same methods synchronously by running the async client on a private
event-loop thread, so it works in scripts, the CLI and inside a Jupyter
kernel (whose own loop is busy) alike.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Self, TypeVar

from deerflow.agents.clarification_reply import Answer, pending_request, prepare_reply
from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths, default_home, default_user
from deerflow.custom_agents import AgentChange, AgentStore, CustomAgent
from deerflow.errors import UserError
from deerflow.mcp.credentials import UserCredential
from deerflow.persistence.store import ThreadRecord
from deerflow.run_options import RunOptions
from deerflow.runs.compaction import CompactResult
from deerflow.runs.manager import RunManager, RunRequest
from deerflow.runtime import events as ev
from deerflow.sandbox.files.uploads import UploadInfo
from deerflow.scheduling import ScheduleBook, Scheduler, ScheduleRun
from deerflow.skills import InstallResult, Skill, SkillInfo, SkillLibrary, SkillListing

if TYPE_CHECKING:
    from collections.abc import Sequence

    from deerflow.mcp.manager import McpManager
    from deerflow.runs.thread_files import ExportFolder, ThreadExport

T = TypeVar("T")


@dataclass
class RunResult:
    """What a finished run produced."""

    run_id: str
    thread_id: str
    status: str
    text: str
    artifacts: list[str]
    events: list[ev.Event] = field(default_factory=list)
    receipt: dict[str, Any] | None = None
    error: str | None = None
    clarification: dict[str, Any] | None = None

    @classmethod
    def from_events(cls, events: list[ev.Event]) -> Self:
        finished = next(e for e in reversed(events) if isinstance(e, ev.RunFinished))
        clar = next((e.request for e in events if isinstance(e, ev.Clarification)), None)
        return cls(finished.run_id, finished.thread_id, finished.status, finished.text, list(finished.artifacts),
                   events, finished.receipt, finished.error, clar)

    @property
    def stopped_by(self) -> str | None:
        """The guard that ended the run (status ``stopped``), e.g. ``loop_detection``."""
        finished = next((e for e in reversed(self.events) if isinstance(e, ev.RunFinished)), None)
        return finished.stopped_by if finished is not None else None

    @property
    def usage(self) -> dict[str, Any] | None:
        """The run's provider-reported token usage (totals, ``by_model``, ``by_source``); None without model calls."""
        finished = next((e for e in reversed(self.events) if isinstance(e, ev.RunFinished)), None)
        return finished.usage if finished is not None else None

    @property
    def notices(self) -> list[ev.Notice]:
        """The run's ``notice`` events (loop detected, unfinished todos, summarization...)."""
        return [e for e in self.events if isinstance(e, ev.Notice)]


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
        user_id: Whose threads these are (default: ``$DEERFLOW_USER``, else the OS user, as
            for the CLI, the magics and the local Jupyter server: :func:`default_user`).
    """

    def __init__(self, *, config_path: str | Path | None = None, home: str | Path | None = None,
                 user_id: str | None = None) -> None:
        self._loaded = load_config(config_path)
        self.home = HomePaths(Path(home).expanduser() if home else default_home()).with_storage(
            self._loaded.config.storage)
        self.user_id = user_id or default_user()
        self._manager: RunManager | None = None
        self._opening: asyncio.Future[RunManager] | None = None

    @property
    def config(self) -> Any:
        """The config in force (an edited file is picked up by the next run)."""
        return self._manager.config if self._manager is not None else self._loaded.config

    async def manager(self) -> RunManager:
        """The run manager, opened on first use; concurrent first calls share one opening
        (two managers on one home would leave one unclosed, its database thread alive)."""
        if self._manager is None:
            opening = self._opening
            if opening is None or opening.get_loop() is not asyncio.get_running_loop():
                opening = self._opening = asyncio.ensure_future(
                    RunManager.open(loaded=self._loaded, home=self.home))
            try:
                manager = await asyncio.shield(opening)
            finally:
                if opening.done() and self._opening is opening:
                    self._opening = None
            if self._manager is None:
                self._manager = manager
                # no Jupyter server here: the user's notebooks are files under the notebook root
                from deerflow.notebooks.files import FileNotebookAccess  # nbformat: lazy

                manager.use_notebooks(FileNotebookAccess.from_env(), replace=False)
        return self._manager

    async def aclose(self) -> None:
        if self._manager is not None:
            await self._manager.close()
            self._manager = None

    async def __aenter__(self) -> AsyncDeerFlowClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def stream(self, prompt: str, thread_id: str | None = None,
                     **options: Any) -> AsyncGenerator[ev.Event, None]:
        """Start a run and yield its events as they happen.

        ``options`` are :class:`~deerflow.run_options.RunOptions` fields (``model_name``,
        ``is_plan_mode``...); an unknown one is a :class:`UserError` naming the closest.
        """
        run_options = RunOptions.parse(options)  # a typo fails before anything is opened
        manager = await self.manager()
        live = await manager.start(RunRequest(prompt=prompt, thread_id=thread_id, user_id=self.user_id,
                                              options=run_options, trusted=True))
        async for event in live.stream():
            yield event

    async def chat(self, prompt: str, thread_id: str | None = None, **options: Any) -> RunResult:
        """Run to completion and return the result."""
        return RunResult.from_events([e async for e in self.stream(prompt, thread_id, **options)])

    async def pending_clarification(self, thread_id: str) -> dict[str, Any] | None:
        """The clarification request the thread is waiting on (its ``human_input`` payload), or None."""
        manager = await self.manager()
        return pending_request((await manager.thread_values(thread_id, self.user_id)).get("messages", []))

    async def reply(self, thread_id: str, answer: Answer, **options: Any) -> RunResult:
        """Answer a clarification; the answer, as readable text, is the next run's input.

        Args:
            thread_id: The thread waiting on a clarification.
            answer: Free text; an option (its text or 1-based number); or, for a
                form, a mapping of field names to values (``{"dataset": "sales.csv",
                "metrics": ["revenue", "margin"]}``).

        Raises:
            UserError: the answer does not fit the pending request (the message
                names the field); nothing is written to the thread.
        """
        return RunResult.from_events([e async for e in self.stream_reply(thread_id, answer, **options)])

    async def stream_reply(self, thread_id: str, answer: Answer, **options: Any) -> AsyncGenerator[ev.Event, None]:
        """Like :meth:`reply`, yielding the next run's events as they happen."""
        prompt = prepare_reply(await self.pending_clarification(thread_id), answer)
        async for event in self.stream(prompt, thread_id, **options):
            yield event

    async def cancel(self, run_id: str) -> bool:
        return await (await self.manager()).cancel(run_id, self.user_id)

    async def compact(self, thread_id: str, *, model_name: str | None = None,
                      keep_messages: int | None = None) -> CompactResult:
        """Summarize the thread's older messages now, between runs.

        Later runs send the summary plus the last ``keep_messages`` messages
        (default ``summarization.keep_messages``); the stored history is kept whole.
        """
        return await (await self.manager()).compact(thread_id, self.user_id, model_name=model_name,
                                                    keep_messages=keep_messages)

    async def create_thread(self, **metadata: Any) -> str:
        return (await (await self.manager()).acreate_thread(self.user_id, metadata=metadata)).thread_id

    def agent_store(self) -> AgentStore:
        """This user's custom agents: ``list_agents()``, ``get(name)``, ``delete(name)``.

        An agent is created by a bootstrap run: ``chat("/bootstrap NAME what it is for")``
        or ``chat(prompt, agent_name=NAME, is_bootstrap=True)``; ``chat(prompt,
        agent_name=NAME)`` then runs it.
        """
        return AgentStore.for_user(self.home, self.user_id)

    async def update_agent(self, name: str, **changes: Any) -> CustomAgent:
        """Change a custom agent as its owner (``soul``, ``description``, ``skills``,
        ``tool_groups``, ``model``, ``display_name``); validated, nothing written on error."""
        manager = await self.manager()
        try:
            change = AgentChange(**changes)
        except TypeError as exc:
            raise UserError(f"update_agent: {exc}") from None
        catalog = manager.agent_catalog(self.user_id, self.home)
        return self.agent_store().update(name, change, catalog=catalog)

    # -- schedules -----------------------------------------------------------------------
    def schedule_book(self) -> ScheduleBook:
        """This user's schedules: ``add(cron=, prompt=, agent_name=, thread_id=, timezone=)``,
        ``list_schedules()``, ``remove(id)``, ``runs(id)``."""
        return ScheduleBook(self.home, self.user_id)

    async def run_due_schedules(self) -> list[ScheduleRun]:
        """Run this user's due schedules now, in ``scheduled`` mode, and wait for them."""
        manager = await self.manager()
        return await Scheduler(manager, self.schedule_book().store).run_due(user_id=self.user_id)

    async def run_schedule_now(self, schedule_id: str) -> ScheduleRun:
        """Run one schedule now, whatever its slot (a trial run), and wait for it."""
        manager = await self.manager()
        return await Scheduler(manager, self.schedule_book().store).run_now(schedule_id, self.user_id)

    # -- skills (files only: no run manager needed) ----------------------------------------
    def skill_library(self) -> SkillLibrary:
        """Public and custom skills with this host's config (fresh reads of disk on every call)."""
        return SkillLibrary.from_config(self._loaded, self.home)

    def skills(self) -> list[SkillInfo]:
        """Every skill of this user, enabled or not."""
        return self.skill_library().skills(self.user_id)

    def skill_listing(self) -> SkillListing:
        """The skills plus the directories that failed to load (and why)."""
        return self.skill_library().listing(self.user_id)

    def skill(self, name: str) -> Skill:
        """One skill with its instructions (``.body``) and files; NotFoundError if unknown."""
        return self.skill_library().skill(self.user_id, name)

    def install_skill(self, path: str | Path, *, replace: bool = False) -> InstallResult:
        """Install a ``.skill``/``.zip`` archive or a directory as a custom skill, enabled.

        SkillScan runs first; ``result.report`` holds its warnings.

        Raises:
            SkillScanBlocked: critical findings (``exc.report`` lists them); nothing installed.
            SkillPackageError, SkillFormatError, UserError: an unsafe or invalid package.
        """
        return self.skill_library().install(self.user_id, Path(path), replace=replace)

    def enable_skill(self, name: str) -> SkillInfo:
        return self.skill_library().set_enabled(self.user_id, name, True)

    def disable_skill(self, name: str) -> SkillInfo:
        """Hide a skill from this user's next runs (prompt, tools and ``/mnt/skills``)."""
        return self.skill_library().set_enabled(self.user_id, name, False)

    # -- MCP (deerflow.mcp) ---------------------------------------------------------------
    async def mcp(self) -> McpManager:
        """The host's MCP manager; nothing starts until a run or :meth:`mcp_tools` needs tools."""
        mcp = (await self.manager()).mcp
        assert mcp is not None, "RunManager.open opens the MCP manager"
        return mcp

    async def mcp_servers(self) -> list[dict[str, Any]]:
        """Each configured MCP server: status (``not_started``, ``ok``, ``failed``...), tools, error."""
        return (await self.mcp()).servers()

    async def mcp_tools(self) -> list[dict[str, str]]:
        """Start the MCP servers not started yet and list every tool they offer."""
        mcp = await self.mcp()
        await mcp.discover(user_id=self.user_id)
        return mcp.tool_list()

    async def reset_mcp(self) -> None:
        """Forget MCP tools, tokens and sessions; the next run starts the servers again."""
        await (await self.mcp()).reset()

    async def set_mcp_credential(self, server: str, *, token: str | None = None, refresh_token: str | None = None,
                                 headers: dict[str, str] | None = None, env: dict[str, str] | None = None) -> None:
        """Store this user's own credential for an MCP server (``credentials.scope: user``);
        None for every value removes it."""
        values = (token, refresh_token, headers, env)
        credential = None if not any(values) else UserCredential(token, refresh_token, headers or {}, env or {})
        await (await self.mcp()).set_user_credential(self.user_id, server, credential)

    async def threads(self) -> list[ThreadRecord]:
        return await (await self.manager()).list_threads(self.user_id)

    async def thread(self, thread_id: str) -> ThreadView:
        manager = await self.manager()
        record = await manager.athread(thread_id, self.user_id)
        return ThreadView(record, await manager.thread_values(thread_id, self.user_id))

    async def artifacts(self, thread_id: str) -> list[str]:
        return (await self.thread(thread_id)).artifacts

    async def read_artifact(self, thread_id: str, path: str) -> bytes:
        """Bytes of a file under the thread's outputs (virtual path or name).

        Raises:
            NotFoundError: no such thread, or not a readable output file (``ArtifactNotFound``).
        """
        manager = await self.manager()
        return (await manager.files.read_artifact(self.user_id, thread_id, path)).data

    async def export(self, thread_id: str, dest: str | Path | IO[bytes], *,
                     folders: Sequence[ExportFolder] = ("outputs",)) -> ThreadExport:
        """Write a zip of the thread's ``folders`` to ``dest`` (a path, replaced, or a binary stream).

        Only regular files go in; links, FIFOs and the like in the thread are listed in
        ``ThreadExport.skipped``, never followed (``ThreadFiles.export``).

        Raises:
            NotFoundError: no such thread.
            UserError: an unknown folder; ``ExportTooLarge`` past the export's bound (no file is left).
        """
        manager = await self.manager()
        if not isinstance(dest, (str, Path)):
            return await manager.files.export(self.user_id, thread_id, dest, folders=folders)
        from deerflow.runs.thread_files import export_folders

        export_folders(folders)  # a bad folder, like an unknown thread, leaves dest as it was
        await manager.athread(thread_id, self.user_id)
        target = Path(dest)
        out = await asyncio.to_thread(target.open, "wb")
        try:
            with out:
                return await manager.files.export(self.user_id, thread_id, out, folders=folders)
        except BaseException:
            await asyncio.to_thread(target.unlink, missing_ok=True)
            raise

    async def browser_frames(self, thread_id: str, *, interval: float = 0.5,
                             max_frames: int | None = None) -> AsyncGenerator[bytes, None]:
        """Live JPEG frames of the thread's browser page, as it changes (one viewer at a time)."""
        from contextlib import aclosing

        manager = await self.manager()
        await manager.athread(thread_id, self.user_id)
        async with aclosing(manager.browser_frames(thread_id, self.user_id, interval=interval,
                                                   max_frames=max_frames)) as frames:
            async for frame in frames:
                yield frame

    async def upload(self, thread_id: str, data: str | Path | bytes | IO[bytes],
                     name: str | None = None) -> UploadInfo:
        """Put a file (a host path, bytes or a binary stream) into the thread's uploads.

        Raises:
            NotFoundError: no such thread.
            UploadRejected: a bad name or over the ``uploads`` limits (a :class:`UserError`).
        """
        if isinstance(data, (str, Path)):
            source = Path(data)
            name = name or source.name
            data = source
        if not name:
            raise UserError("name is required when uploading bytes or a stream")
        manager = await self.manager()
        return await manager.files.upload(self.user_id, thread_id, name, data)


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

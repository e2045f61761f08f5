"""The async-native embedded client: DeerFlow's runs, threads, skills, MCP and schedules as
coroutines over a :class:`~deerflow.runs.manager.RunManager` it opens on first use."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from deerflow.agents.clarification_reply import Answer, pending_request, prepare_reply
from deerflow.client.results import RunResult, ThreadView
from deerflow.config.loader import LoadedConfig, load_config
from deerflow.config.paths import HomePaths, default_home, default_user
from deerflow.custom_agents import AgentChange, AgentStore, CustomAgent
from deerflow.errors import UserError
from deerflow.mcp.credentials import UserCredential
from deerflow.persistence.offloop import off_loop
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
    from deerflow.memory.changes import ChangeRecord
    from deerflow.runs.thread_files import ExportFolder, ThreadExport


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

    @property
    def loaded(self) -> LoadedConfig:
        """The config files as this client found them (``path`` is None on the defaults), for
        hosts that start parts of their own (a batch worker); :attr:`config` is the one in force."""
        return self._loaded

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

    async def learned_from_run(self, run_id: str, *, agent: str | None = None, now: bool = False,
                               wait: float | None = None) -> ChangeRecord | None:
        """What memory learned from ``run_id`` (None if nothing), waiting up to ``wait`` s for it
        (default: memory's own quiet spell and extraction time); ``now`` asks memory to take the
        run in at once instead of after its quiet spell."""
        manager = await self.manager()
        return await manager.learned_from_run(self.user_id, agent, run_id, now=now, timeout=wait)

    async def notebook_action(self, thread_id: str, action: str, target: str | None = None,
                              **payload: Any) -> dict[str, Any]:
        """Act on a thread's notebook edits: ``apply``/``discard`` a proposal, ``undo`` a run's
        edits, ``list``, ``insert`` or ``localize`` (:func:`deerflow.notebooks.host.notebook_action`)."""
        from deerflow.notebooks.host import notebook_action

        return await notebook_action(await self.manager(), user_id=self.user_id, thread_id=thread_id,
                                     action=action, target=target, **payload)

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
        store = self.agent_store()
        # the catalog lists the skills on disk and the update writes the agent's files: off the loop
        return await off_loop(lambda: store.update(name, change, catalog=manager.agent_catalog(self.user_id, self.home)),
                              what=f"changing the agent {name}")

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
        return await (await self.mcp()).servers()

    async def mcp_tools(self) -> list[dict[str, str]]:
        """Start the MCP servers not started yet and list every tool they offer."""
        mcp = await self.mcp()
        await mcp.discover(user_id=self.user_id)
        return await mcp.tool_list()

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
        """Write a zip of the thread's ``folders`` to ``dest`` (a path, replaced whole, or a binary stream).

        Only regular files go in; links, FIFOs and the like in the thread are listed in
        ``ThreadExport.skipped``, never followed (``ThreadFiles.export``).

        Raises:
            NotFoundError: no such thread.
            UserError: an unknown folder, a ``dest`` that cannot be written; ``ExportTooLarge`` past the
                export's bound.  On any failure a file already at ``dest`` is left exactly as it was.
        """
        manager = await self.manager()
        if not isinstance(dest, (str, Path)):
            return await manager.files.export(self.user_id, thread_id, dest, folders=folders)
        from deerflow.outfile import PartialFile
        from deerflow.runs.thread_files import export_folders

        export_folders(folders)  # a bad folder, like an unknown thread, leaves dest as it was
        await manager.athread(thread_id, self.user_id)
        # written beside dest and renamed over it once whole: a failure midway leaves an older dest as it was
        partial = await asyncio.to_thread(PartialFile.open, dest, binary=True)
        try:
            done = await manager.files.export(self.user_id, thread_id, partial.stream, folders=folders)
            await asyncio.to_thread(partial.commit)
        except BaseException:
            await asyncio.to_thread(partial.discard)
            raise
        return done

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

"""The run manager: threads, runs, cancellation, persistence.

One manager per host process (the CLI, an embedded client, the Jupyter
server).  It owns the checkpointer and the metadata store, starts each run as
an asyncio task on its loop, allows one active run per thread, and records
every run (status, timestamps, error, events) so it survives a restart.

One run per thread holds *across processes* too: each run takes its thread's
lease in the store in the transaction that records it (see
:mod:`deerflow.persistence.store`), a heartbeat task renews it off the event
loop while the run lasts, and the transaction that records the run's end gives
it back.  A second run, here or in any process sharing the store, gets
:class:`~deerflow.errors.ThreadBusy`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from deerflow.acp.mcp_servers import extensions_mcp_servers
from deerflow.agents.graph_cache import GraphCache
from deerflow.agents.middlewares.summarization import summarization_setup
from deerflow.browser.service import open_browsing_services
from deerflow.config.loader import LoadedConfig
from deerflow.config.paths import HomePaths, check_id
from deerflow.config.schema import AppConfig
from deerflow.config.watch import ConfigWatch
from deerflow.custom_agents import (
    AgentStore,
    apply_agent_commands,
    known_skills,
    resolve_profile,
)
from deerflow.errors import NotFoundError, ThreadBusy, UserError
from deerflow.memory.service import MemoryService, note_settled_run
from deerflow.models.factory import create_chat_model
from deerflow.persistence.checkpointer import open_checkpointer
from deerflow.persistence.offloop import off_loop
from deerflow.persistence.sqlite import StorageError
from deerflow.persistence.store import LeaseTerms, MetadataStore, RunRecord
from deerflow.plugins import PluginSet, load_plugins
from deerflow.run_options import RunOptions
from deerflow.runs.compaction import CompactResult, compact_thread
from deerflow.runs.execution import execute_run
from deerflow.runs.host_queries import HostQueries
from deerflow.runs.thread_files import ThreadFiles
from deerflow.runs.thread_ops import ThreadOps
from deerflow.runs.wiring import wire_lead_agent, wire_run_context
from deerflow.runtime import events as ev
from deerflow.runtime import metrics
from deerflow.runtime.context import RunContext
from deerflow.runtime.interaction_policy import INTERNAL_CONTEXT_KEYS, RunInteractionPolicy
from deerflow.runtime.live import LiveRun
from deerflow.runtime.services import HostServices
from deerflow.runtime.tracing import install_inline_trace_bookkeeping
from deerflow.runtime.usage import UsageMeter, check_daily_budget
from deerflow.sandbox.factory import open_execution_services
from deerflow.skills.library import SkillLibrary
from deerflow.skills.run import prepare_run_skills
from deerflow.subagents.host import open_subagent_runtime
from deerflow.tools.assembly import ToolCache
from deerflow.tools.builtins.conversation import grant_conversation_reader

logger = logging.getLogger(__name__)


@dataclass
class RunRequest:
    """What a caller asks for.  ``options`` are the run's options, built by the host.

    ``trusted`` marks an internal, in-process caller (embedded client, CLI,
    scheduler).  Only trusted requests may carry the internal-only interaction
    keys (``interaction_mode``, ``non_interactive``, ``disable_clarification``,
    ``channel_name``); a public request (the HTTP API) carrying them is refused.
    """

    prompt: str
    thread_id: str | None = None
    user_id: str = "local"
    options: RunOptions = field(default_factory=RunOptions)
    trusted: bool = False


class RunManager(ThreadOps, HostQueries):
    """Executes runs on threads; create with :meth:`open`, finish with :meth:`close`.

    Its thread methods (create, look up, state, delete) are in :class:`ThreadOps`; what hosts
    may ask of it beyond runs and threads is in :class:`HostQueries`."""

    finished_runs_kept = 256
    """Finished runs joinable from memory (older ones: their events from the store)."""
    finished_frames_kept = 100_000
    """Frames (typed events) all finished runs in memory may hold together, so long runs stay bounded too."""

    def __init__(self, *, loaded: LoadedConfig, home: HomePaths, store: MetadataStore,
                 checkpointer: BaseCheckpointSaver, stack: AsyncExitStack) -> None:
        self.loaded = loaded
        self._config_watch = ConfigWatch(loaded)  # an edited config.yaml applies from the next run
        self.home = home
        self.store = store
        self.checkpointer = checkpointer
        self._stack = stack
        self._live: dict[str, LiveRun] = {}
        self._active_by_thread: dict[str, str] = {}
        self._holder = f"{socket.gethostname()}:{os.getpid()}"
        self.tool_cache = ToolCache()  # built-in tools built once per config, shared by runs
        self.graph_cache = GraphCache()  # compiled lead-agent graphs, shared by runs that build the same
        self.services = HostServices(tool_cache=self.tool_cache)
        self.files = ThreadFiles(home, self, lambda: self.loaded.config.uploads)  # uploads in, artifacts out
        self._reader: Any = None  # ThreadOps' state reader, compiled on first use
        self.plugins = PluginSet()  # startup plugins (deerflow.plugins), set by open()
        self._stop_reason: str | None = None  # set by close(reason=...): runs it cancels end "interrupted: ..."

    @classmethod
    async def open(cls, *, loaded: LoadedConfig, home: HomePaths, plugins: PluginSet | None = None) -> RunManager:
        """Open the host's services; ``plugins`` already loaded by the host (else loaded here, once)."""
        install_inline_trace_bookkeeping()
        home = home.with_storage(loaded.config.storage)  # a shared volume, a team database, when set
        stack = AsyncExitStack()
        try:
            browsing = await open_browsing_services(loaded.config, stack, config_file=_str(loaded.path))  # fails fast
            store = MetadataStore(home.metadata)
            await store.aio.mark_interrupted_runs()
            stack.callback(store.aio.close)  # its executor's threads end with the host
            saver = await open_checkpointer(loaded.config.storage, default_path=home.home / "checkpoints.db", stack=stack)
            manager = cls(loaded=loaded, home=home, store=store, checkpointer=saver, stack=stack)
            manager.plugins = plugins if plugins is not None else load_plugins(
                loaded.config.plugins, home=home.home, base_dir=loaded.path.parent if loaded.path else None)
            services = manager.services
            execution = open_execution_services(loaded.config, stack)
            services.sandbox, services.kernels = execution.sandbox, execution.kernels
            services.web, services.browser = browsing
            services.skills = SkillLibrary.from_config(loaded, home)
            services.mcp_server_configs = extensions_mcp_servers(loaded.extensions)
            services.subagents = await open_subagent_runtime(
                loaded.config, home, stack, services=services, config_file=_str(loaded.path))
            from deerflow.mcp.manager import (
                open_mcp,  # the MCP SDK loads with the first host, not on import
            )

            services.mcp = mcp = open_mcp(loaded, home)  # lazy: nothing starts before a run
            stack.push_async_callback(mcp.aclose)
            services.memory = memory = await asyncio.to_thread(  # may wait on a database
                MemoryService.open, loaded.config, home=home.home, stack=stack, model_factory=manager.memory_model)
            stack.push_async_callback(memory.aclose)  # pending extractions: a bounded grace, then cancelled
        except BaseException:
            await stack.aclose()  # a later service failed: close the earlier ones (browser, kernels...)
            raise
        return manager

    def memory_model(self, name: str | None) -> Any:
        """The chat model memory extraction uses (:mod:`deerflow.memory.service`), from the current config."""
        return create_chat_model(self.loaded.config, name, config_file=_str(self.loaded.path)).model

    async def close(self, *, reason: str | None = None) -> None:
        """Cancel active runs (each saves its last checkpoint and is recorded), then close every service.

        With ``reason`` (the server stopping), the cancelled runs are recorded as
        ``error`` ``"interrupted: {reason}"``, like a crashed process's runs, and can be continued.
        """
        self._stop_reason = reason
        for live in list(self._live.values()):
            if live.task and not live.task.done():
                live.task.cancel()
        await asyncio.gather(*(lv.task for lv in self._live.values() if lv.task), return_exceptions=True)
        await self._stack.aclose()

    # -- compaction, and the thread's lease (runs and compaction hold it) ------
    async def compact(self, thread_id: str, user_id: str, *, model_name: str | None = None,
                      keep_messages: int | None = None) -> CompactResult:
        """Fold the thread's older messages into its summary now (:mod:`deerflow.runs.compaction`).

        The summary is written by ``summarization.model_name``, else ``model_name``,
        else the default model.  The thread counts as busy meanwhile.

        Raises:
            NotFoundError: unknown thread (or another user's).
            ThreadBusy: the thread has an active run (here or in another process).
            ConfigError: an unknown model.
        """
        await self.athread(thread_id, user_id)
        await self._check_idle(thread_id)
        config, config_file = self.loaded.config, _str(self.loaded.path)
        policy, summarizer = summarization_setup(
            config, create_chat_model(config, model_name, config_file=config_file),
            config_file=config_file, always_write=True)
        await self._check_idle(thread_id)
        self._active_by_thread[thread_id] = "compaction"
        try:
            async with self._thread_lease(thread_id, "compaction"):
                return await compact_thread(self.checkpointer, thread_id, summarizer=summarizer,
                                            keep_messages=keep_messages or policy.keep_messages)
        finally:
            self._active_by_thread.pop(thread_id, None)

    def _lease_terms(self) -> LeaseTerms:
        return LeaseTerms(owner=uuid.uuid4().hex, holder=self._holder,
                          seconds=self.loaded.config.storage.run_lease_seconds)

    @asynccontextmanager
    async def _thread_lease(self, thread_id: str, activity: str) -> AsyncIterator[None]:
        """Hold the thread's lease (renewed) for work that is not a run."""
        terms = self._lease_terms()
        await self.store.aio.acquire_lease(thread_id, activity, terms)
        task = asyncio.current_task()
        heartbeat = asyncio.create_task(self._heartbeat(thread_id, terms, on_lost=task.cancel if task else None))
        try:
            yield
        finally:
            heartbeat.cancel()
            await self.store.aio.release_lease(thread_id, terms.owner)

    async def _heartbeat(self, thread_id: str, terms: LeaseTerms, *, on_lost: Callable[[], Any] | None) -> None:
        """Renew the lease every third of its term, off the event loop; ``on_lost`` if another holder took it.

        A renewal that fails on a locked or unreachable database is logged and
        retried at the next beat: the lease only lapses after a whole term of failures.
        """
        while True:
            await asyncio.sleep(terms.seconds / 3)
            try:
                held = await self.store.aio.renew_lease(thread_id, terms.owner, terms.seconds)
            except (sqlite3.Error, StorageError) as exc:  # StoreUnavailable: locked past the deadline
                logger.warning("could not renew the lease on thread %s (%s: %s); retrying",
                               thread_id, type(exc).__name__, exc)
                continue
            if not held:
                logger.error("the lease on thread %s was taken over (this process stalled past its term); "
                             "stopping the work that held it", thread_id)
                if on_lost is not None:
                    on_lost()
                return

    # -- runs --------------------------------------------------------------------
    async def start(self, request: RunRequest) -> LiveRun:
        """Validate the request, record the run and start it in the background.

        Raises:
            ThreadBusy: a run is already active on the thread (in this process or another).
            UserError: empty prompt, unknown thread, an internal-only option in an untrusted
                request, an unknown interaction mode, or a configuration problem with the
                requested model.
        """
        prompt = request.prompt.strip()
        if not prompt:
            raise UserError("the prompt is empty: say what the agent should do")
        config_note = self._refresh_config()  # an invalid edit refuses the run (ConfigError)
        user_id = check_id(request.user_id, kind="user")
        if request.thread_id:
            await self.athread(request.thread_id, user_id)
            if request.thread_id in self._active_by_thread:
                raise ThreadBusy(request.thread_id, run_id=self._active_by_thread[request.thread_id])
        budget = self.loaded.config.usage.daily_token_budget
        if budget is not None:  # no budget (the default): no store round trip before the first event
            await self.store.aio.run(check_daily_budget, self.store, user_id, budget)
        prompt, options = apply_agent_commands(prompt, request.options)
        interaction = RunInteractionPolicy.for_request(options, trusted=request.trusted)
        agents = AgentStore.for_user(self.home, user_id)
        # unknown agent: refused before anything is written; a named agent's files are read off the loop
        profile = (await off_loop(resolve_profile, options, agents, what="reading the agent") if options.agent_name
                   else resolve_profile(options, agents))
        # the skills' files (listing, a changed SKILL.md) are read off the loop; a bad /skill is refused
        skills = await off_loop(prepare_run_skills, self.services, user_id, prompt, allow=profile.skills,
                                what="reading the skills")
        reader = await grant_conversation_reader(self, options, user_id=user_id, current_thread=request.thread_id,
                                           page_chars=self.loaded.config.tool_output.max_chars,
                                           bootstrap=profile.bootstrap)
        resolved = create_chat_model(self.loaded.config, options.model_name or profile.model,
                                     config_file=_str(self.loaded.path), record=options.record, replay=options.replay)
        new_thread = not request.thread_id  # made by this start: its first run (see wire_lead_agent, wire_run_context)
        new_thread_id = request.thread_id or uuid.uuid4().hex  # stdio MCP servers start in its workspace
        from deerflow.mcp.manager import prepare_mcp_run

        mcp_run = await prepare_mcp_run(self.services, user_id=user_id, thread_id=new_thread_id)
        if request.thread_id in self._active_by_thread:  # MCP discovery awaited: the thread may be busy now
            raise ThreadBusy(request.thread_id, run_id=self._active_by_thread[request.thread_id])
        lead = wire_lead_agent(self.loaded.config, resolved, options, interaction=interaction, profile=profile,
                               services=self.services, checkpointer=self.checkpointer, skills=skills, mcp=mcp_run,
                               tool_cache=self.tool_cache, config_file=_str(self.loaded.path), user_id=user_id,
                               agents=agents, conversation_reader=reader, plugins=self.plugins, graphs=self.graph_cache,
                               new_thread=new_thread,  # created below: no history, no run-start node
                               skill_names=skills.known if skills is not None and skills.known is not None
                               else await off_loop(known_skills, self.loaded.config, self.home, user_id,
                                                   library=self.services.skills, what="listing the skills"))
        thread = (await self.athread(request.thread_id, user_id) if request.thread_id
                  else await self.acreate_thread(user_id, thread_id=new_thread_id))
        from deerflow.notebooks.host import (  # nbformat loads with the first run
            context_for_run,
            with_context,
        )

        notebook = await context_for_run(self.services, options)  # the notebook a %%deerflow run came from
        now = time.time()
        record = RunRecord(uuid.uuid4().hex, thread.thread_id, user_id, "running", now, now,
                           options={k: v for k, v in options.to_dict().items()
                                    if _jsonable(v) and k not in INTERNAL_CONTEXT_KEYS})
        context = await off_loop(  # off the loop: an existing skills view is checked, rebuilt when it changed
            partial(wire_run_context, user_id=user_id, thread_id=thread.thread_id, run_id=record.run_id,
                    paths=self.home.thread(user_id, thread.thread_id), config=self.loaded.config,
                    model_name=resolved.name, options=options, chat_model=resolved.model, interaction=interaction,
                    services=self.services, skills=skills, mcp=mcp_run,
                    usage_meter=_usage_meter(self.loaded.config, resolved.name),
                    folders_made=new_thread), what="preparing the thread")  # acreate_thread made them
        if thread.thread_id in self._active_by_thread:
            raise ThreadBusy(thread.thread_id, run_id=self._active_by_thread[thread.thread_id])
        lease = self._lease_terms()
        self._active_by_thread[thread.thread_id] = record.run_id  # claimed here while the store decides
        try:  # the run and its lease on the thread, in one transaction (ThreadBusy: another process has it)
            await self.store.aio.create_run(record, lease=lease)
        except BaseException:
            self._active_by_thread.pop(thread.thread_id, None)
            raise
        live = LiveRun(record)
        self._live[record.run_id] = live
        metrics.run_started()
        notes = [{"kind": "config_reloaded", "text": config_note}] if config_note else []
        if notebook is not None:
            prompt = with_context(prompt, notebook[0])
            notes.append({"kind": "notebook_context", "text": notebook[1]})
        live.task = asyncio.create_task(self._run(live, lead, context, prompt, notes, lease))
        return live

    def _refresh_config(self) -> str | None:
        """Use an edited config file from this run on; the note to show, if it changed.

        Raises:
            ConfigError: the edited file is invalid (nothing runs until it is fixed).
        """
        change = self._config_watch.check()
        if change is None:
            return None
        self.loaded = change.loaded
        self.tool_cache.clear()
        self.graph_cache.clear()
        logger.info("%s", change.note())
        return change.note()

    async def _run(self, live: LiveRun, lead: Any, context: RunContext, prompt: str,
                   notes: list[dict[str, str]], lease: LeaseTerms) -> None:
        outcome = None
        publish = self.plugins.observe(live.publish)  # plugin observers see every event
        heartbeat = asyncio.create_task(self._heartbeat(context.thread_id, lease, on_lost=_canceller(live)))
        try:
            outcome = await execute_run(lead, context, prompt, publish, live.publish_raw, notes=notes)
        finally:
            heartbeat.cancel()
            projector = outcome.projector if outcome else None
            status = outcome.status if outcome else "cancelled"
            error = outcome.error if outcome else None
            if status == "cancelled" and self._stop_reason:  # the server is stopping: a run to continue later
                status, error = "error", f"interrupted: {self._stop_reason}"
            title = projector.title if projector else None
            finished = ev.RunFinished(
                run_id=live.run_id, thread_id=context.thread_id, seq=(projector.seq + 1) if projector else 1,
                status=status, text=projector.last_text if projector else "", title=title,
                artifacts=list(projector.artifacts) if projector else [],
                receipt=outcome.receipt if outcome else None,
                error=error, stopped_by=outcome.stopped_by if outcome else None,
                usage=context.services.usage_meter.summary() if context.services.usage_meter else None,
            )
            await self._record_end(live, finished, lease)  # before run_finished: a next run finds the thread free
            await publish(finished)
            self._settle(live, finished)
            note_settled_run(self.services, context, prompt, finished)  # memory learns later, off this path

    async def _record_end(self, live: LiveRun, finished: ev.RunFinished, lease: LeaseTerms) -> None:
        """Store the run's events and end, releasing its lease (off the event loop).

        A store that cannot answer (locked, broken) is logged, not raised: the run
        still finishes for its watchers; its lease lapses and the next start marks it interrupted.
        """
        events = [*live.events, finished]
        result = {"text": finished.text, "artifacts": finished.artifacts, "receipt": finished.receipt,
                  "workspace_changes": next((e.changes for e in events if isinstance(e, ev.WorkspaceChanges)),
                                            None), "stopped_by": finished.stopped_by, "usage": finished.usage}
        live.record.result = result
        try:
            await self.store.aio.record_run_end(  # one transaction: events, end, lease, thread title
                live.run_id, live.record.thread_id, events=[(e.seq, e.model_dump_json()) for e in events],
                status=finished.status, error=finished.error, result=result, lease_owner=lease.owner,
                title=finished.title)
        except (StorageError, sqlite3.Error) as exc:
            logger.error("could not record the end of run %s on thread %s (%s: %s)", live.run_id,
                         live.record.thread_id, type(exc).__name__, exc)

    def _settle(self, live: LiveRun, finished: ev.RunFinished) -> None:
        self._active_by_thread.pop(live.record.thread_id, None)
        live.record.status = finished.status
        live.record.error = finished.error
        live.record.updated_at = time.time()
        metrics.run_finished(user_id=live.record.user_id, finished=finished, events=live.events,
                             seconds=live.record.updated_at - live.record.created_at)
        live.release_raw_frames()  # state copies go once the streams attached now have read them
        self._forget_old_runs()

    def _forget_old_runs(self) -> None:
        """Finished runs stay joinable in memory for a while, then only in the store.

        Memory stays bounded by the runs' own output, not their threads' history:
        a finished run keeps its typed events but no raw LangGraph chunks (``values``
        are whole copies of the thread state: see :meth:`LiveRun.release_raw_frames`),
        and at most ``finished_runs_kept`` runs and ``finished_frames_kept`` frames
        are kept, oldest forgotten first (their events are in the store).
        """
        finished = [rid for rid, lv in self._live.items() if lv.done]
        frames = sum(len(self._live[rid].frames) for rid in finished)
        while len(finished) > 1 and (len(finished) > self.finished_runs_kept or frames > self.finished_frames_kept):
            frames -= len(self._live.pop(finished.pop(0)).frames)  # the newest finished run always stays

    def run_record(self, run_id: str, user_id: str, *, thread_id: str | None = None) -> RunRecord:
        """A run's record (live or stored); NotFoundError for unknown/foreign runs."""
        live = self.live(run_id, user_id)
        record = live.record if live is not None else self.store.get_run(run_id, user_id)
        return _known_run(record, run_id, thread_id)

    async def arun_record(self, run_id: str, user_id: str, *, thread_id: str | None = None) -> RunRecord:
        """:meth:`run_record` for async callers: the store is read off the event loop."""
        live = self.live(run_id, user_id)
        record = live.record if live is not None else await self.store.aio.get_run(run_id, user_id)
        return _known_run(record, run_id, thread_id)

    def live(self, run_id: str, user_id: str) -> LiveRun | None:
        live = self._live.get(run_id)
        return live if live and live.record.user_id == user_id else None

    async def cancel(self, run_id: str, user_id: str) -> bool:
        """Cancel a running run; False when it is not running (finished or unknown)."""
        live = self.live(run_id, user_id)
        if live is None or live.done or live.task is None:
            return False
        live.task.cancel()
        await asyncio.wait({live.task})
        return True

    def recorded_events(self, run_id: str, user_id: str) -> list[Any]:
        """Events of a run, live or from the store."""
        live = self.live(run_id, user_id)
        if live is not None:
            return list(live.events)
        if self.store.get_run(run_id, user_id) is None:
            raise NotFoundError(f"unknown run {run_id!r}")
        return [ev.parse_event(e) for e in self.store.events(run_id)]

    async def arecorded_events(self, run_id: str, user_id: str) -> list[Any]:
        """:meth:`recorded_events` for async callers: the store is read off the event loop."""
        live = self.live(run_id, user_id)
        if live is not None:
            return list(live.events)
        if await self.store.aio.get_run(run_id, user_id) is None:
            raise NotFoundError(f"unknown run {run_id!r}")
        return [ev.parse_event(e) for e in await self.store.aio.events(run_id)]


def _known_run(record: RunRecord | None, run_id: str, thread_id: str | None) -> RunRecord:
    if record is None or (thread_id is not None and record.thread_id != thread_id):
        raise NotFoundError(f"unknown run {run_id!r}")
    return record


def _usage_meter(config: AppConfig, model_name: str) -> UsageMeter:
    """The run's usage meter: counts every model call, enforces ``limits.max_tokens_per_run``."""
    meter = UsageMeter(default_model=model_name, budget=config.limits.max_tokens_per_run)
    meter.on_call = metrics.model_call
    return meter


def _canceller(live: LiveRun) -> Callable[[], None]:
    def cancel() -> None:
        if live.task is not None and not live.task.done():
            live.task.cancel()
    return cancel


def _str(path: Any) -> str | None:
    return str(path) if path is not None else None


def _jsonable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, type(None)))

"""The host's memory service: the store, injection, and debounced extraction off the run's path.

One per host (CLI, embedded client, Jupyter server), in ``RunContext.services``
as ``services.memory``.  After a run has settled (its ``run_finished``
is published and recorded) the host calls :meth:`MemoryService.after_run`,
which only queues the run's :class:`~deerflow.memory.extraction.Exchange` and
(re)arms a per-(user, agent) timer: a burst of runs costs one extraction after
``memory.debounce_seconds`` of quiet.  Extractions run one at a time, each
within ``memory.extraction_timeout``.  :meth:`aclose` gives pending
extractions ``memory.shutdown_grace_seconds`` to finish, then cancels them: a
stop never hangs on a slow model.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.store.base import BaseStore

from deerflow.config.schema import AppConfig
from deerflow.errors import UserError
from deerflow.memory.book import MemoryBook
from deerflow.memory.changes import ChangeRecord, find_change, record_changes
from deerflow.memory.extraction import Applied, Exchange, apply_changes, propose
from deerflow.memory.prompt import memory_block
from deerflow.memory.store import open_store
from deerflow.run_options import RunOptions
from deerflow.runtime.services import HostServices

logger = logging.getLogger(__name__)

"""Key of the host's :class:`MemoryService` in ``RunContext.services``."""
_MAX_QUEUED = 10  # exchanges kept per (user, agent) while waiting; older ones are dropped
_MAX_SETTLED = 256  # runs whose extraction a view may still be waiting on

ModelFactory = Callable[[str | None], BaseChatModel]
Key = tuple[str, str | None]


def memory_enabled(options: RunOptions | None) -> bool:
    """False when the run asked for no memory (``--no-memory``, ``configurable.memory: false``)."""
    value = options.memory if options is not None else None
    return not (value is False or (isinstance(value, str) and value.strip().lower() in {"false", "off", "0", "no"}))


@dataclass
class _Pending:
    exchanges: list[Exchange] = field(default_factory=list)
    model_name: str | None = None
    timer: asyncio.Task[None] | None = None


class MemoryService:
    """Facts per user in a LangGraph store, and the extraction queue."""

    def __init__(self, store: BaseStore, *, config: AppConfig, model_factory: ModelFactory) -> None:
        self.store = store
        self.config = config
        self._model_factory = model_factory
        self._pending: dict[Key, _Pending] = {}
        self._running: set[asyncio.Task[Any]] = set()
        self._one_at_a_time = asyncio.Lock()
        self.last_applied: dict[Key, Applied] = {}  # the latest extraction per (user, agent), for views and tests
        self._settled: dict[str, asyncio.Event] = {}  # run id -> set once its extraction is over (or dropped)
        # Store calls run on threads the service owns, so closing can wait for them: the store's
        # connection closes right after aclose(), and SQLite crashes the process when a connection
        # is closed under a thread still using it (a watcher's read cancelled by its caller goes on).
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="deerflow-memory")
        self._closed = False

    @classmethod
    def open(cls, config: AppConfig, *, home: Path, stack: ExitStack | AsyncExitStack, model_factory: ModelFactory) -> MemoryService:
        """Open the store (``stack`` closes it)."""
        store = open_store(config.storage, home=home, stack=stack, embedding=config.memory.embedding)
        return cls(store, config=config, model_factory=model_factory)

    def book(self, user_id: str, agent: str | None = None) -> MemoryBook:
        return MemoryBook(self.store, user_id, agent=agent, max_facts=self.config.memory.max_facts)

    def block_for(self, user_id: str, agent: str | None, query: str, *, config: AppConfig | None = None) -> str:
        """The memory block for a run's system prompt ("" when off or empty); reads the store (blocking).

        ``config`` is the run's (an edited config.yaml applies from the next run); else the host's.
        """
        settings = (config or self.config).memory
        if not (settings.enabled and settings.injection_enabled) or settings.max_injection_tokens <= 0:
            return ""
        return memory_block(self.book(user_id, agent).relevant(query, max_tokens=settings.max_injection_tokens))

    async def prompt_block(self, user_id: str, agent: str | None, query: str, *,
                           config: AppConfig | None = None) -> str:
        """:meth:`block_for`, with the store read off the event loop ("" once the service is closed)."""
        if self._closed:
            return ""
        return await self.in_store(self.block_for, user_id, agent, query, config=config)

    async def in_store(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` (a blocking store call) on the service's threads; :meth:`aclose` waits for it.

        Raises:
            UserError: the service is closed (the server is stopping).
        """
        if self._closed:
            raise UserError("memory is closed: the server is stopping")
        return await asyncio.wrap_future(self._executor.submit(functools.partial(fn, *args, **kwargs)))

    def after_run(self, exchange: Exchange, *, user_id: str, agent: str | None, model_name: str | None,
                  attended: bool, options: RunOptions) -> bool:
        """Queue a settled run for extraction; False when memory must not learn from it.

        Never blocks and never raises for memory reasons: the run is already over.
        """
        settings = self.config.memory
        if not settings.enabled or not memory_enabled(options) or options.replay:
            return False
        if not attended and not settings.from_unattended:
            return False
        if not exchange.user_text.strip():
            return False
        key = (user_id, agent)
        pending = self._pending.setdefault(key, _Pending())
        for dropped in pending.exchanges[:-_MAX_QUEUED + 1]:
            self._settle(dropped.run_id)
        pending.exchanges = [*pending.exchanges, exchange][-_MAX_QUEUED:]
        self._settled.setdefault(exchange.run_id, asyncio.Event())
        while len(self._settled) > _MAX_SETTLED:
            self._settled.pop(next(iter(self._settled))).set()
        pending.model_name = settings.model_name or model_name
        if pending.timer is not None:
            pending.timer.cancel()
        pending.timer = self._spawn(self._after_quiet(key, settings.debounce_seconds))
        return True

    async def changes_after(self, user_id: str, agent: str | None, run_id: str, *,
                            timeout: float) -> ChangeRecord | None:
        """What memory learned from ``run_id``, once its extraction is over (at most ``timeout`` s).

        None when the run taught nothing (no memory, nothing new, or not over in time).
        """
        event = self._settled.get(run_id)
        if event is not None:
            try:
                async with asyncio.timeout(timeout):
                    await event.wait()
            except TimeoutError:
                return None
        if not run_id or self._closed:
            return None
        return await self.in_store(find_change, self.book(user_id, agent), run_id)

    def _settle(self, run_id: str) -> None:
        event = self._settled.pop(run_id, None)
        if event is not None:
            event.set()

    async def flush(self) -> None:
        """Run every pending extraction now and wait for them (tests, shutdown)."""
        for key, pending in list(self._pending.items()):
            if pending.timer is not None:
                pending.timer.cancel()
            pending.timer = self._spawn(self._after_quiet(key, 0))
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    async def aclose(self) -> None:
        """Give pending extractions a bounded grace, then cancel what is left."""
        try:
            async with asyncio.timeout(self.config.memory.shutdown_grace_seconds):
                await self.flush()
        except TimeoutError:
            logger.warning("memory: extraction still running at shutdown; cancelled")
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*list(self._running), return_exceptions=True)
        self._closed = True  # no new store call starts; the ones running finish before the store closes
        await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    async def _after_quiet(self, key: Key, delay: float) -> None:
        await asyncio.sleep(delay)
        pending = self._pending.get(key)
        if pending is None or pending.timer is not asyncio.current_task():
            return
        del self._pending[key]
        try:
            async with self._one_at_a_time:
                await self._extract(key, pending)
        finally:
            for exchange in pending.exchanges:
                self._settle(exchange.run_id)

    async def _extract(self, key: Key, pending: _Pending) -> None:
        user_id, agent = key
        book = self.book(user_id, agent)
        last = pending.exchanges[-1]
        try:
            model = self._model_factory(pending.model_name)
            facts = await self.in_store(book.list)
            async with asyncio.timeout(self.config.memory.extraction_timeout):
                changes = await propose(model, pending.exchanges, facts)
            applied = await self.in_store(
                apply_changes, book, changes, threshold=self.config.memory.confidence_threshold,
                source={"kind": "extracted", "thread_id": last.thread_id, "run_id": last.run_id})
            await self.in_store(  # what a person sees and may undo ("memory: +2 facts")
                record_changes, book, runs=[e.run_id for e in reversed(pending.exchanges)],
                thread_id=last.thread_id, added=applied.facts_added, updated=applied.facts_updated,
                removed=applied.facts_removed)
        except TimeoutError:
            logger.warning("memory: extraction for user %s timed out after %ss", user_id,
                           self.config.memory.extraction_timeout)
            return
        except UserError as exc:  # an unknown memory.model_name, a script problem...
            logger.warning("memory: extraction for user %s skipped: %s", user_id, exc)
            return
        except Exception:  # a provider failure must not reach the host's loop; logged with its cause
            logger.exception("memory: extraction for user %s (thread %s) failed", user_id, last.thread_id)
            return
        self.last_applied[key] = applied
        if applied.added or applied.updated or applied.removed or applied.dropped:
            logger.info("%s for user %s (thread %s, %d dropped)", applied.summary(), user_id,
                        last.thread_id, len(applied.dropped), extra={"fields": {
                            "event": "memory_extracted", "user": user_id, "thread": last.thread_id,
                            "run": last.run_id, "added": len(applied.added), "updated": len(applied.updated),
                            "removed": len(applied.removed), "dropped": len(applied.dropped)}})


def note_settled_run(services: HostServices, context: Any, prompt: str, finished: Any) -> None:
    """The host's hook after a run settled: queue its user message and final answer for extraction.

    Only successful runs teach memory; the mode decides whether an unattended run may.
    """
    service = services.memory
    if not isinstance(service, MemoryService) or getattr(finished, "status", None) != "success":
        return
    service.config = context.config  # the config the run had: an edited memory section applies from here
    exchange = Exchange(user_text=prompt, answer_text=finished.text or "", thread_id=context.thread_id,
                        run_id=context.run_id)
    service.after_run(exchange, user_id=context.user_id, agent=context.options.agent_name,
                      model_name=context.model_name, attended=context.interaction.attended,
                      options=context.options)


async def learned_from_run(services: HostServices, user_id: str, agent: str | None, run_id: str, *,
                           now: bool = False, timeout: float | None = None) -> ChangeRecord | None:
    """What memory learned from ``run_id`` (None: nothing, or memory is off on this host).

    ``now`` runs pending extractions at once instead of after the quiet spell (the
    CLI, which is about to exit anyway); else wait up to ``timeout`` (default: the
    quiet spell plus the extraction deadline).
    """
    service = services.memory
    if not isinstance(service, MemoryService):
        return None
    settings = service.config.memory
    if now:
        async with asyncio.timeout(settings.extraction_timeout + 5):
            await service.flush()
    wait = timeout if timeout is not None else settings.debounce_seconds + settings.extraction_timeout + 5
    return await service.changes_after(user_id, agent, run_id, timeout=wait)

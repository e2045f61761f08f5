"""What a host may ask of the run manager besides runs and threads (mixed into ``RunManager``).

Hosts (the client, the CLI, the HTTP handlers, the chat, the kernel's local backend) never read
the manager's store, paths, config holder or services: each thing they need is a narrow method
here, named for what it asks (``tests/unit/test_layout.py`` fails on a host reaching in).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, TypeVar

from deerflow.browser.service import live_frames
from deerflow.memory.service import learned_from_run
from deerflow.tools.builtins.agent_tools import host_catalog

if TYPE_CHECKING:
    from deerflow.config.loader import LoadedConfig
    from deerflow.config.paths import HomePaths, ThreadPaths
    from deerflow.config.schema import AppConfig
    from deerflow.custom_agents.definition import AgentCatalog
    from deerflow.mcp.manager import McpManager
    from deerflow.memory.changes import ChangeRecord
    from deerflow.memory.service import MemoryService
    from deerflow.notebooks.access import NotebookAccess
    from deerflow.persistence.store import MetadataStore, RunRecord, ThreadRecord
    from deerflow.runtime.services import HostServices
    from deerflow.skills.library import SkillLibrary
    from deerflow.subagents.batches.submitter import BatchSubmitter

T = TypeVar("T")


class HostQueries:
    """The host-facing queries of :class:`~deerflow.runs.manager.RunManager` (which sets the parts below)."""

    loaded: LoadedConfig
    home: HomePaths
    store: MetadataStore
    services: HostServices

    @property
    def config(self) -> AppConfig:
        """The configuration in force (an edited file applies from the next run)."""
        return self.loaded.config

    @property
    def skills(self) -> SkillLibrary | None:
        """The host's skill library (None before :meth:`open` set it)."""
        return self.services.skills

    @property
    def mcp(self) -> McpManager | None:
        """The MCP servers' manager (None before :meth:`open` set it)."""
        return self.services.mcp

    @property
    def batch_submitter(self) -> BatchSubmitter | None:
        """The durable batches' submitter (None when ``subagents.batches`` is off on this host)."""
        runtime = self.services.subagents
        return runtime.submitter if runtime is not None else None

    @property
    def memory(self) -> MemoryService | None:
        """What DeerFlow remembers (None when memory is off on this host)."""
        return self.services.memory

    def use_notebooks(self, access: NotebookAccess, *, replace: bool = True) -> None:
        """Give runs the user's notebooks (the Jupyter server's contents, or a folder);
        ``replace=False`` keeps an access a host already gave. The access keeps rendered
        notebooks under the home's ``cache/notebooks`` and, if it saves by path, is told the
        users' folders (sandboxed code can swap links there)."""
        if replace or self.services.notebooks is None:
            self.services.notebooks = access
        current = self.services.notebooks
        if current.stored is None:  # rendered notebooks on disk, shared by processes
            current.keep_in(self.home.home / "cache" / "notebooks")
        sandboxed_in = getattr(current, "sandboxed_in", None)
        if callable(sandboxed_in):  # a path-following save never writes where sandboxes can
            sandboxed_in(self.home.users_root)

    def notebooks(self) -> NotebookAccess | None:
        """The notebook access runs get (None: no notebooks reachable from this host)."""
        return self.services.notebooks

    def thread_paths(self, user_id: str, thread_id: str) -> ThreadPaths:
        """The host folders of a thread the caller has already looked up (:meth:`athread`);
        what is inside them is the agent's: read it through ``VirtualFS``/``SafeDir`` only."""
        return self.home.thread(user_id, thread_id)

    async def find_thread(self, thread_id: str, user_id: str) -> ThreadRecord | None:
        """The user's thread, or None (no error): for hosts that create it when absent."""
        return await self.store.aio.get_thread(thread_id, user_id)

    async def list_threads(self, user_id: str, *, limit: int = 100, offset: int = 0) -> list[ThreadRecord]:
        """The user's threads, newest first, a page at a time."""
        return await self.store.aio.list_threads(user_id, limit=limit, offset=offset)

    async def list_runs(self, thread_id: str, user_id: str) -> list[RunRecord]:
        """The thread's recorded runs (the caller checks the thread is the user's)."""
        return await self.store.aio.list_runs(thread_id, user_id)

    async def runs_since(self, since: float | None = None, *, user_id: str | None = None) -> list[RunRecord]:
        """Runs recorded since ``since`` (every user's when ``user_id`` is None: the admin usage view)."""
        return await self.store.aio.runs_since(since, user_id=user_id)

    async def with_records(self, work: Callable[[MetadataStore], T]) -> T:
        """``work(records)`` off the event loop within the store's deadline: for host objects
        built over the thread records (a ``ScheduleBook`` checking a thread's owner)."""
        return await self.store.aio.run(work, self.store)

    async def learned_from_run(self, user_id: str, agent: str | None, run_id: str, *, now: bool = False,
                               timeout: float | None = None) -> ChangeRecord | None:
        """What memory learned from ``run_id`` (:func:`deerflow.memory.service.learned_from_run`)."""
        return await learned_from_run(self.services, user_id, agent, run_id, now=now, timeout=timeout)

    def agent_catalog(self, user_id: str, home: HomePaths | None = None) -> AgentCatalog:
        """What a run on this host would offer a custom agent (tools, skills), for changes made
        outside a run; ``home`` is the host's own paths (default: the manager's)."""
        return host_catalog(self.loaded.config, home or self.home, user_id, services=self.services)

    def browser_frames(self, thread_id: str, user_id: str, *, interval: float = 0.5,
                       max_frames: int | None = None) -> AsyncGenerator[bytes, None]:
        """Live JPEG frames of the thread's browser page; the caller has checked the thread is the user's."""
        return live_frames(self.services, thread_id, user_id, interval=interval, max_frames=max_frames)


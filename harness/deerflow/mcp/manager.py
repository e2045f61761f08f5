"""The MCP manager: lazy discovery, the catalog cache, sessions and calls.

One manager per :class:`~deerflow.runs.manager.RunManager` (no globals); it
reaches the rest of the harness only through what it is given.  Its life:

1. **Nothing starts** when it is created.  The first run that needs tools
   calls :meth:`McpManager.prepare_run`: the config file is read, every enabled
   server not yet discovered is started *concurrently* in that run's thread
   workspace (stdio) or connected to (SSE/HTTP), within its
   ``session_init_timeout``, and listed.  A server that fails is reported —
   a ``notice`` event for the run and one log line — and skipped; the others
   work.  It is retried after :attr:`McpManager.retry_after` seconds.
2. **The catalog is cached** by the file's resolved path and content hash.
   Each later run costs one small read and one hash, in a worker thread (:meth:`McpManager.acatalog`);
   an edited file is picked up by the next run, servers whose entry did not
   change keep their tools and sessions.  :meth:`McpManager.reset` drops
   everything (client ``reset_mcp()``, ``deerflow mcp reset``, the server API).
3. **Calls** open (or reuse) the session of (server, user, thread), with that
   user's credentials (failing closed when a required one is missing), and map
   results, errors and timeouts for the model (:mod:`deerflow.mcp.results`).
4. :meth:`McpManager.aclose` (from ``RunManager.close``) ends every session.

Secrets never leave through here: every message is passed through the
manager's :class:`~deerflow.mcp.secrets.Redactor`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command

from deerflow.config.loader import ExtensionsLocation, LoadedConfig, resolve_extensions
from deerflow.config.paths import HomePaths
from deerflow.errors import ToolFailure
from deerflow.mcp.catalog import Catalog, ServerState
from deerflow.mcp.config import (
    ConfigSignature,
    McpConfigSnapshot,
    McpServerConfig,
    parse_snapshot,
    read_signature,
)
from deerflow.mcp.credentials import (
    CredentialError,
    CredentialMissing,
    TokenProvider,
    UserCredential,
    UserCredentialStore,
    resolve_credentials,
)
from deerflow.mcp.deferral import DeferredCatalog, ServerInfo
from deerflow.mcp.results import map_result
from deerflow.mcp.run_tools import McpRunTools
from deerflow.mcp.secrets import Redactor, config_secrets
from deerflow.mcp.sessions import SessionPool
from deerflow.mcp.task_tools import make_task_tools
from deerflow.mcp.tasks import TaskService, TaskStore
from deerflow.mcp.tool_search import make_tool_search
from deerflow.mcp.tools import ToolSpec, make_tool, server_specs
from deerflow.mcp.transport import (
    ConnectSpec,
    ServerUnavailable,
    SessionKey,
    describe,
    transport_errors,
)
from deerflow.persistence.aio import guard_loop
from deerflow.persistence.offloop import off_loop
from deerflow.runtime.services import HostServices

if TYPE_CHECKING:  # the MCP SDK loads with the first session, not with the host
    import mcp_types

logger = logging.getLogger(__name__)

DISCOVERY_THREAD = "_discovery"


def call_errors() -> tuple[type[BaseException], ...]:
    """What a failed connect or call raises (the SDK's own error among them: see ``transport_errors``)."""
    return (ServerUnavailable, CredentialError, *transport_errors())


@dataclass(frozen=True)
class McpOptions:
    """Host settings of the MCP layer.

    Attributes:
        idle_timeout: Seconds before an unused session is closed.
        retry_after: Seconds before a failed server is tried again.
        tool_search: Defer MCP schemas behind ``tool_search``.
        max_search_results: Tools one keyword search returns.
    """

    idle_timeout: float = 600.0
    retry_after: float = 60.0
    tool_search: bool = False
    max_search_results: int = 5


class McpManager:
    """MCP servers of one host: config cache, discovery, sessions, calls."""

    def __init__(self, *, extensions_path: Path | ExtensionsLocation, home: HomePaths,
                 options: McpOptions | None = None, env: dict[str, str] | None = None) -> None:
        self.where = extensions_path  # a location is resolved at each read (the file beside config.yaml may appear)
        self.home = home
        self.options = options or McpOptions()
        self.retry_after = self.options.retry_after
        self.pool = SessionPool(idle_timeout=self.options.idle_timeout)
        self.credentials = UserCredentialStore(home)
        self.redact = Redactor()
        self._env = env
        self._catalog: Catalog | None = None
        self._discovery = asyncio.Lock()
        self._providers: dict[tuple[str, str], TokenProvider] = {}
        self._tasks: TaskService | None = None

    # -- config ------------------------------------------------------------------------------
    def catalog(self) -> Catalog:
        """The catalog of the file as it is now (cheap when the file did not change), for sync callers.

        It reads the file on the calling thread: coroutines await :meth:`acatalog` instead (with
        ``DEERFLOW_LOOP_GUARD=1`` a call on an event loop's thread raises ``LoopBlocked``).
        """
        guard_loop("McpManager.catalog()", instead="await McpManager.acatalog()")
        return self._refresh(*self._read())

    async def acatalog(self) -> Catalog:
        """:meth:`catalog` for async code: the read, realpath and hash run off the event loop.

        Only the file part moves to a thread (:func:`~deerflow.persistence.offloop.off_loop`: a
        file that does not answer in time is ``DiskUnavailable``, "try again shortly"); comparing
        the signature, parsing a changed file and closing the sessions of changed servers stay on
        the loop, which owns the catalog and the pool.
        """
        return self._refresh(*await off_loop(self._read, what="reading the MCP config"))

    def _read(self) -> tuple[ConfigSignature, bytes | None]:
        """The signature and bytes of the file the location points to now (blocking: stat, read, hash)."""
        return read_signature(resolve_extensions(self.where))

    def _refresh(self, signature: ConfigSignature, data: bytes | None) -> Catalog:
        """The cached catalog if ``signature`` is the one it was built from, else its successor."""
        current = self._catalog
        if current is not None and current.snapshot.signature == signature:
            return current
        snapshot = parse_snapshot(signature, data, env=self._env)
        self._learn_secrets(snapshot)
        if current is None:
            self._catalog = Catalog.fresh(snapshot)
        else:
            self._catalog, changed = current.successor(snapshot)
            if changed:
                logger.info("MCP config %s changed; restarting servers: %s", signature.path, sorted(changed))
                self.pool.close_servers(changed)
        return self._catalog

    def _learn_secrets(self, snapshot: McpConfigSnapshot) -> None:
        for config in snapshot.enabled().values():
            self.redact.add(*config_secrets(config))

    async def server_config(self, server: str) -> McpServerConfig | None:
        """The config of an enabled, valid server of the file as it is now (None otherwise)."""
        state = (await self.acatalog()).servers.get(server)
        return state.config if state is not None and state.status != "disabled" else None

    # -- discovery ---------------------------------------------------------------------------
    async def prepare_run(self, *, user_id: str, thread_id: str | None) -> McpRunTools:
        """Discover what is still unknown and return the run's MCP tools and notices."""
        catalog = await self.acatalog()
        if any(s.config is not None and s.config.credentials.scope == "user" for s in catalog.servers.values()):
            await self.credentials.load(user_id)  # the user's own credentials, read off the loop once per run
        notices: list[dict[str, Any]] = []
        if catalog.snapshot.file_error:
            notices.append(_notice("mcp_config_error", f"MCP servers skipped: {catalog.snapshot.file_error}"))
        if catalog.pending(now=time.monotonic(), retry_after=self.retry_after):
            async with self._discovery:
                pending = catalog.pending(now=time.monotonic(), retry_after=self.retry_after)
                found = await asyncio.gather(*(self._discover(catalog.servers[n], user_id, thread_id)
                                               for n in pending))
                notices += [n for n in found if n]
        notices += self._state_notices(catalog, user_id)
        if self._has_tasks(catalog):
            await self._tasks_service().resume()
        return self._run_view(catalog, user_id, thread_id or DISCOVERY_THREAD, notices)

    async def _discover(self, state: ServerState, user_id: str, thread_id: str | None) -> dict[str, Any] | None:
        """Start and list one server; returns a per-run notice when the user cannot use it yet."""
        config = state.config
        assert config is not None
        key = SessionKey(state.name, user_id, thread_id or DISCOVERY_THREAD)
        try:
            async with self.pool.lease(key, lambda: self._connect_spec(state.name, config, key)) as conn:
                async with asyncio.timeout(config.session_init_timeout):
                    raw = await conn.list_tools()
        except CredentialMissing as exc:
            return _notice("mcp_credential_missing", self.redact(str(exc)), server=state.name)
        except TimeoutError:
            self._failed(state, f"listing its tools took longer than {config.session_init_timeout:g}s")
            return None
        except call_errors() as exc:
            self._failed(state, str(exc) if isinstance(exc, (ServerUnavailable, CredentialError)) else describe(exc))
            return None
        self._install(state, config, raw)
        return None

    def _failed(self, state: ServerState, reason: str) -> None:
        """Record a failed start (retried after ``retry_after``): one log line, notices in each run."""
        state.status, state.error, state.failed_at = "failed", self.redact(reason), time.monotonic()
        state.specs, state.tools = [], []
        logger.warning("MCP server %s skipped: %s", state.name, state.error)

    def _install(self, state: ServerState, config: McpServerConfig, raw: list[mcp_types.Tool]) -> None:
        dropped: list[str] = []

        def warn(message: str) -> None:
            dropped.append(message)
            logger.warning("%s", message)

        hidden = {config.tasks.status, config.tasks.cancel} if config.tasks else set()
        raw = [t for t in raw if t.name not in hidden]
        specs = server_specs(state.name, raw, prefix=config.prefix(state.name), include=config.include_tools,
                             exclude=config.exclude_tools, warn=warn)
        state.status, state.error, state.failed_at, state.dropped = "ok", None, None, dropped
        state.specs, state.tools = specs, [make_tool(s, self) for s in specs]

    def _state_notices(self, catalog: Catalog, user_id: str) -> list[dict[str, Any]]:
        notices = []
        for state in catalog.servers.values():
            if state.status in {"failed", "invalid"}:
                notices.append(_notice("mcp_server_unavailable",
                                       f"MCP server {state.name!r} skipped: {state.error}", server=state.name))
            elif state.status == "ok" and state.config and state.config.credentials.scope == "user" \
                    and self.credentials.get(user_id, state.name) is None:
                notices.append(_notice("mcp_credential_missing", f"MCP server {state.name!r} needs your own "
                                       "credential; its tools fail until you add one", server=state.name))
        return notices

    def _run_view(self, catalog: Catalog, user_id: str, thread_id: str,
                  notices: list[dict[str, Any]]) -> McpRunTools:
        tools: list[BaseTool] = catalog.tools()
        view = McpRunTools(tools=list(tools), notices=notices, user_id=user_id, thread_id=thread_id)
        if self._has_tasks(catalog):
            view.tasks = self._tasks_service()
            view.tools += make_task_tools(view.tasks)
        if self.options.tool_search and tools:
            specs = {s.name: s for state in catalog.servers.values() if state.status == "ok" for s in state.specs}
            servers = {n: ServerInfo(s.config.description, s.config.routing)
                       for n, s in catalog.servers.items() if s.config is not None}
            view.deferred = DeferredCatalog(specs, servers, self.options.max_search_results)
            view.tools.append(make_tool_search(lambda: view.deferred))
        return view

    # -- sessions and calls ------------------------------------------------------------------
    def _connect_spec(self, server: str, config: McpServerConfig, key: SessionKey) -> ConnectSpec:
        creds = resolve_credentials(server, config, key.user_id, store=self.credentials,
                                    providers=self._providers, on_secret=self.redact.add)
        self.redact.add(*creds.secrets)
        cwd = (self.home.user_dir(key.user_id) / "mcp-discovery" if key.thread_id == DISCOVERY_THREAD
               else self.home.thread(key.user_id, key.thread_id).workspace)
        return ConnectSpec(server, config, creds, cwd=cwd, errlog=self.home.home / "logs" / "mcp" / f"{server}.log")

    async def call_tool(self, spec: ToolSpec, arguments: dict[str, Any],
                        runtime: ToolRuntime[Any]) -> ToolMessage | Command[Any]:
        """Run one MCP tool call for the run in ``runtime`` (the tools' :class:`ToolCaller`).

        Raises:
            ToolFailure: the server is gone, refused, timed out or reported an error;
                the credential is missing (fail closed).  The message is redacted.
        """
        ctx = runtime.context
        config = await self.server_config(spec.server)
        if config is None:
            raise ToolFailure(f"MCP server {spec.server!r} is no longer configured", code="mcp_unavailable")
        result = await self._remote(spec.server, config, ctx.user_id, ctx.thread_id, spec.remote_name, arguments)
        call_id = runtime.tool_call_id or "call"
        outcome = map_result(result, server=spec.server, tool=spec.remote_name, call_id=call_id, paths=ctx.paths)
        if outcome.is_error:
            raise ToolFailure(self.redact(outcome.text), code="mcp_tool_error")
        outcome.structured = self.redact.deep(outcome.structured)
        if config.tasks is not None and spec.remote_name == config.tasks.submit:
            return await self._task_submitted(spec, result, ctx, call_id)
        message = ToolMessage(content=self.redact(outcome.text), tool_call_id=call_id, name=spec.name,
                              artifact=outcome.artifact(spec.server, spec.remote_name))
        if outcome.images:
            return Command(update={"messages": [message], "artifacts": outcome.images})
        return message

    async def _remote(self, server: str, config: McpServerConfig, user_id: str, thread_id: str,
                      tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        import mcp_types  # a call needs a session: the SDK is loaded by now
        from mcp.shared.exceptions import MCPError

        if config.credentials.scope == "user" and self.credentials.get(user_id, server) is None:
            raise ToolFailure(f"MCP server {server!r} needs your own credential and you have none: the call "
                              "was not made", code="mcp_credential_missing")
        key = SessionKey(server, user_id, thread_id)
        try:
            async with self.pool.lease(key, lambda: self._connect_spec(server, config, key)) as conn:
                return await conn.call_tool(tool, arguments, timeout=config.tool_call_timeout)
        except CredentialMissing as exc:
            raise ToolFailure(self.redact(str(exc)), code="mcp_credential_missing") from None
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise ToolFailure(f"MCP tool {tool!r} on server {server!r} did not answer within "
                                  f"{config.tool_call_timeout:g}s; the call was cancelled", code="mcp_timeout") from None
            raise ToolFailure(f"MCP server {server!r} refused the call: {self.redact(exc.message)}",
                              code="mcp_error") from None
        except (ServerUnavailable, CredentialError) as exc:
            raise ToolFailure(f"MCP server {server!r} is unavailable: {self.redact(str(exc))}",
                              code="mcp_unavailable") from None
        except transport_errors() as exc:
            raise ToolFailure(f"MCP server {server!r} failed: {self.redact(describe(exc))}",
                              code="mcp_error") from None

    # -- long-running tasks ------------------------------------------------------------------
    @staticmethod
    def _has_tasks(catalog: Catalog) -> bool:
        return any(s.status == "ok" and s.config and s.config.tasks for s in catalog.servers.values())

    def _tasks_service(self) -> TaskService:
        if self._tasks is None:
            async def config_for(server: str) -> Any:
                config = await self.server_config(server)
                return config.tasks if config is not None else None

            self._tasks = TaskService(TaskStore(self.home.store(self.home.home / "mcp-tasks.db")), self._task_remote, config_for,
                                      redact=self.redact)
        return self._tasks

    async def _task_remote(self, server: str, user_id: str, thread_id: str, tool: str,
                           arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        config = await self.server_config(server)
        if config is None:
            raise ServerUnavailable(f"server {server!r} is no longer configured")
        try:
            return await self._remote(server, config, user_id, thread_id, tool, arguments)
        except ToolFailure as exc:
            raise ServerUnavailable(exc.message) from None

    async def _task_submitted(self, spec: ToolSpec, result: mcp_types.CallToolResult, ctx: Any,
                        call_id: str) -> ToolMessage:
        try:
            record = await self._tasks_service().submitted(server=spec.server, tool=spec.remote_name,
                                                     user_id=ctx.user_id, thread_id=ctx.thread_id, result=result)
        except ValueError as exc:
            raise ToolFailure(f"MCP task could not be tracked: {exc}", code="mcp_task_error") from None
        text = (f"Submitted as background task {record.id} on server {spec.server!r}. It keeps running after "
                f"this step: check it with mcp_task_status(task_id={record.id!r}), cancel it with "
                "mcp_task_cancel, or carry on; its result is reported to this thread when it finishes.")
        return ToolMessage(content=text, tool_call_id=call_id, name=spec.name,
                           artifact={"mcp_server": spec.server, "task": record.public()})

    # -- management --------------------------------------------------------------------------
    async def discover(self, *, user_id: str = "local") -> Catalog:
        """Discover every server now (for ``deerflow mcp tools`` and the API)."""
        await self.prepare_run(user_id=user_id, thread_id=None)
        return await self.acatalog()

    async def check_config(self) -> None:
        """Raise the ``ConfigError`` (naming the file) of an ``extensions_config.json`` that gives no
        servers at all: a listing that depends on it must not answer with an empty config."""
        (await self.acatalog()).snapshot.check()

    async def servers(self) -> list[dict[str, object]]:
        """Each configured server's state (JSON-able, no secrets)."""
        catalog = await self.acatalog()
        out = [state.summary() for state in catalog.servers.values()]
        for item in out:
            item["error"] = self.redact(str(item["error"])) if item["error"] else None
        return out

    async def tool_list(self) -> list[dict[str, str]]:
        """Every discovered tool: exposed name, server, the server's own name, description."""
        return [{"name": spec.name, "server": spec.server, "mcp_name": spec.remote_name,
                 "description": spec.description}
                for state in (await self.acatalog()).servers.values() if state.status == "ok"
                for spec in state.specs]

    async def set_user_credential(self, user_id: str, server: str, credential: UserCredential | None) -> None:
        """Store a user's own credential for a server; their sessions to it reopen with it."""
        await self.credentials.aset(user_id, server, credential)
        if credential is not None:
            self.redact.add(*credential.secrets())
        self._providers.pop((server, user_id), None)
        self.pool.close_where(lambda key: key.server == server and key.user_id == user_id)

    async def reset(self) -> None:
        """Forget the catalog, tokens and sessions; the next run rediscovers everything."""
        self._catalog = None
        self._providers.clear()
        await self.pool.aclose()
        logger.info("MCP cache reset")

    async def aclose(self) -> None:
        if self._tasks is not None:
            await self._tasks.aclose()
            self._tasks = None
        await self.pool.aclose()


def _notice(kind: str, text: str, **data: Any) -> dict[str, Any]:
    return {"type": "notice", "kind": kind, "text": text, "data": data}


def open_mcp(loaded: LoadedConfig, home: HomePaths) -> McpManager:
    """The MCP manager of a host, from ``config.yaml`` settings; nothing starts yet."""
    config = loaded.config
    options = McpOptions(idle_timeout=config.mcp.session_idle_timeout, retry_after=config.mcp.retry_failed_after,
                         tool_search=config.tool_search.enabled, max_search_results=config.tool_search.max_results)
    return McpManager(extensions_path=loaded.extensions, home=home, options=options)


async def prepare_mcp_run(services: HostServices, *, user_id: str, thread_id: str) -> McpRunTools | None:
    """The run's MCP view when the host has an MCP manager (None otherwise)."""
    manager = services.mcp
    if not isinstance(manager, McpManager):
        return None
    return await manager.prepare_run(user_id=user_id, thread_id=thread_id)

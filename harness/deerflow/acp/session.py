"""One conversation turn with an external ACP agent over stdio.

:func:`invoke` starts the configured command as a subprocess (the
``agent-client-protocol`` SDK's ``spawn_agent_process``), runs
``initialize`` → ``session/new`` (cwd = the thread's ACP workspace, plus the
enabled MCP servers) → ``session/prompt``, and returns what the agent *said*:
only ``agent_message_chunk`` text is collected; thought chunks, tool-call
updates and plans stay internal (counted, never concatenated).

The agent's working directory is the workspace the host *holds*: the folder is opened once
(no link followed at its own name) and the agent is started in ``/proc/self/fd/<that
descriptor>``, which the kernel resolves to that very directory, not to whatever the name
``acp-workspace`` (or the thread folder above it) points to a moment later.  The path told in
``session/new`` is the kernel's name for the held directory once the agent runs in it
(``readlink`` of the descriptor, what the agent's own ``getcwd()`` answers), never the result
of resolving the workspace's path again.

The client side we implement is deliberately small:

* file reads/writes are served only inside the workspace (the agent's cwd), through its
  held descriptor, no link followed (:class:`_WorkspaceClient`);
* permission requests are answered by :mod:`deerflow.acp.permissions`;
* terminals are not offered (``terminal: false``): the agent runs its own tools.

Failures are typed (:class:`AcpError` with a stable ``code``): a missing
executable names the setting to fix (``acp_agents.<name>.command``) instead of
surfacing a raw ``[Errno 2]``; an agent that crashes reports the tail of its
stderr; a turn has a deadline (``timeout_seconds``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallUpdate,
    WriteTextFileResponse,
)
from acp.transports import default_environment

from deerflow.acp.permissions import PermissionDecision, PermissionSetting, answer, decide
from deerflow.config.schema import AcpAgentConfig
from deerflow.errors import ToolFailure
from deerflow.persistence.offloop import DiskUnavailable, off_loop
from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:  # the tools layer sits above this one: the offloader is handed in by the tool
    from deerflow.tools.offload import Offloader

_T = TypeVar("_T")
MAX_READ_BYTES = 16 * 1024 * 1024
FILE_DEADLINE_S = 30.0
"""How long opening the workspace, or one file the agent reads or writes in it (at most 16 MB),
may take on the tool offloader: a stalled mount answers the tool (or the agent's request) with an
error instead of holding a thread of the loop's default executor for ever."""
"""The largest file the agent may read through the client (it lands in the agent's context)."""
CLIENT_INFO = Implementation(name="deerflow-notebook", title="DeerFlow Notebook", version="0.1")
_STDERR_TAIL = 1500


class AcpError(Exception):
    """An ACP call that failed; ``code`` is stable (``acp_executable_missing``, ``acp_timeout``...)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass
class AcpResult:
    """What one prompt turn produced.

    Attributes:
        text: The agent's message text (``agent_message_chunk`` only).
        stop_reason: ACP stop reason (``end_turn``, ``refusal``, ``cancelled``...).
        thought_chunks: How many thought chunks were received and kept internal.
        permissions: Every permission request and the policy's answer.
    """

    text: str
    stop_reason: str
    thought_chunks: int = 0
    permissions: list[PermissionDecision] = field(default_factory=list)


@dataclass(frozen=True)
class AcpInvocation:
    """Everything needed to talk to one configured agent for one run."""

    name: str
    config: AcpAgentConfig
    workspace: Path
    attended: bool
    mcp_servers: list[Any] = field(default_factory=list)  # ACP McpServer* models
    offloader: Offloader | None = None
    """Where the workspace's file work runs: the tool's offloader (None, outside a tool call: the
    server's :func:`~deerflow.persistence.offloop.off_loop`, same deadline)."""
    key: str = ""
    """The conversation that work counts against on the offloader (the run's thread)."""

    @property
    def permissions(self) -> PermissionSetting:
        return self.config.permissions


class _WorkspaceClient:
    """The client half of ACP: collects message text, confines files, answers permissions.

    The workspace is the agent's to shape (and the lead agent's prompt shapes the agent), so its
    files are served through the held :class:`SafeDir`: a path is checked lexically against the
    workspace, then opened once, beneath the held directory, with no link followed; the check on
    what was opened (a regular file) and the read use that one descriptor.  Resolving the path,
    then reading it by name again, let a link swapped in between reach any host file.
    """

    def __init__(self, invocation: AcpInvocation, workspace: SafeDir) -> None:
        self._inv = invocation
        self._dir = workspace
        self._roots: tuple[Path, ...] = (Path(os.path.abspath(invocation.workspace)),)
        self.parts: list[str] = []
        self.thoughts = 0
        self.decisions: list[PermissionDecision] = []

    def work_in(self, cwd: Path) -> Path:
        """Accept paths below ``cwd`` (the held directory's name, told to the agent) as well; returns it."""
        self._roots = (self._roots[0], cwd)
        return cwd

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk) and isinstance(update.content, TextContentBlock):
            self.parts.append(update.content.text)
        elif isinstance(update, AgentThoughtChunk):
            self.thoughts += 1

    async def request_permission(self, session_id: str, tool_call: ToolCallUpdate,
                                 options: list[PermissionOption], **kwargs: Any) -> RequestPermissionResponse:
        allowed, reason = decide(self._inv.permissions, attended=self._inv.attended)
        self.decisions.append(PermissionDecision(tool_call.title or tool_call.tool_call_id, allowed, reason))
        return answer(options, allowed=allowed)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        rel = self._inside(path)
        await self._off(path, self._dir.write_text, rel, content, what=f"writing {rel!r}")
        return WriteTextFileResponse()

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **kwargs: Any) -> ReadTextFileResponse:
        rel = self._inside(path)
        data = await self._off(path, self._dir.read_bytes, rel, max_bytes=MAX_READ_BYTES, what=f"reading {rel!r}")
        lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        chosen = lines[start:start + limit] if limit else lines[start:]
        return ReadTextFileResponse(content="".join(chosen))

    def _inside(self, path: str) -> str:
        """``path`` below the workspace, lexically (nothing on disk is consulted: the open that
        follows refuses links), or an ``invalid_params`` error for anything outside it."""
        candidate = Path(os.path.normpath(path if os.path.isabs(path) else self._roots[0] / path))
        for root in self._roots:
            if candidate.is_relative_to(root):
                return candidate.relative_to(root).as_posix()
        raise RequestError.invalid_params({"path": path, "reason": "outside the ACP workspace"})

    async def _off(self, path: str, operation: Callable[..., _T], *args: Any, what: str, **kwargs: Any) -> _T:
        """:meth:`_served` on the tool offloader within :data:`FILE_DEADLINE_S`; past it (or with too
        many of the conversation's calls stuck) the agent's request fails with an internal error
        naming what did not finish."""
        try:
            return await _offloaded(self._inv, self._served, path, operation, *args, what=what, **kwargs)
        except (ToolFailure, DiskUnavailable) as exc:
            raise RequestError.internal_error({"path": path, "reason": str(exc)}) from None

    @staticmethod
    def _served(path: str, operation: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``operation`` on the held workspace; a refusal becomes the agent's request error."""
        try:
            return operation(*args, **kwargs)
        except UnsafePath as exc:
            if exc.code == "not_found":
                raise RequestError.resource_not_found(path) from None
            raise RequestError.invalid_params({"path": path, "reason": exc.message}) from None


def resolve_command(invocation: AcpInvocation) -> str:
    """The executable to start, or an :class:`AcpError` naming the setting to fix."""
    command = invocation.config.command
    path = invocation.config.env.get("PATH") or os.environ.get("PATH")
    found = shutil.which(command, path=path)
    if found is None:
        raise AcpError(
            f"ACP agent {invocation.name!r} cannot start: executable {command!r} was not found"
            f"{'' if os.sep in command else ' on PATH'}. Install the agent's ACP adapter or set "
            f"acp_agents.{invocation.name}.command in config.yaml to its full path.",
            code="acp_executable_missing")
    return found


async def invoke(invocation: AcpInvocation, prompt: str) -> AcpResult:
    """Send ``prompt`` to the agent in a fresh session and return its answer.

    Raises:
        AcpError: missing executable, the agent failing or refusing the protocol, timeout.
    """
    command = resolve_command(invocation)
    workspace = await _open_off_loop(invocation)  # past its deadline: nothing started
    client = _WorkspaceClient(invocation, workspace)
    env = {**default_environment(), **invocation.config.env}
    with workspace, tempfile.TemporaryFile() as stderr:
        try:
            async with asyncio.timeout(invocation.config.timeout_seconds):
                stop = await _converse(invocation, client, command, env, stderr, prompt,
                                       workspace=workspace)
        except (FileNotFoundError, PermissionError) as exc:  # vanished or not executable after the PATH check
            raise AcpError(f"ACP agent {invocation.name!r} cannot start {command!r}: {exc.strerror}. Fix "
                           f"acp_agents.{invocation.name}.command in config.yaml.", code="acp_executable_missing") from None
        except TimeoutError:
            raise AcpError(f"ACP agent {invocation.name!r} did not finish within "
                           f"{invocation.config.timeout_seconds:g}s (acp_agents.{invocation.name}.timeout_seconds)",
                           code="acp_timeout") from None
        except (RequestError, ConnectionError, EOFError, OSError, RuntimeError) as exc:
            raise AcpError(f"ACP agent {invocation.name!r} failed: {_describe(exc)}{_tail(stderr)}",
                           code="acp_agent_failed") from None
    return AcpResult("".join(client.parts), stop, client.thoughts, client.decisions)


async def _offloaded(invocation: AcpInvocation, fn: Callable[..., _T], *args: Any, what: str, **kwargs: Any) -> _T:
    """``fn`` on the invocation's offloader (a tool call's: ToolFailure past the deadline), else on
    :func:`off_loop` (DiskUnavailable), within :data:`FILE_DEADLINE_S`."""
    if invocation.offloader is None:
        return await off_loop(fn, *args, what=what, deadline=FILE_DEADLINE_S, **kwargs)
    return await invocation.offloader.arun(fn, *args, key=invocation.key, what=what, deadline=FILE_DEADLINE_S,
                                           **kwargs)


async def _open_off_loop(invocation: AcpInvocation) -> SafeDir:
    """:func:`_open_workspace` off the loop, within :data:`FILE_DEADLINE_S`; a workspace an abandoned
    call opens after its caller gave up is closed when it opens (its descriptor is not leaked)."""
    lock, gone, opened = threading.Lock(), [False], []

    def open_unless_gone() -> SafeDir:
        workspace = _open_workspace(invocation)
        with lock:
            if gone[0]:
                workspace.close()
            else:
                opened.append(workspace)
        return workspace

    try:
        return await _offloaded(invocation, open_unless_gone, what=f"opening ACP agent {invocation.name!r}'s workspace")
    except BaseException:
        with lock:
            gone[0] = True
            for workspace in opened:  # opened just as the deadline passed: nobody else will close it
                workspace.close()
        raise


def _open_workspace(invocation: AcpInvocation) -> SafeDir:
    """The workspace, held by descriptor (blocking: run it in a thread).

    Raises:
        AcpError: ``acp_workspace_unsafe`` when the workspace is a link or not a folder, or
            cannot be handed to the agent by descriptor.
    """
    try:
        workspace = SafeDir.open(invocation.workspace, label=".", create=True)
    except UnsafePath as exc:
        raise _unsafe(invocation, f"is not a plain folder ({exc})") from None
    try:
        _held_path(invocation, workspace)  # no /proc, or already gone: refused before anything starts
    except AcpError:
        workspace.close()
        raise
    return workspace


def _held_path(invocation: AcpInvocation, workspace: SafeDir) -> Path:
    """The kernel's path of the directory ``workspace`` holds, as it is named now.

    Read from the descriptor (``readlink`` of ``/proc/self/fd/<fd>``: memory, no disk), never by
    resolving the workspace's path: a folder moved aside and replaced by a link is named where
    it really is.  It is what the agent's own ``getcwd()`` answers.

    Raises:
        AcpError: ``acp_workspace_unsafe`` without ``/proc``, or when the directory was removed.
    """
    try:
        name = os.readlink(_fd_path(workspace))
    except OSError as exc:
        raise _unsafe(invocation, f"cannot be handed over by descriptor (/proc/self/fd: {exc.strerror})") from None
    if not name.startswith("/") or name.endswith(" (deleted)"):
        raise _unsafe(invocation, "was removed while the agent was starting")
    return Path(name)


def _unsafe(invocation: AcpInvocation, why: str) -> AcpError:
    return AcpError(f"ACP agent {invocation.name!r} cannot start: its workspace {why}", code="acp_workspace_unsafe")


def _fd_path(workspace: SafeDir) -> str:
    """A path naming the directory ``workspace`` holds, in this process and in a child forked from it.

    A child's ``chdir`` to it runs before the child closes inherited descriptors
    (``subprocess`` changes directory, then closes the fds it does not pass), so the agent
    starts in the held directory and keeps no descriptor of it.
    """
    return f"/proc/self/fd/{workspace.fd}"


async def _converse(invocation: AcpInvocation, client: _WorkspaceClient, command: str, env: dict[str, str],
                    stderr: IO[bytes], prompt: str, *, workspace: SafeDir) -> str:
    # the SDK's Client protocol lists every method, but it calls only those a client has (the rest are
    # "method not found"): this client offers files and no terminal (ClientCapabilities below)
    async with spawn_agent_process(client,  # pyright: ignore[reportArgumentType]
                                   command, *invocation.config.args, env=env, cwd=_fd_path(workspace),
                                   transport_kwargs={"stderr": stderr.fileno()}) as (conn, _process):
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False)
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities,
                              client_info=CLIENT_INFO)
        cwd = client.work_in(_held_path(invocation, workspace))  # named once the agent runs there
        session = await conn.new_session(cwd=str(cwd), mcp_servers=list(invocation.mcp_servers))
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)])
        return response.stop_reason


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RequestError):
        data = f" ({exc.data})" if getattr(exc, "data", None) else ""
        return f"{exc}{data}"
    return str(exc) or type(exc).__name__


def _tail(stderr: IO[bytes]) -> str:
    stderr.seek(0)
    text = stderr.read().decode("utf-8", errors="replace").strip()
    return f"\nagent stderr (last lines):\n{text[-_STDERR_TAIL:]}" if text else ""


__all__ = ["AcpError", "AcpInvocation", "AcpResult", "invoke", "resolve_command"]

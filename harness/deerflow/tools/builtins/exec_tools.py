"""The ``bash`` and ``python`` tools.

Both are thin: the sandbox provider (``runtime.context.services.sandbox``)
runs commands and the kernel pool (``runtime.context.services.kernels``)
runs cells.  The tools add what the model and the UI need around that:

* ``bash`` audits the command first (:func:`deerflow.sandbox.execution.audit.audit_command`).
  A blocked command never reaches the provider; the model gets the reason
  as a :class:`ToolFailure`.  Warnings are streamed to the UI as
  ``{"type": "audit", ...}`` custom events and repeated in the result.
* Results are text for the model plus a structured artifact
  (``status``, ``exit_code``, ``timed_out``, ``files``...) for the UI, with
  host paths masked to virtual ones and output capped.
* In ``allowlist`` network mode each call runs inside a network scope
  (:mod:`deerflow.tools.builtins.network_access`): its decisions become
  ``notice`` events, and a host awaiting approval turns the result into a
  human-input request that ends the turn.

Each tool has a sync and an async implementation so it works under
``agent.invoke`` and ``agent.ainvoke`` alike.  The blocking parts (the audit,
the command's wait) run on :mod:`deerflow.tools.offload`'s bounded threads
with a deadline, never on the event loop or its default executor: a thread
can have only a few commands in flight, so its hung calls cannot take the
workers other threads' runs need.  ``python`` awaits the kernel pool's own
loop, with a hang guard past the cell timeout.  :func:`exec_tools` builds
them for one provider: ``bash`` is left out when the provider refuses shell
access, so the model is never offered a tool that can only fail.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import services_of
from deerflow.sandbox.execution.audit import MAX_COMMAND_CHARS, AuditVerdict, audit_command
from deerflow.sandbox.execution.process import ExecResult
from deerflow.sandbox.execution.provider import VIRTUAL_WORKSPACE, SandboxProvider
from deerflow.sandbox.kernels.kernel import KernelStartError
from deerflow.sandbox.kernels.kernel_pool import CellResult, KernelPool
from deerflow.sandbox.kernels.notebook_log import NOTEBOOK_NAME
from deerflow.skills.projection import VIEW_DEADLINE_S
from deerflow.tools.builtins.network_access import network_scope, settle
from deerflow.tools.offload import OFFLOADER, Offloader
from deerflow.tools.schema import function_tool

logger = logging.getLogger(__name__)

MAX_TIMEOUT_S = 1800.0
AUDIT_DEADLINE_S = 10.0
"""The audit is linear; this only guards against a wedged host."""
HANG_GRACE_S = 30.0
"""How long past its own timeout a command or cell may take before the tool gives up on it."""

Reply = tuple[str, dict[str, Any]]
CommandArg = Annotated[str, "The bash command line to run."]
CodeArg = Annotated[str, "Python source to run as one notebook cell."]
TimeoutArg = Annotated[float | None, "Seconds before it is stopped; omit for the default."]


def _unavailable(name: str) -> ToolFailure:
    return ToolFailure(f"code execution is not available in this session (no {name} service)",
                       code="sandbox_unavailable")


def _sandbox(runtime: ToolRuntime[RunContext]) -> SandboxProvider:
    found = services_of(runtime.context).sandbox
    if found is None:
        raise _unavailable("sandbox")
    return found


def _kernels(runtime: ToolRuntime[RunContext]) -> KernelPool:
    found = services_of(runtime.context).kernels
    if found is None:
        raise _unavailable("kernels")
    return found


def _paths(runtime: ToolRuntime[RunContext]) -> ThreadPaths:
    return runtime.context.paths


async def _aready_view(runtime: ToolRuntime[RunContext]) -> None:
    """Build a skills view the run owes before the sandbox mounts it, off the loop (a kernel starts on it)."""
    paths = _paths(runtime)
    if paths.owes_skills_view:
        offloader, key = _offloader(runtime)
        await offloader.arun(paths.ready_skills_view, key=key, what="the skills view", deadline=VIEW_DEADLINE_S)


def _timeout(requested: float | None) -> float | None:
    if requested is None:
        return None
    if requested <= 0:
        raise ToolFailure("timeout must be a positive number of seconds", code="invalid_argument")
    return min(requested, MAX_TIMEOUT_S)


def _offloader(runtime: ToolRuntime[RunContext]) -> tuple[Offloader, str]:
    return services_of(runtime.context).offloader or OFFLOADER, str(runtime.context.thread_id)


def _check_length(command: str) -> None:
    """Refuse a command ``bash -c`` could not take, before any work is spent on it."""
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolFailure(
            f"The command is {len(command):,} characters long; the limit is {MAX_COMMAND_CHARS:,}. "
            "Write a long script to a file with write_file and run that file.",
            code="command_too_long",
        )


def _emit_audit(runtime: ToolRuntime[RunContext], command: str, verdict: AuditVerdict) -> None:
    runtime.stream_writer(
        {
            "type": "audit",
            "tool": "bash",
            "tool_call_id": runtime.tool_call_id,
            "level": verdict.level,
            "reasons": list(verdict.reasons),
            "command": command,
        }
    )


def _audit(runtime: ToolRuntime[RunContext], command: str) -> AuditVerdict:
    """Audit ``command`` (off the caller's thread, with a deadline); see :func:`_judge`."""
    offloader, key = _offloader(runtime)
    verdict = offloader.run(audit_command, command, key=key, what="the command audit",
                            deadline=AUDIT_DEADLINE_S)
    return _judge(runtime, command, verdict)


async def _aaudit(runtime: ToolRuntime[RunContext], command: str) -> AuditVerdict:
    offloader, key = _offloader(runtime)
    verdict = await offloader.arun(audit_command, command, key=key, what="the command audit",
                                   deadline=AUDIT_DEADLINE_S)
    return _judge(runtime, command, verdict)


def _judge(runtime: ToolRuntime[RunContext], command: str, verdict: AuditVerdict) -> AuditVerdict:
    """Stream a non-pass verdict; refuse a blocked command."""
    if verdict.level != "pass":
        _emit_audit(runtime, command, verdict)
    if verdict.blocked:
        raise ToolFailure(
            "The command was blocked by the security audit and was not run: "
            + "; ".join(verdict.reasons)
            + ". Do the task another way.",
            code="command_blocked",
        )
    return verdict


def render_exec_result(
    result: ExecResult, *, timeout: float, verdict: AuditVerdict, masked: str
) -> Reply:
    """Model text and UI artifact for a finished command."""
    lines = [masked.rstrip("\n")] if masked.strip() else ["(no output)"]
    if result.timed_out:
        lines.append(
            f"[timed out after {timeout:g}s: the command and everything it started were killed]"
        )
    elif result.exit_code != 0:
        lines.append(f"[exit code {result.exit_code}]")
    if result.truncated:
        lines.append("[output truncated: the middle was omitted]")
    if verdict.level == "warn":
        lines.append(f"[audit warning: {'; '.join(verdict.reasons)}]")
    artifact = {
        "status": "ok" if result.exit_code == 0 else "error",
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "truncated": result.truncated,
        "audit": {"level": verdict.level, "reasons": list(verdict.reasons)},
    }
    return "\n".join(lines), artifact


def render_cell_result(result: CellResult, *, timeout: float) -> Reply:
    """Model text and UI artifact for a finished cell."""
    lines: list[str] = []
    if result.fresh_kernel:
        lines.append(
            "[note: the previous kernel was shut down while idle; this ran in a new kernel, so earlier variables are gone]"
        )
    lines.append(result.text if result.text.strip() else "(no output)")
    if result.timed_out and result.recovery == "interrupted":
        lines.append(
            f"[timed out after {timeout:g}s: the cell was interrupted; variables defined earlier are kept]"
        )
    elif result.timed_out:
        lines.append(
            f"[timed out after {timeout:g}s and the kernel did not stop: it was restarted, so all variables are gone]"
        )
    elif result.recovery == "died":
        lines.append(
            "[the Python kernel died (out of memory, or the code exited); a new kernel was started, so all variables are gone]"
        )
    if result.truncated:
        lines.append("[output truncated: the middle was omitted]")
    artifact = {
        "status": "error"
        if (result.error or result.timed_out or result.recovery == "died")
        else "ok",
        "error": result.error,
        "timed_out": result.timed_out,
        "recovery": result.recovery,
        "files": list(result.files),
        "cell_number": result.cell_number,
        "notebook": f"{VIRTUAL_WORKSPACE}/{NOTEBOOK_NAME}",
    }
    return "\n".join(lines), artifact


def bash(
    command: CommandArg, runtime: ToolRuntime[RunContext], timeout: TimeoutArg = None
) -> Reply:
    provider = _sandbox(runtime)
    limit = _timeout(timeout) or provider.command_timeout
    _check_length(command)
    verdict = _audit(runtime, command)
    paths = _paths(runtime)
    offloader, key = _offloader(runtime)
    with network_scope(runtime, provider) as net:
        result = offloader.run(provider.execute, paths, command, timeout=limit, key=key,
                               what="the command", deadline=limit + HANG_GRACE_S)
    reply = render_exec_result(
        result, timeout=limit, verdict=verdict, masked=provider.mask_out(paths, result.output)
    )
    return settle(runtime, net, reply, tool="bash")


async def abash(
    command: CommandArg, runtime: ToolRuntime[RunContext], timeout: TimeoutArg = None
) -> Reply:
    provider = _sandbox(runtime)
    limit = _timeout(timeout) or provider.command_timeout
    _check_length(command)
    verdict = await _aaudit(runtime, command)
    await _aready_view(runtime)
    paths = _paths(runtime)
    offloader, key = _offloader(runtime)
    with network_scope(runtime, provider) as net:
        result = await offloader.arun(provider.execute, paths, command, timeout=limit, key=key,
                                      what="the command", deadline=limit + HANG_GRACE_S)
    reply = render_exec_result(
        result, timeout=limit, verdict=verdict, masked=provider.mask_out(paths, result.output)
    )
    return settle(runtime, net, reply, tool="bash")


def _kernel_unavailable(exc: KernelStartError) -> ToolFailure:
    logger.error("python kernel failed to start", exc_info=exc)
    return ToolFailure(
        "The Python kernel could not be started; try again later or use other tools.",
        code="kernel_unavailable",
    )


def python(code: CodeArg, runtime: ToolRuntime[RunContext], timeout: TimeoutArg = None) -> Reply:
    pool = _kernels(runtime)
    limit = _timeout(timeout) or pool.default_timeout
    try:
        with network_scope(runtime, pool.provider) as net:
            result = pool.run_sync(_paths(runtime), code, timeout=limit)
    except KernelStartError as exc:
        raise _kernel_unavailable(exc) from exc
    return settle(runtime, net, render_cell_result(result, timeout=limit), tool="python")


async def apython(
    code: CodeArg, runtime: ToolRuntime[RunContext], timeout: TimeoutArg = None
) -> Reply:
    pool = _kernels(runtime)
    limit = _timeout(timeout) or pool.default_timeout
    await _aready_view(runtime)
    try:
        with network_scope(runtime, pool.provider) as net:
            async with asyncio.timeout(limit + HANG_GRACE_S):
                result = await pool.run(_paths(runtime), code, timeout=limit)
    except TimeoutError:
        raise ToolFailure(
            f"The Python kernel did not answer within {limit + HANG_GRACE_S:g}s; "
            "try again, or restart with simpler code.",
            code="tool_timeout",
        ) from None
    except KernelStartError as exc:
        raise _kernel_unavailable(exc) from exc
    return settle(runtime, net, render_cell_result(result, timeout=limit), tool="python")


def bash_description(provider: SandboxProvider) -> str:
    """What the model is told about ``bash`` under ``provider``."""
    network = getattr(provider, "network", None)
    net = {
        "isolated": " There is no network access.",
        "open": " The network is reachable.",
        "allowlist": " Network access goes through an allowlist proxy (HTTP_PROXY/HTTPS_PROXY are "
        "set; use clients that honour them): other hosts are refused, and in an interactive run "
        "the user is asked to approve them.",
    }.get(network or "", "")
    return (
        "Run a bash command in the sandbox and return its combined stdout/stderr and exit code. "
        f"The working directory is {VIRTUAL_WORKSPACE}; user files are under /mnt/user-data/uploads, "
        "final deliverables go to /mnt/user-data/outputs. Each call is a fresh shell (no state is "
        f"kept); background processes are stopped when the command ends. Default timeout "
        f"{provider.command_timeout:g}s.{net} Long output is shortened."
    )


def python_description(pool_timeout: float | None = None) -> str:
    """What the model is told about ``python``."""
    default = f" Default timeout {pool_timeout:g}s." if pool_timeout else ""
    return (
        "Run Python code as a cell in a persistent Jupyter kernel: variables and imports are kept "
        f"between calls. The working directory is {VIRTUAL_WORKSPACE}. Returns printed output, the "
        "value of the last expression and a short error summary. Plots (matplotlib) and HTML "
        "outputs are saved as files whose paths are returned. Every cell is recorded in "
        f"{VIRTUAL_WORKSPACE}/{NOTEBOOK_NAME}.{default}"
    )


def exec_tools(provider: SandboxProvider, *, python_timeout: float | None = None) -> list[BaseTool]:
    """The execution tools to offer under ``provider``.

    Args:
        provider: The session's sandbox provider; ``bash`` is omitted when it
            refuses shell access (the local provider without ``allow_host_bash``).
        python_timeout: Default cell timeout to mention in the description.
    """
    tools: list[BaseTool] = []
    if provider.allows_bash:
        tools.append(
            function_tool(
                func=bash,
                coroutine=abash,
                name="bash",
                description=bash_description(provider),
                response_format="content_and_artifact",
            )
        )
    tools.append(
        function_tool(
            func=python,
            coroutine=apython,
            name="python",
            description=python_description(python_timeout),
            response_format="content_and_artifact",
        )
    )
    return tools

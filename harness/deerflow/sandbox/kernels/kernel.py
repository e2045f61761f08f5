"""One thread's IPython kernel: start, execute with a deadline, recover, stop.

Launching goes through ``jupyter_client``'s :class:`AsyncKernelManager` with
a kernel spec built from the provider's :class:`KernelLaunch`, so the same
code drives a host kernel and one inside bubblewrap.  Choices that make the
sandboxed case work:

* **ipc transport.**  ZMQ sockets are Unix socket files in a fresh runtime
  directory per kernel.  The provider decides where that directory appears
  to the kernel (``runtime_view``), so the pool writes two connection files:
  ``manager.json`` (host paths, used by the client; in a host-private
  directory) and ``kernel.json`` (the kernel's view).  TCP on loopback would
  not cross ``--unshare-net``.
* **the runtime directory is the sandbox's too.**  The kernel writes its
  sockets there, and in a long-lived container the sandboxed code sees it
  before and while the host uses it.  So the host holds it by descriptor
  (:class:`~deerflow.sandbox.execution.provider.KernelRuntime`): ``kernel.json``
  and ``kernel.log`` are created ``O_EXCL`` through it, the client and the manager
  reach each socket through an ``O_PATH`` descriptor of ``k-N`` opened beneath it
  with no link followed (:mod:`~deerflow.sandbox.kernels.ipc`: a link planted at
  ``k-N`` fails the start with one line), and the directory is removed through its
  parent's descriptor.
* **message interrupts.**  ``interrupt_mode="message"`` asks the kernel to
  SIGINT its own process group over the control channel.  A signal from the
  host would hit the ``bwrap`` monitor, not the kernel behind the pid
  namespace.
* **deadline, then interrupt, then restart.**  A cell past its timeout is
  interrupted (state kept); if the kernel is not idle within a grace period
  it is killed and a new one started (state lost).  A kernel that dies on
  its own is noticed by polling ``is_alive`` while waiting.

* **a cell's children die with the cell.**  When the kernel first answers,
  the launch's process tree (sandbox wrapper, supervisor, kernel) is noted as
  its *spine*; after every cell, and after an interrupt, every other process
  in the tree is killed (:func:`~deerflow.sandbox.execution.process.kill_strays`) and
  the kernel is asked, silently, to reap the zombies.  Inside bubblewrap the
  tree is the sandbox's whole pid namespace, so a double-forked daemon cannot
  escape it; on the ``local`` provider such a daemon escapes to the host.

Outputs are collected as nbformat output dicts, ready for the notebook log.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import queue
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.execution.mount_fds import ensure_thread
from deerflow.sandbox.execution.process import descendants, kill_strays
from deerflow.sandbox.execution.provider import KernelLaunch, KernelRuntime, SandboxProvider
from deerflow.sandbox.kernels.ipc import HeldSockets, held_manager
from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:  # jupyter_client and nbformat are imported on first use (a kernel start, a cell)
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbformat import NotebookNode

Recovery = Literal["none", "interrupted", "restarted", "died"]
_POLL_S = 1.0
_LOG_TAIL = 2000
_SHUTDOWN_WAIT_S = 1.0
# Run silently in the kernel after its children were killed: collect their exit statuses.
_REAP_ZOMBIES = (
    "exec('import os\\nwhile True:\\n    try:\\n        pid, _ = os.waitpid(-1, os.WNOHANG)\\n"
    "    except ChildProcessError:\\n        break\\n    if not pid:\\n        break', {})"
)


class KernelStartError(RuntimeError):
    """A kernel could not be started (a runtime failure, logged by the caller)."""


@functools.cache
def _fixed_spec_manager_class() -> Callable[[KernelSpec], KernelSpecManager]:
    """The spec manager class, defined on first kernel start: ``jupyter_client`` (with
    ``zmq`` and ``traitlets``) costs every run's start-up otherwise, and most runs start no kernel."""
    from jupyter_client.kernelspec import KernelSpecManager

    class _FixedSpecManager(KernelSpecManager):
        """Serves exactly one, in-memory kernel spec (no kernel.json on disk)."""

        def __init__(self, spec: KernelSpec, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._spec = spec

        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return self._spec

    return _FixedSpecManager


@dataclass
class RawExecution:
    """What one cell produced, before rendering.

    Attributes:
        outputs: nbformat v4 output nodes, in order (streams merged).
        execution_count: The kernel's prompt number, if it got that far.
        timed_out: The cell hit its deadline.
        recovery: What was done to the kernel: ``interrupted`` (state kept),
            ``restarted`` (state lost), ``died`` (the kernel exited on its own;
            a new one was started) or ``none``.
    """

    outputs: list[NotebookNode] = field(default_factory=list)
    execution_count: int | None = None
    timed_out: bool = False
    recovery: Recovery = "none"


class _Collector:
    """Turns the iopub messages of one request into nbformat outputs."""

    def __init__(self, msg_id: str, result: RawExecution) -> None:
        self.msg_id = msg_id
        self.result = result
        self.idle = False
        self._clear_pending = False

    def add(self, msg: dict[str, Any]) -> None:
        if msg.get("parent_header", {}).get("msg_id") != self.msg_id:
            return
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status":
            self.idle = content.get("execution_state") == "idle"
        elif kind == "execute_input":
            self.result.execution_count = content.get("execution_count")
        elif kind == "clear_output":
            if content.get("wait"):
                self._clear_pending = True
            else:
                self.result.outputs.clear()
        elif kind in ("stream", "display_data", "execute_result", "error"):
            self._append(kind, msg)

    def _append(self, kind: str, msg: dict[str, Any]) -> None:
        outputs = self.result.outputs
        if self._clear_pending:
            outputs.clear()
            self._clear_pending = False
        last = outputs[-1] if outputs else None
        if (
            kind == "stream"
            and last is not None
            and last.get("output_type") == "stream"
            and last.get("name") == msg["content"]["name"]
        ):
            last["text"] += msg["content"]["text"]
            return
        from nbformat.v4 import output_from_msg  # on first output: nbformat imports slowly

        outputs.append(output_from_msg(msg))


class ThreadKernel:
    """A running kernel for one thread, launched through its provider.

    Args:
        provider: Decides how (and where) the kernel process runs.
        paths: The thread's host directories.
        startup_timeout: Seconds to wait for the kernel to answer.
        interrupt_grace: Seconds an interrupted cell gets to stop before restart.
    """

    def __init__(
        self,
        provider: SandboxProvider,
        paths: ThreadPaths,
        *,
        startup_timeout: float = 60.0,
        interrupt_grace: float = 5.0,
    ) -> None:
        self.provider = provider
        self.paths = paths
        self.startup_timeout = startup_timeout
        self.interrupt_grace = interrupt_grace
        self._km: AsyncKernelManager | None = None
        self._kc: Any = None
        self._runtime: KernelRuntime | None = None
        self._dir: SafeDir | None = None  # the runtime directory, held while the kernel runs
        self._private: Path | None = None  # host-private: manager.json
        self._held: HeldSockets | None = None  # the kernel's sockets, by descriptor
        self._log: Any = None
        self._spine: frozenset[int] = frozenset()

    @property
    def started(self) -> bool:
        return self._km is not None

    async def start(self) -> None:
        """Launch the kernel and wait until it answers.

        Raises:
            KernelStartError: if it exits or stays silent past ``startup_timeout``.
            ToolFailure: the provider refused to launch (``unsafe_mount``: a thread
                folder is a link, FIFO or file).
        """
        ensure_thread(self.paths)
        try:
            self._runtime = self.provider.kernel_runtime(self.paths)
            self._dir = self._runtime.open()
        except UnsafePath as exc:  # the sandbox replaced the folder the directory goes in
            await self.shutdown(now=True)
            raise KernelStartError(f"the Python kernel's runtime folder was tampered with: {exc}") from None
        try:
            launch = self.provider.kernel_launch(self.paths, self._runtime.path)
        except BaseException:  # e.g. UnsafeMount (a ToolFailure the model sees): nothing is left behind
            await self.shutdown(now=True)
            raise
        try:
            await self._launch(launch, self._dir)
        finally:
            launch.release()  # the child holds its copies (bwrap's --bind-fd); ours go, on every path
        root = self._root_pid()
        if root is not None:
            self._spine = frozenset({root, *await asyncio.to_thread(descendants, root)})

    async def _launch(self, launch: KernelLaunch, runtime: SafeDir) -> None:
        """Spawn the kernel from ``launch`` (passing its descriptors) and wait until it answers.

        The client's sockets are reached through descriptors of ``k-N`` opened in the held
        directory once the kernel made them (:class:`HeldSockets`), whatever the sandbox did
        to those names or to the folders above.
        """
        from jupyter_client.kernelspec import KernelSpec

        spec = KernelSpec(
            argv=[*launch.argv, "-f", f"{launch.runtime_view}/kernel.json"],
            display_name="DeerFlow Python",
            language="python",
            interrupt_mode="message",
        )
        held = self._held = HeldSockets(runtime)
        km = held_manager(
            held,
            kernel_spec_manager=_fixed_spec_manager_class()(spec),
            kernel_name="deerflow",
            transport="ipc",
            ip=f"/proc/self/fd/{runtime.fd}/k",
            connection_file=str(self._private_dir() / "manager.json"),
            # A kernel that ignores shutdown_request gets SIGTERM/SIGKILL after
            # 0.5 s each, not 2.5 s: stopping a thread's kernel should not stall.
            shutdown_wait_time=_SHUTDOWN_WAIT_S,
        )
        km.write_connection_file()
        self._km = km
        try:
            _write_kernel_view(km, runtime, launch.runtime_view)
            self._log = os.fdopen(runtime.open_new("kernel.log", mode=0o600), "wb")
        except UnsafePath as exc:  # something was planted at a name before we created it
            await self.shutdown(now=True)
            raise KernelStartError(f"the Python kernel's runtime folder was tampered with: {exc}") from None
        try:
            await km.start_kernel(
                env=launch.env, cwd=str(launch.cwd), stdout=self._log, stderr=self._log,
                **({"pass_fds": launch.pass_fds} if launch.pass_fds else {}),
            )
            # Ours close right after the spawn, and a restart must never pass their numbers
            # again (they may name something else by then).
            launch.release()
            getattr(km, "_launch_args", {}).pop("pass_fds", None)
            await held.open_when_made(km.ports, timeout=self.startup_timeout, alive=km.is_alive)
            self._kc = km.client()
            self._kc.start_channels()
            await self._kc.wait_for_ready(timeout=self.startup_timeout)
        except UnsafePath as exc:  # a link (or not a socket) where the kernel made one
            await self.shutdown(now=True)
            raise KernelStartError(f"the Python kernel's runtime folder was tampered with: {exc}") from None
        except (RuntimeError, TimeoutError) as exc:
            detail = self._log_tail()
            await self.shutdown(now=True)
            raise KernelStartError(f"the Python kernel did not start: {exc}\n{detail}") from exc

    def _root_pid(self) -> int | None:
        """Host pid of the launched process (the sandbox wrapper, or the kernel itself)."""
        provisioner = getattr(self._km, "provisioner", None)
        pid = getattr(provisioner, "pid", None)
        return pid if isinstance(pid, int) else None

    async def kill_cell_children(self) -> None:
        """Kill every process the cells started (see the module docstring); keep the kernel."""
        root = self._root_pid()
        if root is None or not self._spine or self._kc is None:
            return
        if await asyncio.to_thread(kill_strays, root, self._spine):
            # Queued before the next cell on the same shell channel; its reply is skipped.
            self._kc.execute(_REAP_ZOMBIES, silent=True, store_history=False, allow_stdin=False)

    def _log_tail(self) -> str:
        if self._dir is None:
            return ""
        # The runtime directory is visible to the kernel (the sandbox): read the log through
        # the held SafeDir so a link or FIFO planted at kernel.log cannot make us read a host file.
        try:
            fd = self._dir.open_file("kernel.log")
        except UnsafePath:
            return ""
        with os.fdopen(fd, "rb") as log:
            log.seek(max(0, os.fstat(fd).st_size - 4 * _LOG_TAIL))
            return log.read().decode(errors="replace")[-_LOG_TAIL:]

    async def is_alive(self) -> bool:
        return self._km is not None and await self._km.is_alive()

    async def execute(self, code: str, *, timeout: float) -> RawExecution:
        """Run ``code`` as one cell; never raises for the code's own errors.

        Args:
            code: The cell source.
            timeout: Seconds before the cell is interrupted.
        """
        if self._kc is None:
            raise RuntimeError("kernel not started")
        result = RawExecution()
        msg_id = self._kc.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        collector = _Collector(msg_id, result)
        outcome = await self._collect(collector, timeout)
        if outcome == "died":
            result.recovery = "died"
            await self.restart()
        elif outcome == "timeout":
            result.timed_out = True
            if await self._interrupt() and await self._collect(collector, self.interrupt_grace) == "idle":
                result.recovery = "interrupted"
            else:
                result.recovery = "restarted"
                await self.restart()
        if result.recovery in ("none", "interrupted"):
            await self._drain_reply(msg_id)
            await self.kill_cell_children()
        return result

    async def _collect(self, collector: _Collector, timeout: float) -> str:
        """Feed iopub messages to ``collector`` until idle, deadline or death."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not collector.idle:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return "timeout"
            try:
                msg = await self._kc.get_iopub_msg(timeout=min(remaining, _POLL_S))
            except queue.Empty:
                if not await self.is_alive():
                    return "died"
                continue
            collector.add(msg)
        return "idle"

    async def _drain_reply(self, msg_id: str) -> None:
        """Consume the shell reply so replies never pile up on the channel."""
        try:
            while True:
                reply = await self._kc.get_shell_msg(timeout=_POLL_S)
                if reply.get("parent_header", {}).get("msg_id") == msg_id:
                    return
        except queue.Empty:
            return

    async def interrupt(self) -> None:
        """Ask the kernel to interrupt the running cell (no-op when stopped)."""
        await self._interrupt()

    async def _interrupt(self) -> bool:
        """Send the interrupt over the control channel; ``False`` when it cannot be sent (no kernel,
        or its control socket was replaced by something the host refuses to connect to)."""
        if self._km is None or not self._km.has_kernel:
            return False
        try:
            await self._km.interrupt_kernel()
        except UnsafePath:
            return False
        return True

    async def restart(self) -> None:
        """Replace the kernel with a fresh one (all state is lost)."""
        await self.shutdown(now=True)
        await self.start()

    async def shutdown(self, *, now: bool = False) -> None:
        """Stop the kernel and remove its runtime directory (idempotent)."""
        km, kc = self._km, self._kc
        self._km = self._kc = None
        self._spine = frozenset()
        try:
            if kc is not None:
                kc.stop_channels()
            if km is not None and km.has_kernel:
                try:
                    await km.shutdown_kernel(now=now)
                except UnsafePath:  # its control socket is not one the host connects to: kill it
                    await km.shutdown_kernel(now=True)
        finally:
            if self._held is not None:  # every ZMQ socket using the descriptors is closed by now
                self._held.close()
                self._held = None
            if self._log is not None:
                self._log.close()
                self._log = None
            self._remove_dirs()

    def _private_dir(self) -> Path:
        """A host-private directory for ``manager.json``: jupyter_client writes it by path
        (unlink, then open without ``O_EXCL``), so it must not be where the sandbox can race it."""
        if self._private is None:
            self._private = Path(tempfile.mkdtemp(prefix="dfk-manager-"))
        return self._private

    def _remove_dirs(self) -> None:
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None
        if self._dir is not None:
            self._dir.close()
            self._dir = None
        if self._runtime is not None:
            self._runtime.remove()
            self._runtime = None
            self.provider.kernel_stopped(self.paths)


def _write_kernel_view(km: AsyncKernelManager, runtime: SafeDir, view: str) -> None:
    """Create ``kernel.json`` (``O_EXCL``, 0600): the manager's connection info, as the kernel sees it."""
    info: dict[str, Any] = {
        k: (v.decode() if isinstance(v, bytes) else v) for k, v in km.get_connection_info().items()
    }
    info["ip"] = f"{view}/k"
    runtime.create_exclusive("kernel.json", json.dumps(info).encode(), mode=0o600)

"""Per-thread Python kernels, owned by one host object.

:class:`KernelPool` is created by the host (Jupyter server extension, CLI,
tests), handed to tools through ``RunContext.services.kernels`` and
closed by the host; there is no module-level registry.

Design:

* **Own event loop thread.**  ZMQ sockets belong to the loop that created
  them, while tools are called from whatever loop (or thread) runs the agent.
  The pool therefore runs every kernel on a private loop in a daemon thread
  and offers :meth:`KernelPool.run` (awaitable from any loop) and
  :meth:`KernelPool.run_sync` (blocking).  The idle reaper lives on the same
  loop, independent of any host loop.
* **One kernel per thread, one cell at a time.**  A per-thread lock
  serialises cells, as a notebook would.  Kernels start lazily on the first
  cell; an idle one is shut down after ``idle_timeout`` seconds, and the next
  cell starts a fresh kernel and says so (earlier variables are gone).
* **Every cell is logged** to ``<workspace>/agent.ipynb`` (see
  :mod:`deerflow.sandbox.kernels.notebook_log`) before its result is rendered.
* **Cancellation interrupts.**  If the awaiting caller is cancelled (the user
  stopped the run), the kernel is interrupted instead of left computing, and
  the processes the cell started are killed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.execution.provider import SandboxProvider
from deerflow.sandbox.kernels.cell_output import render_outputs, truncate_middle
from deerflow.sandbox.kernels.kernel import Recovery, ThreadKernel
from deerflow.sandbox.kernels.notebook_log import NOTEBOOK_NAME, NotebookLog

T = TypeVar("T")

DEFAULT_PYTHON_TIMEOUT = 120.0
DEFAULT_IDLE_TIMEOUT = 900.0
DEFAULT_MAX_CELL_OUTPUT = 20_000
_CLOSE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class CellResult:
    """Outcome of one ``python`` call, ready for the model.

    Attributes:
        text: Rendered outputs with host paths masked, capped at ``max_output``.
        files: Virtual paths of files saved for rich outputs (plots, HTML).
        error: ``"Name: value"`` if the cell raised.
        cell_number: The cell's number in ``agent.ipynb``.
        execution_count: The kernel's execution count for the cell.
        timed_out: The cell hit its timeout.
        recovery: ``interrupted`` (state kept), ``restarted``/``died`` (state lost).
        truncated: ``text`` lost its middle to the cap.
        fresh_kernel: A new kernel replaced an idle-reaped one before this cell.
    """

    text: str
    files: tuple[str, ...] = ()
    error: str | None = None
    cell_number: int = 0
    execution_count: int | None = None
    timed_out: bool = False
    recovery: Recovery = "none"
    truncated: bool = False
    fresh_kernel: bool = False


@dataclass
class _Session:
    kernel: ThreadKernel
    notebook: NotebookLog
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    closed: bool = False


class KernelPool:
    """Owns one kernel per thread for a provider, and closes them all.

    Args:
        provider: Decides how and where kernels run.
        default_timeout: Seconds a cell may run when the caller gives none.
        idle_timeout: Seconds without a cell before a kernel is shut down.
        max_output: Characters of rendered output returned per cell.
        startup_timeout: Seconds a kernel may take to answer after launch.
        interrupt_grace: Seconds an interrupted cell gets before a restart.
    """

    def __init__(
        self,
        provider: SandboxProvider,
        *,
        default_timeout: float = DEFAULT_PYTHON_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_output: int = DEFAULT_MAX_CELL_OUTPUT,
        startup_timeout: float = 60.0,
        interrupt_grace: float = 5.0,
    ) -> None:
        self.provider = provider
        self.default_timeout = default_timeout
        self.idle_timeout = idle_timeout
        self.max_output = max_output
        self._kernel_options = {
            "startup_timeout": startup_timeout,
            "interrupt_grace": interrupt_grace,
        }
        self._sessions: dict[Path, _Session] = {}
        self._reaped: set[Path] = set()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="deerflow-kernels", daemon=True
        )
        self._thread.start()
        self._retiring: set[asyncio.Task[None]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._submit(self._start_reaper()).result()

    # -- calling into the pool loop -------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._closed:
            coro.close()
            raise RuntimeError("the kernel pool is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def run(
        self, paths: ThreadPaths, code: str, *, timeout: float | None = None
    ) -> CellResult:
        """Execute ``code`` in the thread's kernel (awaitable from any event loop).

        Raises:
            KernelStartError: if the kernel cannot be started.
        """
        return await asyncio.wrap_future(self._submit(self._run(paths, code, timeout)))

    def run_sync(
        self, paths: ThreadPaths, code: str, *, timeout: float | None = None
    ) -> CellResult:
        """Blocking :meth:`run`, for synchronous callers (not from the pool's own loop)."""
        return self._submit(self._run(paths, code, timeout)).result()

    def active_threads(self) -> list[Path]:
        """Thread roots that currently have a running kernel."""

        async def snapshot() -> list[Path]:
            return [k for k, s in self._sessions.items() if s.kernel.started]

        return self._submit(snapshot()).result()

    def shutdown_thread(self, paths: ThreadPaths) -> None:
        """Stop one thread's kernel now (its next cell starts a fresh one)."""
        self._submit(self._retire(paths.root)).result()

    # -- on the pool loop -------------------------------------------------------------

    async def _run(self, paths: ThreadPaths, code: str, timeout: float | None) -> CellResult:
        key = paths.root
        while True:
            session = self._sessions.get(key)
            if session is None:
                session = _Session(
                    ThreadKernel(self.provider, paths, **self._kernel_options),
                    NotebookLog(paths.workspace / NOTEBOOK_NAME),
                )
                self._sessions[key] = session
            async with session.lock:
                if session.closed:
                    continue
                fresh = not session.kernel.started and key in self._reaped
                if not session.kernel.started:
                    await self._start(key, session)
                result = await self._execute(
                    paths, session, code, self.default_timeout if timeout is None else timeout
                )
                session.last_used = time.monotonic()
                return replace(result, fresh_kernel=True) if fresh else result

    async def _start(self, key: Path, session: _Session) -> None:
        try:
            await session.kernel.start()
        except BaseException:
            session.closed = True
            self._sessions.pop(key, None)
            raise
        from deerflow.runtime.metrics import sandbox_started

        sandbox_started(self.provider.name, "kernel")
        if key in self._reaped:
            session.notebook.append_note(
                "*A new Python kernel was started here: earlier variables are gone.*"
            )
            self._reaped.discard(key)

    async def _execute(
        self, paths: ThreadPaths, session: _Session, code: str, timeout: float
    ) -> CellResult:
        number = session.notebook.next_cell_number
        try:
            raw = await session.kernel.execute(
                self.provider.translate_in(paths, code), timeout=timeout
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._interrupt(session.kernel))
            raise
        session.notebook.append_code(code, raw.outputs, raw.execution_count)
        if raw.recovery in ("restarted", "died"):
            session.notebook.append_note(
                "*The Python kernel was restarted here: earlier variables are gone.*"
            )
        shown = [
            o for o in raw.outputs if not (raw.timed_out and o.get("ename") == "KeyboardInterrupt")
        ]
        rendered = render_outputs(
            shown,
            workspace=paths.workspace,
            cell_number=number,
            mask=lambda text: self.provider.mask_out(paths, text),
        )
        text, truncated = truncate_middle(rendered.text, self.max_output)
        return CellResult(
            text=text,
            files=rendered.files,
            error=None if raw.timed_out else rendered.error,
            cell_number=number,
            execution_count=raw.execution_count,
            timed_out=raw.timed_out,
            recovery=raw.recovery,
            truncated=truncated,
        )

    @staticmethod
    async def _interrupt(kernel: ThreadKernel) -> None:
        """Interrupt a cancelled cell and kill what it started."""
        await kernel.interrupt()
        await kernel.kill_cell_children()

    async def _retire(self, key: Path) -> None:
        session = self._sessions.pop(key, None)
        if session is None:
            return
        async with session.lock:
            session.closed = True
            if session.kernel.started:
                self._reaped.add(key)  # before awaiting: a new cell may start meanwhile
                await session.kernel.shutdown()

    async def _start_reaper(self) -> None:
        self._reaper = asyncio.create_task(self._reap_idle(), name="deerflow-kernel-reaper")

    async def _reap_idle(self) -> None:
        """Retire idle kernels, each in its own task.

        The reaper itself only sleeps and spawns, so cancelling it on close
        can never interrupt a kernel half-way through its shutdown.
        """
        interval = max(min(self.idle_timeout / 4, 30.0), 0.05)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for key, session in list(self._sessions.items()):
                if not session.lock.locked() and now - session.last_used >= self.idle_timeout:
                    task = asyncio.create_task(self._retire(key))
                    self._retiring.add(task)
                    task.add_done_callback(self._retiring.discard)

    async def _close_all(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        await asyncio.gather(*self._retiring, *(self._retire(key) for key in list(self._sessions)))

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Shut down every kernel and stop the pool's loop (idempotent)."""
        if self._closed:
            return
        future = asyncio.run_coroutine_threadsafe(self._close_all(), self._loop)
        self._closed = True
        try:
            future.result(timeout=_CLOSE_TIMEOUT_S)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=_CLOSE_TIMEOUT_S)
            if not self._thread.is_alive():
                self._loop.close()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> KernelPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> KernelPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

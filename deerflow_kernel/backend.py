"""The seam between the magics and wherever the harness runs.

A notebook talks to DeerFlow in one of two ways: in-process (the kernel
hosts a :class:`~deerflow.client.DeerFlowClient`) or through the Jupyter
server extension over HTTP when the kernel was started by a server that
exports ``DEERFLOW_SERVER_URL``.  Both implement :class:`Backend` and both
deliver the *same* typed events (:mod:`deerflow.runtime.events`), so the
views, the results and the tests do not care which one is in use.

A run is a :class:`RunHandle`: a producer thread pulls events from the
backend and puts them on a queue; whoever renders (the cell, or a
background thread after a form submit) takes them off one at a time.
Keeping the producer off the caller's thread is what lets a kernel
interrupt (``KeyboardInterrupt`` in the main thread) cancel a run cleanly:
the interrupted wait is just a queue read, and the run's remaining events
(ending with ``run_finished: cancelled``) still arrive afterwards.
"""

from __future__ import annotations

import os
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from deerflow.errors import UserError
from deerflow.run_options import RunOptions
from deerflow.runtime import events as ev

SERVER_URL_ENV = "DEERFLOW_SERVER_URL"
SERVER_TOKEN_ENV = "DEERFLOW_SERVER_TOKEN"
HUB_TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
_POLL_SECONDS = 0.2
_END = object()


class BackendError(UserError):
    """The backend refused a request or could not be reached; the message says which and why."""


class ArtifactNotFound(BackendError):
    """The file asked for is not among the thread's outputs."""


@dataclass(frozen=True)
class ThreadInfo:
    """One of the user's threads, as listed by ``%deerflow threads``."""

    thread_id: str
    title: str | None = None
    updated_at: float | str | None = None


@dataclass(frozen=True)
class UploadInfo:
    """A file put into a thread's uploads (what the agent sees at ``virtual_path``)."""

    name: str
    virtual_path: str
    size: int


@dataclass(frozen=True)
class SkillInfo:
    """A skill the agent can be asked to follow (``--skill NAME``)."""

    name: str
    description: str = ""
    enabled: bool = True


@dataclass
class _Failure:
    error: BaseException


@dataclass
class RunHandle:
    """A run in progress: its events, in order, and a way to cancel it.

    Args:
        produce: Called on a producer thread with an ``emit`` callback; it
            streams the run's events into it and returns when the run ends.
        cancel_run: Cancels a run by id (returns whether it was running).
    """

    produce: Callable[[Callable[[ev.Event], None]], None]
    cancel_run: Callable[[str], bool]
    run_id: str | None = None
    thread_id: str | None = None
    _queue: queue.Queue = field(default_factory=queue.Queue, repr=False)
    _head: list[ev.Event] = field(default_factory=list, repr=False)
    _ended: bool = False

    def start(self) -> RunHandle:
        """Start producing and wait for the first event.

        Errors raised before the run starts (unknown thread, empty prompt, a
        reply that does not fit the question) are raised here, so nothing is
        shown for a run that never began.
        """
        threading.Thread(target=self._pump, name="deerflow-run-events", daemon=True).start()
        first = self._take()
        if first is not _END:
            self._head.append(first)
        return self

    def _pump(self) -> None:
        try:
            self.produce(self._queue.put)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises it
            self._queue.put(_Failure(exc))
        finally:
            self._queue.put(_END)

    def _take(self) -> Any:
        """The next item; the short timeouts keep the wait interruptible."""
        while True:
            try:
                item = self._queue.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue
            if isinstance(item, _Failure):
                self._ended = True
                raise item.error
            if isinstance(item, (ev.RunStarted, ev.RunFinished)):
                self.run_id, self.thread_id = item.run_id, item.thread_id
            return item

    def next_event(self) -> ev.Event | None:
        """The next event, or None once the run's stream has ended."""
        if self._head:
            return self._head.pop(0)
        if self._ended:
            return None
        item = self._take()
        if item is _END:
            self._ended = True
            return None
        return item

    def cancel(self) -> bool:
        """Ask the backend to cancel the run; its last events still follow."""
        return self.run_id is not None and self.cancel_run(self.run_id)


class Backend(ABC):
    """Where runs execute and thread files live."""

    kind: str = "abstract"

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What ``%deerflow status`` shows about this backend (where, which config)."""

    @abstractmethod
    def create_thread(self) -> str:
        """A new, empty thread; returns its id."""

    @abstractmethod
    def threads(self) -> list[ThreadInfo]:
        """The user's threads, most recent first."""

    @abstractmethod
    def start(self, prompt: str, thread_id: str, options: RunOptions) -> RunHandle:
        """Start a run on ``thread_id`` (see :meth:`RunHandle.start` for errors)."""

    @abstractmethod
    def start_reply(self, thread_id: str, answer: Any, options: RunOptions) -> RunHandle:
        """Answer the thread's pending clarification; the next run's events follow.

        Raises:
            UserError: the answer does not fit the question (nothing is written).
        """

    @abstractmethod
    def upload(self, thread_id: str, name: str, data: bytes) -> UploadInfo:
        """Put ``data`` into the thread's uploads as ``name``."""

    @abstractmethod
    def artifacts(self, thread_id: str) -> list[str]:
        """Virtual paths the thread has presented."""

    @abstractmethod
    def read_artifact(self, thread_id: str, path: str) -> bytes:
        """Bytes of an output file (virtual path or a name under outputs)."""

    @abstractmethod
    def skills(self) -> list[SkillInfo]:
        """Skills available to the agent."""

    def models(self) -> list[str] | None:
        """The configured model names (None: this backend cannot list them)."""
        return None

    def mcp(self, action: str) -> dict[str, Any]:
        """``%deerflow mcp list|tools|reset``: ``{"servers": [...]}``, plus ``"tools"`` for tools."""
        raise BackendError(f"this backend cannot run 'mcp {action}'")

    def manage_skill(self, action: str, target: str, *, replace: bool = False) -> dict[str, Any]:
        """``%deerflow skills install PATH | enable NAME | disable NAME``.

        Returns the server API's answer: the skill (``name``, ``enabled``...) for
        enable/disable, ``{"installed", "skill", "scan"}`` for an install.
        """
        raise BackendError(f"this backend cannot {action} skills")

    def memory(self, verb: str, argument: str = "") -> dict[str, Any]:
        """``%deerflow memory VERB``: the result of :func:`deerflow.memory.commands.memory_action`."""
        raise BackendError("this backend has no memory")

    def memory_change(self, run_id: str, *, agent: str | None = None, wait: float = 0.0) -> dict[str, Any] | None:
        """What ``run_id`` taught memory (a change record: ``summary``, ``added``...), once its extraction
        is over, waiting up to ``wait`` seconds; None when it taught nothing."""
        return None
    def continue_prompt(self, thread_id: str, extra: str | None = None) -> str:
        """The prompt that continues ``thread_id``'s interrupted run (``%deerflow continue``, the Continue button).

        Raises:
            UserError: the thread's last run cannot be continued (it succeeded, waits on a question...).
        """
        raise BackendError("this backend cannot continue runs")

    def notebook_edits(self, thread_id: str, action: str, target: str | None = None,
                       **payload: Any) -> dict[str, Any]:
        """``apply``/``discard`` a notebook edit proposal, ``undo`` a run's applied edits, ``list`` proposals,
        or ``insert`` (``payload``: ``path``, ``operations``) the agent's code into the user's notebook."""
        raise BackendError(f"this backend cannot {action} notebook edits")

    def api_path(self) -> str | None:
        """The server-relative path of the DeerFlow API the browser can post to; None in-process."""
        return None

    def artifact_url(self, thread_id: str, path: str) -> str | None:
        """A URL a browser can open for the artifact, when there is one."""
        del thread_id, path
        return None

    def close(self) -> None:  # noqa: B027 - an optional hook, not every backend holds resources
        """Release connections and the embedded runtime."""


def select_backend(env: Mapping[str, str] | None = None) -> Backend:
    """The server backend when the kernel runs under the extension, else in-process."""
    env = os.environ if env is None else env
    url = env.get(SERVER_URL_ENV)
    if url:
        from deerflow_kernel.server import ServerBackend

        return ServerBackend(url, server_token(env))
    from deerflow_kernel.local import InProcessBackend

    return InProcessBackend()


def server_token(env: Mapping[str, str]) -> str:
    """The token a kernel sends to its server's DeerFlow API.

    ``DEERFLOW_SERVER_TOKEN`` when the extension exported one.  Under JupyterHub
    the server's only credential is its Hub API token (``JUPYTERHUB_API_TOKEN``,
    which the Hub scopes to this very server and the kernels inherit), so a
    kernel whose server exported no token uses that one.  ``DEERFLOW_SERVER_URL``
    already carries the server's base URL (``/user/NAME/`` behind the Hub).
    """
    return env.get(SERVER_TOKEN_ENV) or env.get(HUB_TOKEN_ENV) or ""


def backend_key(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The environment a backend was built from; when it changes, the backend is rebuilt.

    A notebook typically sets ``%env DEERFLOW_CONFIG=...`` in its first cell;
    this lets it change its mind later without restarting the kernel.
    """
    env = os.environ if env is None else env
    if env.get(SERVER_URL_ENV):  # the server's config and home are the server's business
        return (env[SERVER_URL_ENV], server_token(env))
    return tuple(env.get(name, "") for name in ("DEERFLOW_CONFIG", "DEERFLOW_HOME", "DEERFLOW_USER"))

"""Per-notebook state and the run loop behind the magics.

One :class:`KernelSession` per IPython shell (kept on the magics object the
shell owns): the backend (built on first use, rebuilt if the notebook
changes ``DEERFLOW_CONFIG``/``DEERFLOW_HOME``/the server), the *current
thread* (the first run creates it, ``--new`` starts another, ``--thread``
switches), the options each thread last ran with, and the runs that a
clarification form has started.

Running never blocks on a person: a clarification ends the run, and the
form's submit starts the next run on a background thread that streams into
the same view.  A kernel interrupt while a cell streams cancels the run and
still shows how it ended.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deerflow.errors import UserError
from deerflow.runtime import events as ev
from deerflow_kernel.backend import Backend, RunHandle, UploadInfo, backend_key, select_backend
from deerflow_kernel.notebook import context_option, show_proposals
from deerflow_kernel.options import RunOptions
from deerflow_kernel.prompt import attachments_note, interpolate, make_attachment
from deerflow_kernel.result import RunResult

EVENT_LOG_ENV = "DEERFLOW_EVENT_LOG"
_CARRIED = ("model_name",)  # options a new prompt inherits from the thread's last run


@dataclass
class _Continuation:
    """A run started by a form submit (so a later ``reply`` for the same question can find it)."""

    done: threading.Event = field(default_factory=threading.Event)
    result: RunResult | None = None


class KernelSession:
    """State and behaviour of ``%deerflow`` in one shell.

    Args:
        shell: The IPython shell (its ``user_ns`` feeds ``{var}`` and ``--with``).
        widgets: Show ipywidgets views (default: when running in a kernel).
    """

    def __init__(self, shell: Any, *, widgets: bool | None = None) -> None:
        self.shell = shell
        self.widgets = getattr(shell, "kernel", None) is not None if widgets is None else widgets
        self.thread_id: str | None = None
        self.last_result: RunResult | None = None
        self.last_view: Any = None
        self._backend: Backend | None = None
        self._backend_key: tuple[str, ...] | None = None
        self._thread_options: dict[str, dict[str, Any]] = {}
        self._continuations: dict[str, _Continuation] = {}
        self._lock = threading.Lock()

    # -- backend ------------------------------------------------------------------------------
    def backend(self) -> Backend:
        """The backend for the current environment (built lazily, rebuilt when it changes)."""
        key = backend_key()
        with self._lock:
            if self._backend is None or key != self._backend_key:
                if self._backend is not None:
                    self._backend.close()
                    self.thread_id = None  # threads belong to the old home/server
                self._backend, self._backend_key = select_backend(), key
            return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    # -- runs ---------------------------------------------------------------------------------
    def run(self, body: str, options: RunOptions) -> RunResult:
        """Run the agent on ``body`` (a cell) with ``options``; shows the live view, returns the result."""
        namespace = self.shell.user_ns
        prompt = interpolate(body, namespace).strip()
        if not prompt:
            raise UserError("the prompt is empty: write what the agent should do in the cell")
        attachments = [make_attachment(spec, namespace) for spec in options.with_vars]
        backend = self.backend()
        thread_id = options.thread or (None if options.new else self.thread_id)
        if thread_id is None:
            thread_id = backend.create_thread()
        uploaded = [(a, backend.upload(thread_id, a.name, a.data).virtual_path) for a in attachments]
        if options.skill:
            prompt = f"/{options.skill} {prompt}"
        prompt += attachments_note(uploaded)
        run_options = {**{k: v for k, v in self._thread_options.get(thread_id, {}).items() if k in _CARRIED},
                       **options.run_options()}
        context = context_option(self.shell, backend.kind, enabled=not options.no_context)
        handle = backend.start(prompt, thread_id, {**run_options, **context})
        self.thread_id = thread_id
        self._thread_options[thread_id] = run_options
        return self._follow_foreground(handle)

    def reply(self, answer: Any, *, thread_id: str | None = None, answering: RunResult | None = None) -> RunResult:
        """Answer the thread's clarification and stream the next run into a new view.

        If that question was already answered in its form, the run the form
        started is returned instead (so a notebook's pre-filled reply cell is
        harmless after you answered by hand).
        """
        thread_id = thread_id or self.thread_id
        if thread_id is None:
            raise UserError("no current thread: run %%deerflow first")
        request_id = self._pending_request_id(thread_id, answering)
        continuation = self._continuations.get(request_id) if request_id else None
        if continuation is not None:
            print("This question was already answered in its form; here is the run that answer started.")
            continuation.done.wait()
            if continuation.result is not None:
                return continuation.result
        handle = self.backend().start_reply(thread_id, answer, self._thread_options.get(thread_id, {}))
        self.thread_id = thread_id
        return self._follow_foreground(handle)

    def _pending_request_id(self, thread_id: str, answering: RunResult | None) -> str | None:
        result = answering or (self.last_result if self.last_result and self.last_result.thread_id == thread_id
                               else None)
        if result is None or result.clarification is None:
            return None
        return str(result.clarification.get("request_id"))

    def _follow_foreground(self, handle: RunHandle) -> RunResult:
        view = self.last_view = self.make_view()
        view.show()
        result = self.follow(handle, view, interruptible=True)
        self.last_result = result
        show_proposals(self, result)  # the run's notebook edit proposals: diff, Apply / Discard
        return result

    def follow(self, handle: RunHandle, view: Any, *, interruptible: bool) -> RunResult:
        """Render a run's events until it ends; an interrupt (Ctrl-C / kernel interrupt) cancels it."""
        events: list[Any] = []
        log = _EventLog.from_env()
        cancelling = False
        while True:
            try:
                event = handle.next_event()
                if event is None:
                    break
                events.append(event)
                log.write(event)
                view.render(event)
            except KeyboardInterrupt:
                if not interruptible or cancelling:
                    raise
                cancelling = True
                view.note("Interrupted: cancelling the run…")
                handle.cancel()
            except UserError as exc:  # the stream broke (server gone...)
                event = ev.Error(run_id=handle.run_id or "", thread_id=handle.thread_id or "", message=str(exc))
                events.append(event)
                view.render(event)
                break
        view.finish()
        return self._result(events, handle)

    def _result(self, events: list[Any], handle: RunHandle) -> RunResult:
        if not any(isinstance(e, ev.RunFinished) for e in events):
            message = next((e.message for e in events if isinstance(e, ev.Error)), "the run's events stopped")
            events.append(ev.RunFinished(run_id=handle.run_id or "", thread_id=handle.thread_id or "",
                                         status="error", error=message))
        result = RunResult.from_events(events)
        result.session = self
        return result

    # -- views and the form -------------------------------------------------------------------
    def make_view(self) -> Any:
        if not self.widgets:
            from deerflow_kernel.text_view import TextView

            return TextView()
        from deerflow_kernel.view import RunView

        backend = self.backend()
        return RunView(read_artifact=backend.read_artifact, artifact_url=backend.artifact_url,
                       on_reply=self.continue_in_view)

    def continue_in_view(self, view: Any, request: Mapping[str, Any], answer: Any) -> None:
        """A form was submitted: start the next run in the background, streaming into ``view``."""
        request_id = str(request.get("request_id"))
        continuation = _Continuation()
        self._continuations[request_id] = continuation
        thread_id = view.thread_id
        form = view.forms.get(request_id)

        def work() -> None:
            try:
                handle = self.backend().start_reply(thread_id, answer, self._thread_options.get(thread_id, {}))
            except UserError as exc:
                if form is not None:
                    form.show_error(str(exc))
                continuation.done.set()  # with no result: a later reply answers afresh
                return
            if form is not None:
                form.show_sent(answer)
            view.begin_reply(answer)
            try:
                continuation.result = self.follow(handle, view, interruptible=False)
                self.last_result = continuation.result
            finally:
                continuation.done.set()

        threading.Thread(target=work, name="deerflow-form-reply", daemon=True).start()

    # -- files and listings -------------------------------------------------------------------
    def upload(self, target: str) -> UploadInfo:
        """``%deerflow upload PATH|VAR`` into the current thread (created if there is none)."""
        backend = self.backend()
        if self.thread_id is None:
            self.thread_id = backend.create_thread()
        if target.split(":", 1)[0] in self.shell.user_ns:
            attachment = make_attachment(target, self.shell.user_ns)
            return backend.upload(self.thread_id, attachment.name, attachment.data)
        path = Path(target).expanduser()
        if not path.is_file():
            raise UserError(f"upload: {target!r} is neither a notebook variable nor a file")
        return backend.upload(self.thread_id, path.name, path.read_bytes())

    def status(self) -> dict[str, Any]:
        info = dict(self.backend().describe())
        info["thread"] = self.thread_id or "(none yet: the first run creates one)"
        if self.last_result is not None:
            info["last run"] = repr(self.last_result)
        return info


class _EventLog:
    """Appends each event as a JSON line to ``$DEERFLOW_EVENT_LOG`` (how ``make demo`` shows progress)."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None

    @classmethod
    def from_env(cls) -> _EventLog:
        return cls(os.environ.get(EVENT_LOG_ENV))

    def write(self, event: Any) -> None:
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(event.model_dump(mode="json"), ensure_ascii=False) + "\n")

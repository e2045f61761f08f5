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
still shows how it ended; so does Kernel → Interrupt while a run continued
from a form streams in the background (the kernel is idle then, so the
session hooks the handler ipykernel restores between requests), and every
live view has a Stop button.

One truth per question: however a question is answered (its form, ``%deerflow
reply``, ``result.reply``, a later prompt on the thread), every view showing it
turns read-only with the answer, and a run continued from a form (or by a
view's Continue button) updates the cell's :class:`RunResult` in place to the
run's final state: its ``_`` and ``Out[n]`` are the continued run.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deerflow.errors import UserError
from deerflow.run_options import RunOptions
from deerflow.runtime import events as ev
from deerflow.runtime.events import short_id
from deerflow_kernel.backend import Backend, RunHandle, UploadInfo, backend_key, select_backend
from deerflow_kernel.notebook import context_option, show_proposals
from deerflow_kernel.options import CellOptions
from deerflow_kernel.prompt import (
    attachments_note,
    check_placeholders,
    interpolate,
    make_attachment,
)
from deerflow_kernel.result import RunResult, adopt

EVENT_LOG_ENV = "DEERFLOW_EVENT_LOG"
_CARRIED = {"model_name"}  # options a new prompt inherits from the thread's last run


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
        self.runs: dict[str, RunResult] = {}  # run id -> result, for %deerflow cells --run
        self._backend: Backend | None = None
        self._backend_key: tuple[str, ...] | None = None
        self._thread_options: dict[str, RunOptions] = {}
        self._continuations: dict[str, _Continuation] = {}
        self._waiting: dict[str, tuple[Any, RunResult]] = {}  # request id -> (view, the cell's result)
        # view -> its cell's result, which the Continue button updates in place
        self._cell_results: weakref.WeakKeyDictionary[Any, RunResult] = weakref.WeakKeyDictionary()
        self._background: set[Any] = set()  # views a form's run streams into
        self._idle_sigint: Any = None
        self._sigint_armed = False
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
        self.disarm_interrupt()
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    # -- runs ---------------------------------------------------------------------------------
    def run(self, body: str, options: CellOptions) -> RunResult:
        """Run the agent on ``body`` (a cell) with ``options``; shows the live view, returns the result."""
        namespace = self.shell.user_ns
        check_placeholders(body, namespace)
        prompt = interpolate(body, namespace).strip()
        if not prompt:
            raise UserError("the prompt is empty: write what the agent should do in the cell")
        attachments = [make_attachment(spec, namespace) for spec in options.with_vars]
        backend = self.backend()
        self._check_model(backend, options.model)
        chosen = self.check_thread(backend, options.thread) if options.thread else None
        thread_id = chosen or (None if options.new else self.thread_id)
        if thread_id is None:
            thread_id = backend.create_thread()
        uploaded = [(a, backend.upload(thread_id, a.name, a.data).virtual_path) for a in attachments]
        if options.skill:
            prompt = f"/{options.skill} {prompt}"
        prompt += attachments_note(uploaded)
        carried = self._thread_options.get(thread_id, RunOptions()).model_dump(include=_CARRIED, exclude_none=True)
        run_options = RunOptions.parse({**carried, **options.run_options().to_dict()})
        context = context_option(self.shell, backend.kind, enabled=not options.no_context)
        handle = backend.start(prompt, thread_id, run_options.merged(**context))
        self._settle_waiting(thread_id, prompt, where="by a later prompt on this thread")
        self.thread_id = thread_id
        self._thread_options[thread_id] = run_options
        return self._follow_foreground(handle, prompt)

    def continue_run(self, thread_id: str | None = None, extra: str | None = None) -> RunResult:
        """``%deerflow continue``: resume the thread's interrupted run (like ``deerflow run --continue``)."""
        thread_id = thread_id or self.thread_id
        if thread_id is None:
            raise UserError("%deerflow continue: no current thread (give --thread T, see %deerflow threads)")
        backend = self.backend()
        if thread_id != self.thread_id:
            thread_id = self.check_thread(backend, thread_id)
        handle = backend.start(backend.continue_prompt(thread_id, extra), thread_id,
                               self._thread_options.get(thread_id, RunOptions()))
        self.thread_id = thread_id
        return self._follow_foreground(handle)

    @staticmethod
    def _check_model(backend: Backend, model: str | None) -> None:
        """``--model`` must name a configured model; the error lists them."""
        known = backend.models() if model else None
        if not model or known is None or model in known:
            return
        if backend.kind != "server":
            raise UserError(f"unknown model {model!r}; configured models: {', '.join(known) or '(none)'}")
        from deerflow_kernel.server import model_hint

        raise UserError(f"unknown model {model!r}; the Jupyter server's configured models: "
                        f"{', '.join(known) or '(none)'}" + model_hint("unknown model"))

    @staticmethod
    def check_thread(backend: Backend, thread_id: str) -> str:
        """``--thread`` must name one of the user's threads, whole or by a unique prefix (views show
        the first 12 characters); the thread's full id, or an error listing the recent ones."""
        threads = backend.threads()
        if any(t.thread_id == thread_id for t in threads):
            return thread_id
        found = [t.thread_id for t in threads if t.thread_id.startswith(thread_id)] if len(thread_id) >= 6 else []
        if len(found) == 1:
            return found[0]
        recent = ", ".join(short_id(t.thread_id) for t in threads[:5])
        raise UserError(f"unknown thread {thread_id!r}" + (f"; recent threads: {recent} "
                        "(%deerflow threads lists them all)" if recent else "; you have no threads yet"))

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
        handle = self.backend().start_reply(thread_id, answer, self._thread_options.get(thread_id, RunOptions()))
        self._settle_waiting(thread_id, answer, where="from a later cell")
        self.thread_id = thread_id
        return self._follow_foreground(handle)

    def _settle_waiting(self, thread_id: str, answer: Any, *, where: str) -> None:
        """A new run on ``thread_id`` answers whatever it waited on: those forms turn read-only."""
        for request_id, (view, result) in list(self._waiting.items()):
            if result.thread_id == thread_id:
                del self._waiting[request_id]
                view.mark_answered(request_id, answer, where=where)
                result.answered_elsewhere = where
                result.refresh()

    def _pending_request_id(self, thread_id: str, answering: RunResult | None) -> str | None:
        result = answering or (self.last_result if self.last_result and self.last_result.thread_id == thread_id
                               else None)
        if result is not None and getattr(result, "answered_request", None):
            return result.answered_request
        if result is None or result.clarification is None:
            return None
        return str(result.clarification.get("request_id"))

    def _follow_foreground(self, handle: RunHandle, prompt: str | None = None) -> RunResult:
        view = self.last_view = self.make_view()
        if prompt and hasattr(view, "show_prompt"):
            view.show_prompt(prompt)
        view.show()
        result = self.follow(handle, view, interruptible=True)
        self.last_result = result
        self._cell_results[view] = result  # the Continue button updates it in place
        show_proposals(self, result)  # the run's notebook edit proposals: diff, Apply / Discard
        self.watch_memory(view, result)
        self._remember_waiting(view, result)
        return result

    def watch_memory(self, view: Any, result: RunResult, *, wait: float = 90.0) -> threading.Thread | None:
        """Once the run's memory extraction is over, add "🧠 memory: +2 facts" and Undo to its view.

        Only widget views (a plain shell has no place to show a late line: ``%deerflow memory
        changes`` lists them); the wait is on a daemon thread, never on the cell.
        """
        if not hasattr(view, "_append") or result.status != "success" or not result.run_id:
            return None
        backend, run_id = self.backend(), result.run_id
        agent = self._thread_options.get(result.thread_id or "", RunOptions()).agent_name

        def work() -> None:
            try:
                change = backend.memory_change(run_id, agent=agent, wait=wait)
            except UserError:  # the server went away, memory is off there...: no line
                return
            if change:
                from deerflow_kernel.memory_line import memory_widget

                view._append(memory_widget(change, self.undo_memory))

        thread = threading.Thread(target=work, name="deerflow-memory", daemon=True)
        thread.start()
        return thread

    def undo_memory(self, run_id: str) -> str:
        """The memory line's Undo: ``%deerflow memory undo RUN``; what to say."""
        from deerflow.memory.commands import render_text

        return render_text("undo", self.backend().memory("undo", run_id))

    def _remember_waiting(self, view: Any, result: RunResult) -> None:
        if result.waiting and result.clarification is not None and hasattr(view, "mark_answered"):
            self._waiting[str(result.clarification.get("request_id"))] = (view, result)

    def follow(self, handle: RunHandle, view: Any, *, interruptible: bool) -> RunResult:
        """Render a run's events until it ends; an interrupt (Ctrl-C / kernel interrupt) cancels it."""
        events: list[ev.Event] = []
        log = _EventLog.from_env()
        cancelling = False
        if hasattr(view, "attach"):
            view.attach(handle.cancel, background=not interruptible)
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

    def _result(self, events: list[ev.Event], handle: RunHandle) -> RunResult:
        if not any(isinstance(e, ev.RunFinished) for e in events):
            message = next((e.message for e in events if isinstance(e, ev.Error)), "the run's events stopped")
            events.append(ev.RunFinished(run_id=handle.run_id or "", thread_id=handle.thread_id or "",
                                         status="error", error=message))
        result = RunResult.from_events(events)
        result.session = self
        if result.run_id:
            self.runs[result.run_id] = result
        return result

    def find_run(self, run_id: str | None = None) -> RunResult:
        """The last run, or the run (id or prefix) this kernel followed; one line naming them when unknown."""
        if run_id is None:
            if self.last_result is None:
                raise UserError("no run yet in this kernel: run %%deerflow first")
            return self.last_result
        found = [r for rid, r in self.runs.items() if rid.startswith(run_id)]
        if len(found) != 1:
            known = ", ".join(short_id(rid) for rid in list(self.runs)[-5:]) or "(none yet)"
            raise UserError(f"{'ambiguous' if found else 'unknown'} run {run_id!r}; runs of this kernel: {known}")
        return found[0]

    # -- views and the form -------------------------------------------------------------------
    def make_view(self) -> Any:
        if not self.widgets:
            from deerflow_kernel.text_view import TextView

            return TextView()
        from deerflow_kernel.cells import CellInserter
        from deerflow_kernel.notebook import calling_cell_id, notebook_path
        from deerflow_kernel.view import RunView

        backend = self.backend()
        api = backend.api_path()
        inserter = CellInserter(self, notebook_path(backend.kind), calling_cell_id(self.shell), api)
        return RunView(read_artifact=backend.read_artifact, artifact_url=backend.artifact_url,
                       on_reply=self.continue_in_view, on_continue=self.resume_in_view,
                       on_insert=inserter, api=api)

    def resume_in_view(self, view: Any) -> None:
        """The Continue button: resume the view's interrupted run in the background, streaming into ``view``."""
        thread_id = view.thread_id
        self._arm_interrupt()

        def work() -> None:
            try:
                backend = self.backend()
                handle = backend.start(backend.continue_prompt(thread_id), thread_id,
                                       self._thread_options.get(thread_id, RunOptions()))
            except UserError as exc:
                view.continue_failed(str(exc))
                return
            view.begin_continue()
            self._background.add(view)
            try:
                result = self.follow(handle, view, interruptible=False)
                cell = self._cell_results.get(view)
                if cell is not None:  # the cell's result (its ``_``, ``Out[n]``) now holds the continued run
                    adopt(cell, result)
                    self.runs[cell.run_id or ""] = cell
                    result = cell
                self.last_result = result
                self._remember_waiting(view, result)
            finally:
                self._background.discard(view)

        threading.Thread(target=work, name="deerflow-continue", daemon=True).start()

    def continue_in_view(self, view: Any, request: Mapping[str, Any], answer: Any) -> None:
        """A form was submitted: start the next run in the background, streaming into ``view``."""
        request_id = str(request.get("request_id"))
        continuation = _Continuation()
        self._continuations[request_id] = continuation
        thread_id = view.thread_id
        form = view.forms.get(request_id)
        waiting = self._waiting.pop(request_id, None)
        self._arm_interrupt()

        def work() -> None:
            try:
                handle = self.backend().start_reply(thread_id, answer, self._thread_options.get(thread_id, RunOptions()))
            except UserError as exc:
                if form is not None:
                    form.show_error(str(exc))
                continuation.done.set()  # with no result: a later reply answers afresh
                return
            view.mark_answered(request_id, answer, refresh=False)  # the next run streams into it
            if form is not None:
                form.show_sent(answer)
            view.begin_reply(answer, request_id)
            self._background.add(view)
            try:
                result = continuation.result = self.follow(handle, view, interruptible=False)
                self.last_result = result
                if waiting is not None:  # the cell that asked now holds the run's final state
                    adopt(waiting[1], result, answered_request=request_id)
                self._remember_waiting(view, result)
            finally:
                self._background.discard(view)
                continuation.done.set()

        threading.Thread(target=work, name="deerflow-form-reply", daemon=True).start()

    # -- Kernel → Interrupt for runs in the background -------------------------------------------
    def _arm_interrupt(self) -> None:
        """Make SIGINT cancel the runs forms started, while the kernel is idle.

        ipykernel ignores SIGINT between requests and, around each request,
        swaps in ``default_int_handler`` and then restores the handler it
        saved.  Replacing that saved handler (or, outside a request, the
        process handler) makes Kernel → Interrupt reach a run that streams in
        the background; with no such run, the previous handler acts as before.
        """
        if self._sigint_armed:
            return
        kernel = getattr(self.shell, "kernel", None)
        if kernel is not None and hasattr(kernel, "saved_sigint_handler"):
            self._idle_sigint, kernel.saved_sigint_handler = kernel.saved_sigint_handler, self._on_sigint
        elif threading.current_thread() is threading.main_thread():
            self._idle_sigint = signal.signal(signal.SIGINT, self._on_sigint)
        else:
            return
        self._sigint_armed = True

    def _on_sigint(self, signum: int, frame: Any) -> None:
        views = [v for v in list(self._background) if v.live]
        if views:
            for view in views:
                view.request_stop()
            return
        previous = self._idle_sigint
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            raise KeyboardInterrupt

    def disarm_interrupt(self) -> None:
        """Put back the SIGINT handler :meth:`_arm_interrupt` replaced (extension unload, tests)."""
        if not self._sigint_armed:
            return
        kernel = getattr(self.shell, "kernel", None)
        if kernel is not None and getattr(kernel, "saved_sigint_handler", None) == self._on_sigint:
            kernel.saved_sigint_handler = self._idle_sigint
        elif signal.getsignal(signal.SIGINT) == self._on_sigint and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._idle_sigint)
        self._sigint_armed = False

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

    def write(self, event: ev.Event) -> None:
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(event.model_dump(mode="json"), ensure_ascii=False) + "\n")

"""The session's run loop against a fake backend: form continuations, interrupts, broken streams."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import comm
import pytest

from deerflow.errors import UserError
from deerflow.runtime import events as ev
from deerflow_kernel import session as session_module
from deerflow_kernel.backend import ArtifactNotFound, Backend, RunHandle, ThreadInfo
from deerflow_kernel.result import RunResult
from deerflow_kernel.session import KernelSession
from deerflow_kernel.view import RunView

REQUEST = {"version": 1, "request_id": "clarification:c1", "input_mode": "free_text", "question": "Which year?"}


def started(run: str) -> ev.RunStarted:
    return ev.RunStarted(run_id=run, thread_id="t1", model="fake")


def finished(run: str, status: str = "success", text: str = "") -> ev.RunFinished:
    return ev.RunFinished(run_id=run, thread_id="t1", status=status, text=text)


class FakeBackend(Backend):
    """Plays canned runs; records what it was asked."""

    kind = "fake"

    def __init__(self, runs: list[Any]) -> None:
        self.runs = runs
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []
        self.cancelled: list[str] = []
        self.cancel_seen = threading.Event()

    def _handle(self, kind: str, payload: Any, options: Any) -> RunHandle:
        self.calls.append((kind, payload, options.to_dict()))
        produce = self.runs.pop(0)
        return RunHandle(lambda emit: produce(emit, self), self._cancel).start()

    def _cancel(self, run_id: str) -> bool:
        self.cancelled.append(run_id)
        self.cancel_seen.set()
        return True

    def start(self, prompt, thread_id, options):
        return self._handle("start", prompt, options)

    def start_reply(self, thread_id, answer, options):
        if answer == "bad":
            raise UserError("option 9 does not exist")
        return self._handle("reply", answer, options)

    def describe(self):
        return {"backend": "fake"}

    def create_thread(self):
        return "t1"

    def threads(self):
        return []

    def upload(self, thread_id, name, data):
        raise NotImplementedError

    def artifacts(self, thread_id):
        return []

    def read_artifact(self, thread_id, path):
        return b""

    def skills(self):
        return []


def play(*events: Any):
    def produce(emit, backend):
        for event in events:
            emit(event)
    return produce


class Shell:
    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {}


@pytest.fixture
def session(monkeypatch):
    monkeypatch.setattr(comm, "create_comm", lambda **kw: comm.DummyComm(**kw))
    s = KernelSession(Shell(), widgets=True)
    monkeypatch.setattr(RunView, "show", lambda self: None)
    return s


def use(session: KernelSession, backend: FakeBackend) -> FakeBackend:
    session._backend, session._backend_key = backend, session_module.backend_key()
    return backend


def test_a_submitted_form_streams_the_next_run_into_the_same_view(session):
    backend = use(session, FakeBackend([
        play(started("r1"), ev.Clarification(run_id="r1", thread_id="t1", call_id="c1", request=REQUEST, text="?"),
             finished("r1", "interrupted")),
        play(started("r2"), ev.Message(run_id="r2", thread_id="t1", message_id="m", text="Using 2024."),
             finished("r2", text="Using 2024.")),
    ]))
    first = session.run("Analyse it", session_module.CellOptions(model="scripted"))
    assert first.waiting and first.clarification["question"] == "Which year?"
    view = session.last_view
    form = view.forms["clarification:c1"]
    form.text.value = "2024"
    form.submit.click()
    continuation = session._continuations["clarification:c1"]
    assert continuation.done.wait(10)
    assert backend.calls[1] == ("reply", "2024", {"model_name": "scripted"})  # the reply keeps the run's options
    assert continuation.result.status == "success" and continuation.result.text == "Using 2024."
    assert "done" in view.header.value
    assert any("You answered" in getattr(w, "value", "") for w in view.transcript.children)
    # A pre-filled reply for the same question returns the run the form started instead of answering twice.
    again = first.reply("2023")
    assert again is continuation.result and len(backend.calls) == 2


def test_a_reply_the_backend_refuses_shows_in_the_form_and_keeps_it_editable(session):
    use(session, FakeBackend([
        play(started("r1"), ev.Clarification(run_id="r1", thread_id="t1", call_id="c1", request=REQUEST, text="?"),
             finished("r1", "interrupted")),
    ]))
    session.run("Analyse it", session_module.CellOptions())
    form = session.last_view.forms["clarification:c1"]
    form.text.value = "bad"
    form.submit.click()
    assert session._continuations["clarification:c1"].done.wait(10)
    assert "option 9 does not exist" in form.status.value
    assert not form.submit.disabled


def test_an_interrupt_while_streaming_cancels_the_run_and_shows_how_it_ended(session, monkeypatch):
    def slow(emit, backend):
        emit(started("r1"))
        emit(ev.ToolCall(run_id="r1", thread_id="t1", call_id="c", name="wait", args={}))
        backend.cancel_seen.wait(10)
        emit(finished("r1", "cancelled"))

    backend = use(session, FakeBackend([slow]))
    render = RunView.render

    def interrupted_render(self, event):
        render(self, event)
        if event.type == "tool_call":
            raise KeyboardInterrupt  # what a kernel interrupt does to the cell's thread

    monkeypatch.setattr(RunView, "render", interrupted_render)
    result = session.run("wait a minute", session_module.CellOptions())
    assert backend.cancelled == ["r1"]
    assert result.status == "cancelled"
    assert "cancelled" in session.last_view.header.value


def test_a_stream_that_breaks_ends_as_an_error_not_a_traceback(session):
    def broken(emit, backend):
        emit(started("r1"))
        raise UserError("lost the event stream from http://srv/")

    use(session, FakeBackend([broken]))
    result = session.run("go", session_module.CellOptions())
    assert result.status == "error" and "lost the event stream" in result.error


def test_changing_the_config_rebuilds_the_backend_and_forgets_the_thread(session, monkeypatch):
    old = use(session, FakeBackend([]))
    session.thread_id = "t1"
    built = []
    monkeypatch.setattr(session_module, "select_backend", lambda: built.append(FakeBackend([])) or built[-1])
    monkeypatch.setenv("DEERFLOW_CONFIG", "/elsewhere/config.yaml")
    assert session.backend() is built[0] and session.backend() is not old
    assert session.thread_id is None


# -- one truth per cell, Stop, Kernel → Interrupt -----------------------------------------------------
ASKS = (started("r1"), ev.Clarification(run_id="r1", thread_id="t1", call_id="c1", request=REQUEST, text="?"),
        finished("r1", "interrupted"))


class Kernel:
    """What the session touches of ipykernel: the SIGINT handler it restores between requests."""

    def __init__(self) -> None:
        self.saved_sigint_handler: Any = signal.SIG_IGN


class RecordingLine:
    """Stands in for the DisplayHandle of a result's line: records its updates."""

    def __init__(self) -> None:
        self.shown: list[dict[str, Any]] = []

    def update(self, data: dict[str, Any], raw: bool = False) -> None:
        self.shown.append(data)


def test_a_reply_from_a_later_cell_turns_the_waiting_form_read_only(session):
    use(session, FakeBackend([play(*ASKS), play(started("r2"), finished("r2", text="Using 2024."))]))
    first = session.run("Analyse it", session_module.CellOptions())
    first._displays.append(line := RecordingLine())
    asked = session.last_view
    form = asked.forms["clarification:c1"]
    assert not form.submit.disabled
    second = session.reply("2024")
    assert second.status == "success" and session.last_view is not asked
    assert form.submit.disabled and form.text.disabled and "Answered (from a later cell): 2024" in form.status.value
    assert first.waiting  # an explicit reply returns the new result (the new `_`); the old one is what was asked
    assert line.shown[-1]["text/plain"].endswith("asks: Which year? · answered from a later cell>")


def test_a_run_a_form_continued_updates_the_cell_result_in_place(session):
    backend = use(session, FakeBackend([play(*ASKS), play(started("r2"), finished("r2", text="Using 2024."))]))
    first = session.run("Analyse it", session_module.CellOptions())
    first._displays.append(line := RecordingLine())  # the line IPython showed under the cell
    form = session.last_view.forms["clarification:c1"]
    form.text.value = "2024"
    form.submit.click()
    assert session._continuations["clarification:c1"].done.wait(10)
    assert first.status == "success" and first.text == "Using 2024." and not first.waiting
    assert "Using 2024." in repr(first) and line.shown[-1] == {"text/plain": repr(first)}
    again = first.reply("2023")  # a notebook's pre-filled reply cell is still harmless
    assert again.text == "Using 2024." and len(backend.calls) == 2


def _slow_second_run(emit, backend):
    emit(started("r2"))
    emit(ev.ToolCall(run_id="r2", thread_id="t1", call_id="c", name="wait", args={}))
    backend.cancel_seen.wait(10)
    emit(finished("r2", "cancelled"))


def test_the_stop_button_cancels_a_run_continued_from_a_form(session):
    backend = use(session, FakeBackend([play(*ASKS), _slow_second_run]))
    session.run("Analyse it", session_module.CellOptions())
    view = session.last_view
    view.forms["clarification:c1"].text.value = "2024"
    view.forms["clarification:c1"].submit.click()
    _wait_until(lambda: view.live and view.status == "running")
    assert view.stop.layout.display is None  # shown while the run streams
    view.stop.click()
    assert session._continuations["clarification:c1"].done.wait(10)
    assert backend.cancelled == ["r2"] and view.status == "cancelled"
    assert view.stop.layout.display == "none"


def test_kernel_interrupt_cancels_a_run_continued_from_a_form(session):
    session.shell.kernel = Kernel()
    backend = use(session, FakeBackend([play(*ASKS), _slow_second_run]))
    session.run("Analyse it", session_module.CellOptions())
    view = session.last_view
    view.forms["clarification:c1"].text.value = "2024"
    view.forms["clarification:c1"].submit.click()
    _wait_until(lambda: view.live and view.status == "running")
    handler = session.shell.kernel.saved_sigint_handler  # what ipykernel installs once the request ends
    assert handler != signal.SIG_IGN
    handler(signal.SIGINT, None)  # Kernel → Interrupt while the kernel is idle
    assert session._continuations["clarification:c1"].done.wait(10)
    assert backend.cancelled == ["r2"] and view.status == "cancelled"
    handler(signal.SIGINT, None)  # with nothing running it does what the kernel did before: nothing
    session.close()
    assert session.shell.kernel.saved_sigint_handler == signal.SIG_IGN


def _wait_until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- errors a user can act on ----------------------------------------------------------------------
class ListingBackend(FakeBackend):
    def models(self):
        return ["research", "agents"]

    def threads(self):
        return [ThreadInfo("t1aaaaaaaaaaaaaa", "Deer"), ThreadInfo("t2bbbbbbbbbbbbbb", None)]

    def artifacts(self, thread_id):
        return ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/evidence.csv"]

    def read_artifact(self, thread_id, path):
        self.read = path
        if path.endswith("/evidence.csv"):
            return b"a,b\n1,2\n"
        raise ArtifactNotFound(f"DeerFlow server: {path} not found (404)")


def test_an_unknown_model_or_thread_is_one_line_that_names_what_exists(session):
    backend = use(session, ListingBackend([]))
    with pytest.raises(UserError, match=r"^unknown model 'nosuchmodel'; configured models: research, agents$"):
        session.run("go", session_module.CellOptions(model="nosuchmodel"))
    with pytest.raises(UserError, match=r"^unknown thread 'nope'; recent threads: t1aaaaaaaaaa, t2bbbbbbbbbb"):
        session.run("go", session_module.CellOptions(thread="nope"))
    assert backend.calls == []  # nothing was sent


def test_an_undefined_placeholder_is_an_error_before_sending(session):
    backend = use(session, ListingBackend([]))
    session.shell.user_ns.update(sites=["a"], question="q")
    with pytest.raises(UserError, match=r"\{sties\} \(did you mean \{sites\}\?\).*write \{\{sties\}\} for literal"):
        session.run("Visit {sties} about {question}", session_module.CellOptions())
    assert backend.calls == []


def test_load_names_the_files_that_exist_and_accepts_virtual_paths(session):
    backend = use(session, ListingBackend([]))
    result = RunResult("r1", "t1aaaaaaaaaaaaaa", "success", "", ["/mnt/user-data/outputs/report.md"], session=session)
    with pytest.raises(UserError, match=r"^load\('nope.csv'\): no such file .*files you can load: report.md, evidence.csv$"):
        result.load("nope.csv")
    assert list(result.load("/mnt/user-data/outputs/evidence.csv").columns) == ["a", "b"]
    assert backend.read == "/mnt/user-data/outputs/evidence.csv"
    with pytest.raises(UserError, match=r"only the thread's outputs"):
        result.load("/mnt/user-data/workspace/agent.ipynb")


def test_download_links_are_relative_to_the_server_base_path():
    from deerflow_kernel.server import ServerBackend

    backend = ServerBackend("http://127.0.0.1:8899/user/alice/", "secret")
    try:
        url = backend.artifact_url("t 1", "/mnt/user-data/outputs/a b.csv")
    finally:
        backend.close()
    assert url == "/user/alice/deerflow/api/threads/t%201/artifacts/a%20b.csv"
    assert "secret" not in url


def test_help_covers_every_subcommand_with_an_example(capsys):
    from deerflow_kernel.magics import DeerFlowMagics
    from deerflow_kernel.options import SUBCOMMANDS

    DeerFlowMagics.__new__(DeerFlowMagics)._cmd_help("")
    printed = capsys.readouterr().out
    for command in SUBCOMMANDS:
        assert f"%deerflow {command}" in printed, command
    assert "%%deerflow --new" in printed and "Kernel → Interrupt" in printed

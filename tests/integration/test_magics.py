"""``%deerflow`` / ``%%deerflow`` in a real IPython shell, with the harness in-process (offline scripts)."""

from __future__ import annotations

import io
import re

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from PIL import Image

from deerflow_kernel import session_of
from deerflow_kernel.text_view import TextView

pytestmark = pytest.mark.integration

CONFIG = """
models:
  - name: write
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: Writing the table and the report.
          tool_calls:
            - {name: write_file, args: {path: /mnt/user-data/outputs/table.csv, content: "city,n\\nOslo,3\\nLima,5\\n"}}
            - {name: write_file, args: {path: /mnt/user-data/outputs/report.md, content: "# Report\\n"}}
        - tool_calls:
            - {name: present_files, args: {filepaths: [/mnt/user-data/outputs/table.csv, /mnt/user-data/outputs/report.md]}}
        - text: Both files are presented.
  - name: uploads
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - expect: /mnt/user-data/uploads/sales.csv
          tool_calls: [{name: list_uploaded_files, args: {}}]
        - expect: sales.csv
          text: I can see sales.csv.
  - name: chat
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns: [one, two, three, four, five, six]
  - name: ask
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls:
            - name: ask_clarification
              args:
                question: Which region?
                fields:
                  - {name: region, label: Region, type: text, required: true}
                  - {name: depth, label: Depth, type: select, options: [short, long]}
        - expect: "Region: Midwest"
          text: Working on the Midwest.
  - name: slow
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls: [{name: wait, args: {seconds: 60}}]
        - text: unreachable
  - name: resume
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls: [{name: wait, args: {seconds: 60}}]
        - expect: Continue the task from where you stopped
          text: Picked up where I stopped.
tools:
  - {name: wait, group: test, use: "fixtures.slow_tools:wait"}
"""


@pytest.fixture
def shell(deerflow_home, tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    monkeypatch.setenv("DEERFLOW_CONFIG", str(config))
    monkeypatch.delenv("DEERFLOW_SERVER_URL", raising=False)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "deerflow_kernel")
    yield ip
    ip.run_line_magic("unload_ext", "deerflow_kernel")
    for name in ("topic", "sales", "blob", "_"):
        ip.user_ns.pop(name, None)


def run(ip: InteractiveShell, source: str):
    outcome = ip.run_cell(source)
    if outcome.error_in_exec is not None and not isinstance(outcome.error_in_exec, UsageError):
        raise outcome.error_in_exec
    return outcome


def usage_error(ip: InteractiveShell, source: str) -> str:
    outcome = ip.run_cell(source)
    assert isinstance(outcome.error_in_exec, UsageError), outcome.error_in_exec
    return str(outcome.error_in_exec)


def test_a_cell_runs_with_interpolation_and_returns_a_result_that_loads_files(shell, deerflow_home, capsys):
    shell.user_ns["topic"] = "deer"
    result = run(shell, '%%deerflow --model write\nReport on {topic}; keep {"json": true} and {{missing}} as written').result
    assert result.status == "success" and result.text == "Both files are presented."
    assert result.artifacts == ["/mnt/user-data/outputs/table.csv", "/mnt/user-data/outputs/report.md"]
    table = result.load("table.csv")
    assert isinstance(table, pd.DataFrame) and table.to_dict("list") == {"city": ["Oslo", "Lima"], "n": [3, 5]}
    assert result.load("report.md") == "# Report\n"
    outputs = next(deerflow_home.glob(f"users/local/threads/{result.thread_id}/user-data/outputs"))
    buffer = io.BytesIO()
    Image.new("RGB", (3, 2), "red").save(buffer, format="PNG")
    (outputs / "chart.png").write_bytes(buffer.getvalue())
    assert result.load("chart.png").size == (3, 2)  # any output file loads, presented or not
    client = session_of(shell).backend().client
    first = client.thread(result.thread_id).messages[0].content
    assert first == 'Report on deer; keep {"json": true} and {missing} as written'
    shown = repr(result)
    assert "\n" not in shown and len(shown) < 160 and "success" in shown and "table.csv" in shown
    printed = capsys.readouterr().out
    assert "→ write_file" in printed and "run finished: success" in printed


@pytest.mark.parametrize(("source", "message"), [
    ("%%deerflow --record a.jsonl --replay b.jsonl\nhi", "not allowed with argument --record"),
    ("%%deerflow --model\nhi", "expected one argument"),
    ("%%deerflow\n   \n", "the prompt is empty"),
    ("%%deerflow --with nothing_here\nhi", "no variable named 'nothing_here'"),
    ("%%deerflow --thread not-a-thread\nhi", "unknown thread 'not-a-thread'"),
    ("%%deerflow --model nonexistent\nhi", "unknown model 'nonexistent'; configured models: write,"),
    ("%%deerflow\nAbout {topc}", "{topc}, not defined in the notebook"),
    ("%deerflow", "needs a prompt or a command"),
    ("%deerflow status please", "takes no arguments"),
    ('%deerflow reply "yes"', "no current thread"),
    ("%deerflow upload /no/such/file.csv", "neither a notebook variable nor a file"),
])
def test_mistakes_are_one_line_usage_errors_not_tracebacks(shell, source, message, capsys):
    assert message in usage_error(shell, source)
    assert "Traceback" not in capsys.readouterr().err


def test_with_uploads_a_dataframe_as_csv_named_after_the_variable(shell, deerflow_home):
    shell.user_ns["sales"] = pd.DataFrame({"region": ["N", "S"], "revenue": [10, 20]})
    result = run(shell, "%%deerflow --model uploads --with sales\nWhat is in there?").result
    assert result.status == "success", result.error  # the script checked the prompt and the listing
    uploaded = deerflow_home / f"users/local/threads/{result.thread_id}/user-data/uploads/sales.csv"
    assert pd.read_csv(uploaded).equals(shell.user_ns["sales"])
    prompt = session_of(shell).backend().client.thread(result.thread_id).messages[0].content
    assert prompt.startswith("What is in there?") and "`sales` → /mnt/user-data/uploads/sales.csv" in prompt


def test_the_notebook_keeps_a_current_thread_until_new_or_thread_switches(shell, capsys):
    first = run(shell, "%deerflow --model chat hello").result
    second = run(shell, "%deerflow --model chat again").result
    assert second.thread_id == first.thread_id and second.text == "two"
    third = run(shell, "%deerflow --new --model chat fresh start").result
    assert third.thread_id != first.thread_id and third.text == "one"
    back = run(shell, f"%%deerflow --thread {first.thread_id}\nand once more").result
    assert back.thread_id == first.thread_id and back.text == "three"  # the thread's model is kept
    capsys.readouterr()
    run(shell, "%deerflow threads")
    listed = capsys.readouterr().out
    assert re.search(rf"^\* {first.thread_id}  hello$", listed, re.M)
    assert re.search(rf"^  {third.thread_id}  fresh start$", listed, re.M)


def test_ref_lets_one_run_read_another_thread_of_the_notebook(shell, tmp_path, monkeypatch):
    source = run(shell, "%deerflow --new --model chat Note that the herd moved north").result
    config = tmp_path / "with-reader.yaml"  # a model that knows the thread id; the home stays the same
    monkeypatch.setenv("DEERFLOW_CONFIG", str(config))
    config.write_text(CONFIG.replace("models:\n", f"""models:
  - name: reader
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls: [{{name: read_conversation, args: {{thread_id: {source.thread_id}}}}}]
        - text: Read it.
""", 1))
    read = run(shell, f"%%deerflow --new --model reader --ref {source.thread_id}\nWhat did it say?").result
    assert read.status == "success" and read.text == "Read it."
    messages = session_of(shell).backend().client.thread(read.thread_id).messages
    page = next(m for m in messages if m.type == "tool")
    assert page.status == "success" and "Note that the herd moved north" in page.content
    unread = run(shell, "%%deerflow --new --model reader\nAnd without --ref?").result
    tool = next(m for m in session_of(shell).backend().client.thread(unread.thread_id).messages if m.type == "tool")
    assert tool.status == "error" and "herd" not in tool.content


def test_a_clarification_ends_the_run_and_reply_continues_it(shell, capsys):
    asked = run(shell, "%deerflow --model ask Research something").result
    assert asked.status == "interrupted" and asked.waiting
    assert "%deerflow reply --field region=..." in capsys.readouterr().out
    problem = usage_error(shell, "%deerflow reply --field depth=medium")
    assert "'region' (Region) is required" in problem and "must be one of short, long" in problem
    answered = run(shell, "%deerflow reply --field region=Midwest --field depth=long").result
    assert answered.status == "success" and answered.text == "Working on the Midwest."
    assert answered.thread_id == asked.thread_id


def test_upload_artifacts_and_status_commands(shell, tmp_path, capsys):
    data = tmp_path / "notes.txt"
    data.write_text("field notes")
    shell.user_ns["blob"] = b"\x89PNG\r\n\x1a\n..."
    run(shell, f"%deerflow upload {data} blob")
    out = capsys.readouterr().out
    assert "uploaded" in out and "/mnt/user-data/uploads/notes.txt" in out and "/mnt/user-data/uploads/blob.png" in out
    result = run(shell, "%deerflow --model write go").result
    capsys.readouterr()
    run(shell, "%deerflow artifacts")
    assert capsys.readouterr().out.split() == result.artifacts
    run(shell, "%deerflow status")
    status = capsys.readouterr().out
    assert "in-process" in status and result.thread_id in status and str(tmp_path / "config.yaml") in status


def test_skills_lists_the_skills_the_agent_can_follow(shell, tmp_path, monkeypatch, capsys):
    skill = tmp_path / "skills" / "public" / "field-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: field-notes\ndescription: Keep tidy field notes.\n---\n\nWrite notes.\n")
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG + f"skills:\n  path: {tmp_path / 'skills'}\n")
    run(shell, "%deerflow skills")
    assert "field-notes  Keep tidy field notes." in capsys.readouterr().out


def test_an_interrupt_while_the_agent_works_cancels_the_run(shell, monkeypatch):
    class InterruptedView(TextView):
        def render(self, event):
            super().render(event)
            if event.type == "tool_call":
                raise KeyboardInterrupt  # the kernel interrupt arrives while the tool runs

    session = session_of(shell)
    monkeypatch.setattr(session, "make_view", InterruptedView)
    result = run(shell, "%deerflow --model slow take your time").result
    assert result.status == "cancelled"
    record = session.backend().client._call(session.backend().client._async.manager())
    assert record.store.list_runs(result.thread_id, "local")[-1].status == "cancelled"


class _InterruptedOnce(TextView):
    """A view whose first tool call meets a kernel interrupt (the run is cancelled mid-tool)."""

    interrupted = False

    def render(self, event):
        super().render(event)
        if event.type == "tool_call" and not _InterruptedOnce.interrupted:
            _InterruptedOnce.interrupted = True
            raise KeyboardInterrupt


def test_continue_resumes_the_interrupted_run_of_the_current_thread(shell, monkeypatch, capsys):
    session = session_of(shell)
    monkeypatch.setattr(_InterruptedOnce, "interrupted", False)
    monkeypatch.setattr(session, "make_view", _InterruptedOnce)
    stopped = run(shell, "%deerflow --model resume take your time").result
    assert stopped.status == "cancelled"
    resumed = run(shell, "%deerflow continue").result
    assert resumed.status == "success" and resumed.text == "Picked up where I stopped."
    assert resumed.thread_id == stopped.thread_id
    assert "nothing to continue: its last run ended success" in usage_error(shell, "%deerflow continue")
    assert "unknown thread 'nope'" in usage_error(shell, "%deerflow continue --thread nope")


def test_the_continue_button_resumes_an_interrupted_run_in_the_same_view(shell, monkeypatch):
    import time

    import comm

    from deerflow_kernel.view import RunView

    monkeypatch.setattr(comm, "create_comm", lambda **kw: comm.DummyComm(**kw))
    monkeypatch.setattr(RunView, "show", lambda self: None)
    render = RunView.render

    def interrupted_once(self, event):
        render(self, event)
        if event.type == "tool_call" and not getattr(self, "_was_interrupted", False):
            self._was_interrupted = True
            raise KeyboardInterrupt

    monkeypatch.setattr(RunView, "render", interrupted_once)
    session = session_of(shell)
    monkeypatch.setattr(session, "widgets", True)
    stopped = run(shell, "%deerflow --model resume take your time").result
    view = session.last_view
    assert stopped.status == "cancelled" and view.resumable
    assert view.resume.layout.display is None  # the Continue button is shown
    view.resume.click()
    deadline = time.monotonic() + 60

    def continued() -> bool:  # the view ends first; the session takes the continued run just after
        return view.status == "success" and session.last_result.text == "Picked up where I stopped."

    while not continued() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert view.status == "success" and session.last_result.text == "Picked up where I stopped."
    while stopped.status != "success" and time.monotonic() < deadline:  # adopted just after the view ends
        time.sleep(0.05)
    # the cell's own result (its ``_`` and ``Out[n]``) now holds the continued run's final state
    assert stopped.status == "success" and stopped.text == "Picked up where I stopped."
    assert session.last_result is stopped and shell.user_ns["_"] is stopped
    assert session.find_run(stopped.run_id) is stopped
    assert view.resume.layout.display == "none"
    assert any("Continued" in getattr(w, "value", "") for w in view.transcript.children)


def test_no_memory_runs_teach_the_offline_model_nothing(shell, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DEERFLOW_CONFIG")  # the embedded offline model, which learns from the user's words
    monkeypatch.chdir(tmp_path)
    session = session_of(shell)

    def remembered() -> list[str]:
        session.close()  # pending extractions finish (within their grace) before the store is read again
        capsys.readouterr()
        run(shell, "%deerflow memory list")
        return capsys.readouterr().out

    quiet = run(shell, "%deerflow --new --no-memory I am a botanist. Write me a report").result
    assert quiet.status == "success"
    assert "botanist" not in remembered()
    taught = run(shell, "%deerflow --new I study white-tailed deer in Minnesota. Write me a report").result
    assert taught.status == "success"
    assert "I study white-tailed deer in Minnesota" in remembered()  # the same run without the flag does learn


def test_the_run_view_says_what_memory_learned_and_its_undo_forgets_it(shell, tmp_path, monkeypatch, capsys):
    import comm

    from deerflow_kernel.view import RunView

    monkeypatch.delenv("DEERFLOW_CONFIG")  # the embedded offline model, which learns from the user's words
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(comm, "create_comm", lambda **kw: comm.DummyComm(**kw))
    monkeypatch.setattr(RunView, "show", lambda self: None)
    session = session_of(shell)
    monkeypatch.setattr(session, "widgets", True)
    watchers = []
    watch = session.watch_memory
    monkeypatch.setattr(session, "watch_memory", lambda view, result: watchers.append(watch(view, result)))
    taught = run(shell, "%deerflow --new I study white-tailed deer in Minnesota. Write me a report").result
    assert taught.status == "success"
    view = session.last_view
    (watcher,) = watchers
    watcher.join(timeout=120)  # the extraction waits for its quiet spell, then the line appears
    (line,) = [w for w in view.transcript.children
               if getattr(w, "children", None) and "memory: +1 fact" in getattr(w.children[0], "value", "")]
    assert "I study white-tailed deer in Minnesota" in line.children[0].value
    capsys.readouterr()
    run(shell, "%deerflow memory changes")
    assert f"{taught.run_id}  memory: +1 fact" in capsys.readouterr().out
    line.children[1].click()  # Undo
    assert "undid the memory change of run" in line.children[0].value
    run(shell, "%deerflow memory list")
    assert "white-tailed" not in capsys.readouterr().out


@pytest.mark.parametrize(("text", "reason"), [
    ("{not json", "malformed JSON"),
    ('{"mcpServers": ["remote"]}', "'mcpServers' must be an object of server entries"),
])
def test_a_malformed_extensions_file_is_one_line_naming_it(shell, tmp_path, capsys, text, reason):
    extensions = tmp_path / "extensions_config.json"  # beside the config.yaml in use
    extensions.write_text(text)
    for source in ("%deerflow mcp", "%deerflow mcp tools"):
        message = usage_error(shell, source)
        assert reason in message and str(extensions) in message and "\n" not in message, message
    assert "no MCP servers configured" not in capsys.readouterr().out
    if "mcpServers" not in text:  # the skills are read from the same file
        assert str(extensions) in usage_error(shell, "%deerflow skills")
        assert str(extensions) in usage_error(shell, "%%deerflow --model write\nhi")
    assert extensions.read_text() == text

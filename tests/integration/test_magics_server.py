"""The magics against a real ``jupyter server`` running the DeerFlow extension.

The kernel side must not care where the harness runs: the same scripted run
gives the same typed events in-process and over HTTP/SSE, and every magic
(uploads, replies, artifacts, cancel) works through the server's API.
"""

from __future__ import annotations

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from test_magics import CONFIG  # the same scripted models as the in-process magics tests

from deerflow import DeerFlowClient
from deerflow.run_options import RunOptions
from deerflow_kernel import session_of
from deerflow_kernel.local import InProcessBackend
from deerflow_kernel.server import ServerBackend
from deerflow_kernel.text_view import TextView
from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration

VOLATILE = {"run_id", "thread_id", "ts", "message_id"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("magics-server")
    (work / "config.yaml").write_text(CONFIG)
    env = {"DEERFLOW_HOME": str(work / "server-home"), "DEERFLOW_CONFIG": str(work / "config.yaml"),
           "OPENAI_API_KEY": ""}
    with running_jupyter(work, env=env) as proc:
        proc.work = work
        yield proc


def collect(backend, prompt: str, model: str) -> list:
    thread_id = backend.create_thread()
    handle = backend.start(prompt, thread_id, RunOptions(model_name=model))
    events = []
    while (event := handle.next_event()) is not None:
        events.append(event)
    return events


def normalized(events: list) -> list[dict]:
    """Events without volatile ids; results of parallel tool calls (which finish in any order) sorted."""
    out: list[dict] = []
    results: list[dict] = []
    for event in events:
        dumped = event.model_dump(mode="json", exclude=VOLATILE | {"seq"})
        if event.type == "tool_result":
            results.append(dumped)
            continue
        out += [*sorted(results, key=lambda d: d["call_id"]), dumped]
        results = []
    return out + sorted(results, key=lambda d: d["call_id"])


def test_in_process_and_server_give_the_same_events_for_the_same_scripted_run(server, tmp_path):
    local = InProcessBackend(DeerFlowClient(config_path=server.work / "config.yaml", home=tmp_path / "local-home"))
    remote = ServerBackend(server.url, server.token)
    try:
        here = collect(local, "Write the table", "write")
        there = collect(remote, "Write the table", "write")
    finally:
        local.close()
        remote.close()
    assert [e.type for e in there] == [e.type for e in here]
    assert "message_delta" in {e.type for e in here} and here[-1].type == "run_finished"
    assert normalized(there) == normalized(here)


@pytest.fixture
def shell(server, monkeypatch, deerflow_home):
    monkeypatch.setenv("DEERFLOW_SERVER_URL", server.url)
    monkeypatch.setenv("DEERFLOW_SERVER_TOKEN", server.token)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "deerflow_kernel")
    yield ip
    ip.run_line_magic("unload_ext", "deerflow_kernel")
    ip.user_ns.pop("sales", None)


def run(ip, source: str):
    outcome = ip.run_cell(source)
    if outcome.error_in_exec is not None:
        raise outcome.error_in_exec
    return outcome.result


def test_magics_run_upload_load_and_list_through_the_server(shell, server, capsys):
    shell.user_ns["sales"] = pd.DataFrame({"region": ["N", "S"], "revenue": [10, 20]})
    listed = run(shell, "%%deerflow --new --model uploads --with sales\nWhat is in there?")
    assert listed.status == "success", listed.error  # the script saw sales.csv in the uploads
    uploaded = server.work / f"server-home/users/{_owner(server)}/threads/{listed.thread_id}/user-data/uploads/sales.csv"
    assert pd.read_csv(uploaded).equals(shell.user_ns["sales"])
    result = run(shell, "%%deerflow --new --model write\nWrite the table")
    assert result.load("table.csv").to_dict("list") == {"city": ["Oslo", "Lima"], "n": [3, 5]}
    assert result.load("/mnt/user-data/outputs/report.md") == "# Report\n"
    capsys.readouterr()
    run(shell, "%deerflow artifacts")
    assert capsys.readouterr().out.split() == result.artifacts
    run(shell, "%deerflow threads")
    assert f"* {result.thread_id}  Write the table" in capsys.readouterr().out
    run(shell, "%deerflow status")
    assert server.api in capsys.readouterr().out


def test_a_reply_through_the_server_continues_the_thread(shell):
    asked = run(shell, "%deerflow --new --model ask Research something")
    assert asked.waiting
    with pytest.raises(UsageError, match="'region' \\(Region\\) is required"):
        run(shell, "%deerflow reply --field depth=long")
    answered = run(shell, "%deerflow reply --field region=Midwest")
    assert answered.status == "success" and answered.text == "Working on the Midwest."


def test_local_only_options_are_refused_in_server_mode(shell):
    with pytest.raises(UsageError, match="--mode only work when the harness runs in the kernel"):
        run(shell, "%%deerflow --new --mode autonomous\nhi")


def test_a_model_only_the_notebook_config_knows_gets_an_explanation(shell, monkeypatch, tmp_path):
    monkeypatch.setenv("DEERFLOW_CONFIG", str(tmp_path / "notebook-config.yaml"))
    with pytest.raises(UsageError, match="unknown model 'research'") as info:
        run(shell, "%%deerflow --new --model research\nhi")
    assert "DEERFLOW_CONFIG set in the notebook does not apply" in str(info.value)


def test_an_interrupt_cancels_the_run_on_the_server(shell, monkeypatch):
    class InterruptedView(TextView):
        def render(self, event):
            super().render(event)
            if event.type == "tool_call":
                raise KeyboardInterrupt

    monkeypatch.setattr(session_of(shell), "make_view", InterruptedView)
    result = run(shell, "%deerflow --new --model slow take your time")
    assert result.status == "cancelled"


def test_continue_through_the_server_resumes_the_interrupted_run(shell, monkeypatch):
    from test_magics import _InterruptedOnce

    monkeypatch.setattr(_InterruptedOnce, "interrupted", False)
    monkeypatch.setattr(session_of(shell), "make_view", _InterruptedOnce)
    stopped = run(shell, "%deerflow --new --model resume take your time")
    assert stopped.status == "cancelled"
    resumed = run(shell, "%deerflow continue")
    assert resumed.status == "success" and resumed.text == "Picked up where I stopped."
    assert resumed.thread_id == stopped.thread_id
    with pytest.raises(UsageError, match="nothing to continue: its last run ended success"):
        run(shell, "%deerflow continue")


def _owner(server) -> str:
    users = list((server.work / "server-home" / "users").iterdir())
    assert len(users) == 1
    return users[0].name


def test_what_a_run_taught_memory_reaches_the_kernel_and_is_undone_over_http(server):
    remote = ServerBackend(server.url, server.token)
    try:
        events = collect(remote, "I study white-tailed deer in Minnesota. Say one thing.", "chat")
        run_id = events[-1].run_id
        change = remote.memory_change(run_id, wait=60)  # the view's memory line waits like this
        assert change is not None and change["summary"] == "memory: +1 fact"
        [fact] = remote.memory("list")["facts"]
        assert fact["text"] == "I study white-tailed deer in Minnesota"
        edited = remote.memory("edit", f'{fact["id"]} "Studies white-tailed deer and elk"')["fact"]
        assert edited["text"] == "Studies white-tailed deer and elk"
        assert "- [context] Studies white-tailed deer and elk" in remote.memory("prompt", "elk")["block"]
        assert remote.memory("undo", run_id)["undone"]["run_id"] == run_id
        assert remote.memory("list")["facts"] == []
    finally:
        remote.close()


def test_a_malformed_extensions_file_on_the_server_is_one_line_naming_it(shell, server):
    # none was beside the server's config.yaml when it started: the one in its DEERFLOW_HOME is in use
    extensions = server.work / "server-home" / "extensions_config.json"
    extensions.write_text("{not json")
    try:
        for source in ("%deerflow mcp", "%deerflow mcp tools", "%deerflow skills"):
            with pytest.raises(UsageError) as refused:
                run(shell, source)
            message = str(refused.value)
            assert "malformed JSON" in message and str(extensions) in message and "\n" not in message, message
        assert extensions.read_text() == "{not json"
    finally:
        extensions.unlink()

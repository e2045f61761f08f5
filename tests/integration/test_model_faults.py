"""Real servers fail in many ways; a run says which model, which server and what happened.

Every test drives the real harness (``DeerFlowClient``) and a real ``ChatOpenAI`` over HTTP
against the loopback OpenAI-compatible server, which plays one fault per test.  What is
asserted is what a user sees: the run's final status, the one error (its kind and its
words), and that no tool ran with arguments that did not arrive whole.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deerflow import DeerFlowClient
from deerflow.client import RunResult
from deerflow.runtime import events as ev
from fixtures.openai_server import OpenAIServer, openai_server_fixture  # noqa: F401  (registers the fixture)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TARGET = "/mnt/user-data/outputs/notes.md"
WRITE = {"name": "write_file", "args": {"path": TARGET, "content": "# Notes\nline one\nline two\n"}}
# Deadlines far below the server's 30 s stall, far above a loopback answer: the stall is what ends the call.
FAST_DEADLINES = "    timeouts: {first_token: 2, idle: 2}\n"
# Deadlines far above the server's stall: something else must end the call, or nothing.
SLOW_DEADLINES = "    timeouts: {first_token: 60, idle: 60}\n"


def config(tmp_path: Path, server: OpenAIServer, *, streaming: bool = True, entry: str = "", extra: str = "",
           deadlines: str = FAST_DEADLINES) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
models:
  - name: fixture
    use: langchain_openai:ChatOpenAI
    model: fixture-model
    base_url: {server.base_url}
    api_key: $FIXTURE_KEY
    max_retries: 0
    streaming: {str(streaming).lower()}
{deadlines}{entry}{extra}""")
    return path


def run(tmp_path: Path, server: OpenAIServer, **options: Any) -> RunResult:
    tmp_path.mkdir(exist_ok=True)
    with DeerFlowClient(config_path=config(tmp_path, server, **options)) as client:
        return client.chat("Take notes")


def errors(result: RunResult) -> list[ev.Error]:
    return [e for e in result.events if isinstance(e, ev.Error)]


def assert_model_error(result: RunResult, server: OpenAIServer, *words: str) -> str:
    """The run ended ``error`` with one model error naming the model, its server and ``words``."""
    assert result.status == "error"
    (error,) = errors(result)
    assert error.kind == "model"
    assert error.message == result.error
    assert "model 'fixture'" in error.message and server.base_url in error.message
    for word in words:
        assert word in error.message
    assert "sk-fixture" not in error.message
    return error.message


@pytest.fixture(autouse=True)
def _key(monkeypatch, deerflow_home):
    monkeypatch.setenv("FIXTURE_KEY", "sk-fixture")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_a_stall_before_the_first_token_is_an_error_not_a_hang(tmp_path, openai_server):
    openai_server.add({"text": "never arrives", "fault": "stall_first"})
    result = run(tmp_path, openai_server)
    assert_model_error(result, openai_server, "stalled", "no first token within 2 s", "timeouts.first_token")


def test_a_stall_mid_stream_discards_the_partial_answer(tmp_path, openai_server):
    openai_server.add({"text": "The first words arrive and then nothing more comes", "fault": "stall_mid"})
    result = run(tmp_path, openai_server)
    message = assert_model_error(result, openai_server, "no new chunk for 2 s", "partial answer was discarded")
    assert "characters of answer" in message
    assert result.text == ""  # never success with the partial text


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "invoke"])
def test_an_html_page_with_status_200_is_named(tmp_path, openai_server, streaming):
    openai_server.add({"text": "unused", "fault": "html"})
    result = run(tmp_path, openai_server, streaming=streaming)
    message = assert_model_error(result, openai_server)
    assert "No generations found" not in message
    assert ("HTML page (title 'Welcome')" if not streaming else "no completion chunks") in message
    assert "/v1" in message  # the likely fix: point base_url at the OpenAI-compatible API


def test_an_empty_stream_is_an_error_not_an_empty_answer(tmp_path, openai_server):
    openai_server.add({"text": "unused", "fault": "empty"})
    result = run(tmp_path, openai_server)
    assert_model_error(result, openai_server, "the server sent no completion")


def test_a_server_failing_after_200_keeps_its_whole_message(tmp_path, openai_server):
    openai_server.add({"text": "Starting the answer now and then", "fault": "error_after_200"})
    result = run(tmp_path, openai_server)
    message = assert_model_error(result, openai_server, "failed in the middle of its answer")
    assert "upstream model crashed\nCUDA error: out of memory\n(at layer 12)" in message  # every line


def test_a_context_length_refusal_is_classified(tmp_path, openai_server):
    openai_server.add({"text": "unused", "fault": "context_length"})
    result = run(tmp_path, openai_server)
    assert_model_error(result, openai_server, "longer than the model's context window", "HTTP 400",
                       "Please reduce the length of the messages.")


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "invoke"])
def test_cut_off_tool_arguments_are_refused_to_the_model_and_never_run(tmp_path, openai_server, streaming):
    openai_server.add({"text": "Writing.", "tool_calls": [WRITE], "fault": "truncate_args"},
                      "The write was cut off; I will try again later.")
    with DeerFlowClient(config_path=config(tmp_path, openai_server, streaming=streaming)) as client:
        result = client.chat("Take notes")
        written = client.artifacts(result.thread_id)
    assert result.status == "success"
    assert written == []  # write_file never ran with the truncated content
    (refusal,) = [e for e in result.events if isinstance(e, ev.ToolResult)]
    assert (refusal.name, refusal.status, refusal.code) == ("write_file", "error", "arguments_cut_off")
    last = openai_server.completions[-1].messages
    tool_texts = [m["content"] for m in last if m["role"] == "tool"]
    assert len(tool_texts) == 1 and "were cut off" in tool_texts[0] and "Nothing was run" in tool_texts[0]


def test_a_function_name_repeated_in_every_chunk_is_taken_once(tmp_path, openai_server):
    openai_server.add({"tool_calls": [WRITE], "fault": "repeat_names"}, "Saved.")
    with DeerFlowClient(config_path=config(tmp_path, openai_server)) as client:
        result = client.chat("Take notes")
        content = client.read_artifact(result.thread_id, "notes.md")
    assert result.status == "success"
    assert content == b"# Notes\nline one\nline two\n"
    assert [e.name for e in result.events if isinstance(e, ev.ToolCall)] == ["write_file"]


def test_content_null_setting_for_servers_that_refuse_it(tmp_path, openai_server):
    openai_server.refuse_null_content = True
    openai_server.add({"tool_calls": [WRITE]}, "Saved.")
    refused = run(tmp_path / "a", openai_server)
    assert_model_error(refused, openai_server, "HTTP 500")

    openai_server.replace_pending({"tool_calls": [WRITE]}, "Saved.")
    accepted = run(tmp_path / "b", openai_server, entry="    compat: {content_null: space}\n")
    assert accepted.status == "success" and accepted.text == "Saved."
    sent = [m for m in openai_server.completions[-1].messages if m["role"] == "assistant"]
    assert sent and sent[0]["content"] == " " and sent[0]["tool_calls"]


def test_tool_choice_is_sent_when_the_entry_asks(tmp_path, openai_server):
    openai_server.add("Hello.", "Hello again.")
    run(tmp_path / "a", openai_server)
    result = run(tmp_path / "b", openai_server, entry="    compat: {tool_choice: auto}\n")
    assert result.status == "success"
    plain, asked = (r.body for r in openai_server.completions[-2:])
    assert "tool_choice" not in plain and plain["tools"]
    assert asked["tool_choice"] == "auto" and asked["tools"]


def test_retries_try_again_when_nothing_was_streamed(tmp_path, openai_server):
    openai_server.add({"text": "lost", "fault": "stall_first"}, "Second try worked.")
    result = run(tmp_path, openai_server, entry="    retries: 1\n")
    assert result.status == "success" and result.text == "Second try worked."
    assert len(openai_server.completions) == 2


def test_the_cli_prints_one_line_for_a_failed_run(tmp_path, openai_server, deerflow_home):
    openai_server.add({"text": "unused", "fault": "html"})
    cfg = config(tmp_path, openai_server)
    env = {**os.environ, "FIXTURE_KEY": "sk-fixture", "DEERFLOW_HOME": str(deerflow_home),
           "PYTHONPATH": os.pathsep.join([str(REPO / "harness"), str(REPO / "extension"), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "deerflow.cli", "--config", str(cfg), "run", "Take notes"],
                          env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stdout.splitlines() if "error:" in line]
    assert len(errors) == 1, done.stdout  # the run's error, once, on one line, as the renderer shows it
    assert "model 'fixture'" in errors[0] and "no completion chunks" in errors[0]


def test_langchain_openai_s_own_chunk_limit_does_not_cut_first_token_short(tmp_path, openai_server, monkeypatch):
    """Live finding (llama-cpp-python, a 3,300-token prompt on a CPU): langchain-openai ends a stream
    that sends no chunk for ``stream_chunk_timeout`` (120 s by default) and the run was reported as
    "no first token within 600 s".  The entry's ``timeouts`` govern; that limit is off unless set."""
    monkeypatch.setenv("LANGCHAIN_OPENAI_STREAM_CHUNK_TIMEOUT_S", "1")  # its default, scaled down
    openai_server.add({"text": "Worth the wait.", "fault": "stall_first", "stall": 3})
    result = run(tmp_path, openai_server, deadlines=SLOW_DEADLINES)
    assert result.status == "success", result.error
    assert result.text == "Worth the wait."


def test_a_client_limit_that_fires_is_named_not_passed_off_as_ours(tmp_path, openai_server):
    openai_server.add({"text": "never arrives", "fault": "stall_first"})
    result = run(tmp_path, openai_server, deadlines=SLOW_DEADLINES, entry="    stream_chunk_timeout: 1\n")
    message = assert_model_error(result, openai_server, "stalled", "client library's own limit",
                                 "stream_chunk_timeout")
    assert "no first token within 60 s" not in message


def test_a_stopped_server_is_named_connection_refused(tmp_path, deerflow_home):
    """Live finding: with llama-cpp-python stopped, the CLI said only "Connection error." (langchain-openai
    wraps the openai client's error, which wraps httpx's); the innermost cause is what the user needs."""
    from fixtures.openai_server import serve_openai

    with serve_openai() as server:
        stopped = server  # its address, kept: leaving the block stops it, so nothing listens there
    result = run(tmp_path, stopped)
    assert_model_error(result, stopped, "cannot reach the server", "connection refused")

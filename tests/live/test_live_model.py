"""Live: the harness against a real OpenAI-compatible server (llama.cpp, vLLM, Ollama, OpenAI).

Not part of ``make test``: ``tests/live/conftest.py`` leaves this directory out unless the command
line names it (``pytest tests/live``).  Named, it runs when one of these is set, and skips with
the reason otherwise:

* ``DEERFLOW_LIVE_LLAMA_URL``: the ``/v1`` base URL of a local server, e.g. llama-cpp-python's
  (``tests/live/start_llama_server.sh`` starts it with SmolLM2-135M-Instruct at
  ``http://127.0.0.1:8765/v1``).  ``DEERFLOW_LIVE_MODEL`` names the model (default ``local``),
  ``DEERFLOW_LIVE_COMPAT`` is a YAML flow mapping for the entry's ``compat`` block (default
  ``{tool_choice: auto, content_null: space}``), ``DEERFLOW_LIVE_DISABLE_STREAMING`` the entry's
  ``disable_streaming`` (default ``tool_calling``, what docs/real-models.md says llama-cpp-python
  needs; ``false`` streams), ``DEERFLOW_LIVE_CONTEXT`` its context window (default 8192).
* ``OPENAI_API_KEY`` (with ``OPENAI_MODEL``, default ``gpt-4.1-mini``, and ``OPENAI_BASE_URL``).

What was run live, and with which result, is recorded in docs/real-models.md.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev

pytestmark = pytest.mark.integration

LLAMA_URL = os.environ.get("DEERFLOW_LIVE_LLAMA_URL")
OPENAI_KEY = os.environ.get("OPENAI_API_KEY")
# The entry's ``disable_streaming``: every agent call binds tools, so ``tool_calling`` means no token streaming.
STREAMING_OFF = os.environ.get("DEERFLOW_LIVE_DISABLE_STREAMING", "tool_calling") if LLAMA_URL else "false"
if not (LLAMA_URL or OPENAI_KEY):
    pytest.skip("live model tests: set DEERFLOW_LIVE_LLAMA_URL (a local OpenAI-compatible /v1 URL) or "
                "OPENAI_API_KEY to run them", allow_module_level=True)


def live_config(folder: Path) -> Path:
    """A config with one model entry pointing at the live server (the key stays in the environment)."""
    if LLAMA_URL:
        compat = os.environ.get("DEERFLOW_LIVE_COMPAT", "{tool_choice: auto, content_null: space}")
        context = os.environ.get("DEERFLOW_LIVE_CONTEXT", "8192")
        entry = (f"    model: {os.environ.get('DEERFLOW_LIVE_MODEL', 'local')}\n    base_url: {LLAMA_URL}\n"
                 f"    api_key: not-needed\n    compat: {compat}\n    context_window: {context}\n"
                 f"    disable_streaming: {STREAMING_OFF}\n"
                 "    timeouts: {first_token: 600, idle: 120, total: 1800}\n")
    else:
        base = os.environ.get("OPENAI_BASE_URL")
        entry = (f"    model: {os.environ.get('OPENAI_MODEL', 'gpt-4.1-mini')}\n    api_key: $OPENAI_API_KEY\n"
                 + (f"    base_url: {base}\n" if base else ""))
    path = folder / "config.yaml"
    path.write_text("models:\n  - name: live\n    use: langchain_openai:ChatOpenAI\n" + entry)
    return path


@pytest.fixture
def config(tmp_path, deerflow_home, monkeypatch) -> Path:
    if OPENAI_KEY:  # ``deerflow_home`` removes the key from the environment; the live entry reads it from there
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    return live_config(tmp_path)


def test_a_streamed_answer(config):
    with DeerFlowClient(config_path=config) as client:
        events = list(client.stream("Say hello in five words or fewer. Do not use any tool."))
    finished = events[-1]
    assert isinstance(finished, ev.RunFinished) and finished.status == "success", finished.error
    assert finished.text.strip(), "the run succeeded with an empty answer"
    if STREAMING_OFF in {"false", "False"}:  # with tools bound, ``tool_calling`` turns streaming off for every call
        assert any(isinstance(e, ev.MessageDelta) for e in events)  # tokens arrived as they were made


def test_a_tool_call_end_to_end(config):
    prompt = ("Call the write_file tool with path /mnt/user-data/outputs/hello.txt and content hello. "
              "Then call present_files with filepaths [\"/mnt/user-data/outputs/hello.txt\"]. Then stop.")
    with DeerFlowClient(config_path=config) as client:
        result = client.chat(prompt)
        written = client.read_artifact(result.thread_id, "hello.txt") if result.artifacts else None
    assert result.status == "success", result.error
    assert [e.name for e in result.events if isinstance(e, ev.ToolCall)][:1] == ["write_file"]
    assert written is not None and b"hello" in written


def test_the_jupyter_api_through_langgraph_sdk(tmp_path, config):
    from langgraph_sdk import get_client

    from fixtures.jupyter_process import running_jupyter

    env = {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": str(config)}

    async def scenario(api: str, headers: dict[str, str]) -> list[str]:
        sdk = get_client(url=api, headers=headers)
        thread = await sdk.threads.create()
        custom = []
        async for part in sdk.runs.stream(thread["thread_id"], "lead_agent", stream_mode=["custom"],
                                          input={"messages": [{"role": "user", "content": "Say hi. No tools."}]}):
            if part.event == "custom":
                custom.append(part.data)
        return [c.get("status") for c in custom if c.get("type") == "run_finished"]

    with running_jupyter(tmp_path, env=env) as server:
        assert asyncio.run(scenario(server.api, server.headers)) == ["success"]


def test_a_deerflow_cell_in_a_notebook(tmp_path, config, deerflow_home, monkeypatch):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext deerflow_kernel"),
        nbformat.v4.new_code_cell("%%deerflow\nSay hi in three words. Do not use any tool."),
    ])
    monkeypatch.setenv("DEERFLOW_CONFIG", str(config))
    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                      for cell in nb.cells for o in cell.get("outputs", []))
    assert "RunResult success" in shown, shown[-2000:]

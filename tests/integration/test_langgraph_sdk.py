"""The official langgraph-sdk client against a real ``jupyter server`` running the extension."""

from __future__ import annotations

import asyncio

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration

CONFIG = """
models:
  - name: offline
    use: deerflow.models.scripted:ScriptedChatModel
    script: quickstart
  - name: slow
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls: [{name: wait, args: {seconds: 60}}]
        - text: unreachable
tools:
  - name: wait
    group: test
    use: fixtures.slow_tools:wait
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("sdk")
    (work / "config.yaml").write_text(CONFIG)
    env = {"DEERFLOW_HOME": str(work / "home"), "DEERFLOW_CONFIG": str(work / "config.yaml")}
    env_clean = {"OPENAI_API_KEY": ""}
    with running_jupyter(work, env={**env, **env_clean}) as proc:
        yield proc


def client(server):
    return get_client(url=server.api, headers=server.headers)


def test_sdk_thread_stream_state_history(server):
    async def scenario():
        sdk = client(server)
        assistants = await sdk.assistants.search()
        assert [a["assistant_id"] for a in assistants] == ["lead_agent"]
        thread = await sdk.threads.create(metadata={"source": "sdk-test"})
        parts = []
        async for part in sdk.runs.stream(
            thread["thread_id"], "lead_agent",
            input={"messages": [{"role": "user", "content": "Write a report"}]},
            stream_mode=["values", "messages-tuple", "updates", "custom"],
        ):
            parts.append(part)
        events = [p.event for p in parts]
        assert events[0] == "metadata"
        assert {"values", "messages", "updates", "custom"} <= set(events)
        custom_types = [p.data["type"] for p in parts if p.event == "custom"]
        assert custom_types[0] == "run_started" and custom_types[-1] == "run_finished"
        final_values = [p.data for p in parts if p.event == "values"][-1]
        assert final_values["artifacts"] == ["/mnt/user-data/outputs/report.md"]
        state = await sdk.threads.get_state(thread["thread_id"])
        assert state["values"]["title"] == "Write a report"
        history = await sdk.threads.get_history(thread["thread_id"], limit=5)
        assert len(history) == 5 and history[0]["checkpoint"] == state["checkpoint"]
        got = await sdk.threads.get(thread["thread_id"])
        assert got["metadata"]["source"] == "sdk-test" and got["status"] == "idle"
        found = await sdk.threads.search(metadata={"source": "sdk-test"})
        assert [t["thread_id"] for t in found] == [thread["thread_id"]]

    asyncio.run(scenario())


def test_sdk_create_join_get_and_wait(server):
    async def scenario():
        sdk = client(server)
        thread = await sdk.threads.create()
        run = await sdk.runs.create(thread["thread_id"], "lead_agent",
                                    input={"messages": [{"role": "user", "content": "go"}]})
        values = await sdk.runs.join(thread["thread_id"], run["run_id"])
        assert values["artifacts"] == ["/mnt/user-data/outputs/report.md"]
        fetched = await sdk.runs.get(thread["thread_id"], run["run_id"])
        assert fetched["status"] == "success"
        other = await sdk.threads.create()
        waited = await sdk.runs.wait(other["thread_id"], "lead_agent",
                                     input={"messages": [{"role": "user", "content": "go"}]})
        assert waited["title"] == "go"

    asyncio.run(scenario())


def test_sdk_cancel_a_running_run(server):
    async def scenario():
        sdk = client(server)
        thread = await sdk.threads.create()
        run = await sdk.runs.create(thread["thread_id"], "lead_agent",
                                    input={"messages": [{"role": "user", "content": "slow"}]},
                                    config={"configurable": {"model_name": "slow"}})
        for _ in range(100):
            busy = await sdk.threads.get(thread["thread_id"])
            events = await sdk.http.get(f"/threads/{thread['thread_id']}/runs/{run['run_id']}/events")
            if any(e["type"] == "tool_call" for e in events):
                break
            await asyncio.sleep(0.1)
        assert busy["status"] == "busy"
        await sdk.runs.cancel(thread["thread_id"], run["run_id"])
        fetched = await sdk.runs.get(thread["thread_id"], run["run_id"])
        assert fetched["status"] == "interrupted"
        assert fetched["metadata"]["deerflow_status"] == "cancelled"
        assert (await sdk.threads.get(thread["thread_id"]))["status"] == "idle"

    asyncio.run(scenario())


def test_sdk_errors_surface_as_http_errors(server):
    async def scenario():
        sdk = client(server)
        with pytest.raises(NotFoundError, match="unknown thread 'no-such-thread'"):
            await sdk.threads.get("no-such-thread")

    asyncio.run(scenario())



"""DeerFlow behind a real JupyterHub: the configuration docs/DEPLOYMENT.md shows, two users, one proxy.

Everything goes through the Hub's public URL (configurable-http-proxy) with Hub API tokens: the
official ``langgraph-sdk`` client, a ``%%deerflow`` cell in a kernel started through the user's
server's kernel API, and the Hub's REST API to start and stop servers.  The users share one
``DEERFLOW_HOME`` (as in the deployment), so keeping them apart is the extension's job: it takes
each server's user from the Hub.
"""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from fixtures.jupyterhub import (
    DEPLOY_CONFIG,
    PASSWORD,
    REPO,
    Hub,
    find_or_install_proxy,
    running_hub,
)
from fixtures.kernel_ws import KernelClient

pytestmark = pytest.mark.integration

CONFIG = """
models:
  - name: offline
    use: deerflow.models.scripted:ScriptedChatModel
    script: quickstart
  - name: note
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: Noted, before the restart.
        - text: Noted, after the restart.
"""
USERS = ("alice", "bob")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    proxy, why = find_or_install_proxy()
    if proxy is None:
        pytest.skip(f"JupyterHub needs configurable-http-proxy: {why}")
    work = tmp_path_factory.mktemp("hub")
    (work / "config.yaml").write_text(CONFIG)
    with running_hub(work, proxy=proxy, deerflow_config=work / "config.yaml") as running:
        for name in USERS:
            log_in(running, name)
            running.start_server(name)
        running.tokens = {name: running.user_token(name) for name in USERS}
        yield running


def log_in(hub: Hub, name: str) -> None:
    """Log in through the Hub's login form (the Dummy authenticator with the lab's shared password)."""
    with httpx.Client(base_url=hub.url, timeout=30) as browser:
        browser.get("hub/login")
        xsrf = browser.cookies.get("_xsrf")
        wrong = browser.post("hub/login", data={"username": name, "password": "nope", "_xsrf": xsrf})
        assert wrong.status_code == 403
        right = browser.post("hub/login", data={"username": name, "password": PASSWORD, "_xsrf": xsrf})
        assert right.status_code == 302, right.text[-500:]
    assert hub.api("GET", f"users/{name}").status_code == 200


def sdk(hub: Hub, name: str):
    return get_client(url=f"{hub.user_url(name)}deerflow/api",
                      headers={"Authorization": f"token {hub.tokens[name]}"})


async def run_report(client, thread_id: str | None = None, *, model: str = "offline") -> str:
    thread_id = thread_id or (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "lead_agent", config={"configurable": {"model_name": model}},
                           input={"messages": [{"role": "user", "content": "Write a report"}]})
    return thread_id


def test_the_test_runs_the_documented_config():
    doc = (REPO / "docs" / "DEPLOYMENT.md").read_text()
    assert DEPLOY_CONFIG.read_text().strip() in doc


def test_each_user_runs_through_the_hub_and_never_sees_the_other(hub):
    async def scenario():
        alice, bob = sdk(hub, "alice"), sdk(hub, "bob")
        alice_thread = await run_report(alice)
        bob_thread = (await bob.threads.create())["thread_id"]
        streamed = [part async for part in bob.runs.stream(  # SSE through configurable-http-proxy
            bob_thread, "lead_agent", input={"messages": [{"role": "user", "content": "Write a report"}]},
            stream_mode=["values", "custom"])]
        custom = [p.data["type"] for p in streamed if p.event == "custom"]
        assert custom[0] == "run_started" and custom[-1] == "run_finished"
        state = await alice.threads.get_state(alice_thread)
        assert state["values"]["artifacts"] == ["/mnt/user-data/outputs/report.md"]
        assert [t["thread_id"] for t in await alice.threads.search()] == [alice_thread]
        assert [t["thread_id"] for t in await bob.threads.search()] == [bob_thread]
        for read in (bob.threads.get(alice_thread), bob.threads.get_state(alice_thread),
                     bob.runs.list(alice_thread)):
            with pytest.raises(NotFoundError):
                await read
        return alice_thread, bob_thread

    alice_thread, bob_thread = asyncio.run(scenario())
    # the Hub's user is the owner, and the thread's files are under that user in the shared home
    assert (hub.home / "users" / "alice" / "threads" / alice_thread / "user-data" / "outputs" / "report.md").is_file()
    assert (hub.home / "users" / "bob" / "threads" / bob_thread).is_dir()
    # the artifact over plain HTTP through the proxy: 404 for bob on his server, and bob's token
    # does not open alice's server at all (the Hub's auth)
    artifact = f"deerflow/api/threads/{alice_thread}/artifacts/report.md"
    mine = httpx.get(hub.user_url("alice") + artifact, headers={"Authorization": f"token {hub.tokens['alice']}"})
    assert mine.status_code == 200 and mine.content
    theirs = httpx.get(hub.user_url("bob") + artifact, headers={"Authorization": f"token {hub.tokens['bob']}"})
    assert theirs.status_code == 404
    other_server = httpx.get(hub.user_url("alice") + "deerflow/api/threads/" + alice_thread,
                             headers={"Authorization": f"token {hub.tokens['bob']}"})
    assert other_server.status_code == 403


def test_deerflow_cell_in_a_kernel_started_through_the_hub(hub):
    kernel = KernelClient(hub.user_url("alice"), hub.tokens["alice"])
    try:
        assert kernel.execute("%load_ext deerflow_kernel").status == "ok"
        cell = kernel.execute("%%deerflow --new\nWrite a report")
        assert cell.status == "ok", cell.error
        shown = kernel.execute("print(_.status, _.thread_id, _.artifacts, sep='|')")
        assert shown.status == "ok", shown.error
    finally:
        kernel.close()
    status, thread_id, artifacts = shown.stdout.strip().split("|")
    assert status == "success" and "report.md" in artifacts

    async def owners():
        alice_threads = [t["thread_id"] for t in await sdk(hub, "alice").threads.search()]
        with pytest.raises(NotFoundError):
            await sdk(hub, "bob").threads.get(thread_id)
        return alice_threads

    assert thread_id in asyncio.run(owners())  # the cell ran in alice's server, as alice


def test_a_thread_survives_its_server_being_stopped_and_started_by_the_hub(hub):
    async def first_run():
        client = sdk(hub, "alice")
        thread_id = await run_report(client, model="note")
        return thread_id, (await client.threads.get_state(thread_id))["values"]["messages"]

    thread_id, before = asyncio.run(first_run())
    hub.stop_server("alice")
    gone = httpx.get(f"{hub.user_url('alice')}deerflow/api/threads/{thread_id}",
                     headers={"Authorization": f"token {hub.tokens['alice']}"})
    assert gone.status_code != 200  # the Hub answers for a stopped server
    hub.start_server("alice")

    async def after_restart():
        client = sdk(hub, "alice")
        state = await client.threads.get_state(thread_id)
        assert [m["content"] for m in state["values"]["messages"]] == [m["content"] for m in before]
        await run_report(client, thread_id, model="note")  # and the thread goes on
        return (await client.threads.get_state(thread_id))["values"]["messages"]

    after = asyncio.run(after_restart())
    assert [m["content"] for m in after[-2:]] == ["Write a report", "Noted, after the restart."]


def test_the_hub_runs_the_batch_worker_service(hub):
    service = hub.api("GET", "services/deerflow-batches")
    assert service.status_code == 200, service.text
    pid = service.json().get("pid")
    assert pid, service.json()
    os.kill(pid, 0)  # alive now
    # and it has been up all along on the shared home and config (the Hub restarts a worker that exits)
    assert "Service deerflow-batches exited" not in hub.log.read_text(errors="replace")

"""DeerFlow behind a real JupyterHub: the configuration docs/DEPLOYMENT.md shows, two users, one proxy.

Everything goes through the Hub's public URL (configurable-http-proxy) with Hub API tokens: the
official ``langgraph-sdk`` client, a ``%%deerflow`` cell in a kernel started through the user's
server's kernel API, and the Hub's REST API to start and stop servers.  The users share one
``DEERFLOW_HOME`` and one PostgreSQL database (``storage.url``, a throwaway cluster from
``tests/fixtures/postgres.py``), with the thread folders on a "shared volume"
(``storage.thread_files_root``), as in the deployment; keeping them apart is the extension's job:
it takes each server's user from the Hub.  A plain ``jupyter server`` on another port with its
own home and only that config (another machine) then reads what a user made through the Hub.

PostgreSQL only: it is the storage the deployment documents for a Hub (SQLite files cannot be
shared between machines), the stores keep users apart the same way on both backends
(``test_storage_stores.py`` runs each case on both), and per-user isolation on SQLite is covered
by the in-process two-user servers (``test_server_users.py``); a second Hub on SQLite would double
this module's time in ``make test`` for no behaviour of its own.  Without PostgreSQL's server
binaries (or configurable-http-proxy) the module skips, saying why.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from fixtures.jupyter_process import running_jupyter
from fixtures.jupyterhub import (
    DEPLOY_CONFIG,
    PASSWORD,
    REPO,
    Hub,
    find_or_install_proxy,
    running_hub,
)
from fixtures.kernel_ws import KernelClient
from fixtures.postgres import PostgresCluster

pytestmark = pytest.mark.integration

CONFIG = """
storage:
  url: "{url}"
  thread_files_root: "{files}"
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
def hub(tmp_path_factory, postgres_cluster: PostgresCluster):
    """The Hub, both users logged in with servers running, on one PostgreSQL and one thread-files volume."""
    proxy, why = find_or_install_proxy()
    if proxy is None:
        pytest.skip(f"JupyterHub needs configurable-http-proxy: {why}")
    work = tmp_path_factory.mktemp("hub")
    files = work / "shared-volume" / "deerflow-users"
    url = postgres_cluster.create_database()
    (work / "config.yaml").write_text(CONFIG.format(url=url, files=files))
    with running_hub(work, proxy=proxy, deerflow_config=work / "config.yaml") as running:
        for name in USERS:
            log_in(running, name)
        with ThreadPoolExecutor(len(USERS)) as pool:  # both servers start at once, as on a real Hub
            list(pool.map(running.start_server, USERS))
        running.tokens = {name: running.user_token(name) for name in USERS}
        running.storage_url, running.files, running.config = url, files, work / "config.yaml"
        yield running


def token_header(hub: Hub, name: str) -> dict[str, str]:
    return {"Authorization": f"token {hub.tokens[name]}"}


def owners(hub: Hub, *thread_ids: str) -> dict[str, str]:
    """Each thread's owner as the shared database has it (read directly, as an operator would)."""
    import psycopg

    with psycopg.connect(hub.storage_url) as conn:
        rows = conn.execute("SELECT thread_id, user_id FROM threads WHERE thread_id = ANY(%s)", (list(thread_ids),))
        return dict(rows.fetchall())


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
        (alice_run,) = await alice.runs.list(alice_thread)
        for read in (bob.threads.get(alice_thread), bob.threads.get_state(alice_thread),
                     bob.runs.list(alice_thread), bob.runs.get(alice_thread, alice_run["run_id"])):
            with pytest.raises(NotFoundError):
                await read
        return alice_thread, bob_thread

    alice_thread, bob_thread = asyncio.run(scenario())
    # the Hub's user is the owner, and the thread's files are under that user on the shared volume
    assert (hub.files / "alice" / "threads" / alice_thread / "user-data" / "outputs" / "report.md").is_file()
    assert (hub.files / "bob" / "threads" / bob_thread).is_dir()
    # the records are in the one PostgreSQL, each thread owned by its Hub user; no SQLite store in the home
    assert owners(hub, alice_thread, bob_thread) == {alice_thread: "alice", bob_thread: "bob"}
    assert not [n for n in ("deerflow.db", "checkpoints.db", "memory.db", "mcp-tasks.db") if (hub.home / n).exists()]
    # the artifact over plain HTTP through the proxy: 404 for bob on his server, and bob's token
    # does not open alice's server at all (the Hub's auth)
    artifact = f"deerflow/api/threads/{alice_thread}/artifacts/report.md"
    mine = httpx.get(hub.user_url("alice") + artifact, headers=token_header(hub, "alice"))
    assert mine.status_code == 200 and mine.content
    theirs = httpx.get(hub.user_url("bob") + artifact, headers=token_header(hub, "bob"))
    assert theirs.status_code == 404
    other_server = httpx.get(hub.user_url("alice") + "deerflow/api/threads/" + alice_thread,
                             headers=token_header(hub, "bob"))
    assert other_server.status_code == 403


def test_a_users_schedules_are_a_404_for_the_other(hub):
    def api(name: str, method: str, path: str, **kwargs) -> httpx.Response:
        return httpx.request(method, f"{hub.user_url(name)}deerflow/api/{path}", headers=token_header(hub, name),
                             timeout=60, **kwargs)

    created = api("alice", "POST", "schedules", json={"cron": "0 3 1 1 *", "prompt": "Write a report"})
    assert created.status_code == 201, created.text
    schedule_id = created.json()["schedule_id"]
    assert schedule_id in [s["schedule_id"] for s in api("alice", "GET", "schedules").json()["schedules"]]
    assert schedule_id not in [s["schedule_id"] for s in api("bob", "GET", "schedules").json()["schedules"]]
    for method, path in [("GET", f"schedules/{schedule_id}"), ("GET", f"schedules/{schedule_id}/runs"),
                         ("POST", f"schedules/{schedule_id}/run"), ("DELETE", f"schedules/{schedule_id}")]:
        assert api("bob", method, path).status_code == 404, (method, path)
    assert api("alice", "GET", f"schedules/{schedule_id}").status_code == 200  # bob's DELETE changed nothing


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


def test_a_second_server_elsewhere_reads_what_a_user_made_through_the_hub(hub, tmp_path: Path):
    """Another machine: a plain ``jupyter server`` on another port, a home of its own, the Hub's
    config (so the same storage URL and thread-files root) and alice as its owner."""
    async def through_the_hub() -> tuple[str, list[str], str]:
        alice = sdk(hub, "alice")
        thread_id = await run_report(alice)
        state = await alice.threads.get_state(thread_id)
        bob_thread = (await sdk(hub, "bob").threads.create())["thread_id"]
        return thread_id, [m["content"] for m in state["values"]["messages"]], bob_thread

    thread_id, messages, bob_thread = asyncio.run(through_the_hub())
    report = (hub.files / "alice" / "threads" / thread_id / "user-data" / "outputs" / "report.md").read_bytes()
    elsewhere = tmp_path / "other-machine-home"
    env = {"DEERFLOW_HOME": str(elsewhere), "DEERFLOW_CONFIG": str(hub.config), "OPENAI_API_KEY": ""}
    with running_jupyter(tmp_path, env=env, args=["--DeerFlowExtension.owner=alice"]) as server, \
            httpx.Client(base_url=f"{server.api}/", headers=server.headers, timeout=60) as http:
        assert http.get(f"threads/{thread_id}").json()["thread_id"] == thread_id
        state = http.get(f"threads/{thread_id}/state").json()
        assert [m["content"] for m in state["values"]["messages"]] == messages
        assert [r["status"] for r in http.get(f"threads/{thread_id}/runs").json()] == ["success"]
        artifact = http.get(f"threads/{thread_id}/artifacts/report.md")
        assert artifact.status_code == 200 and artifact.content == report
        assert http.get(f"threads/{bob_thread}").status_code == 404  # still only alice's threads
        went_on = http.post(f"threads/{thread_id}/runs/wait", json={
            "assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "And a summary"}]}})
        assert went_on.status_code == 200, went_on.text  # the thread goes on over there
    assert not (elsewhere / "users").exists()  # the thread's files came from the shared root

    async def back_through_the_hub() -> tuple[list[str], str]:
        alice = sdk(hub, "alice")
        state = await alice.threads.get_state(thread_id)
        return [r["status"] for r in await alice.runs.list(thread_id)], state["values"]["messages"][-2]["content"]

    statuses, asked = asyncio.run(back_through_the_hub())
    assert statuses == ["success", "success"] and asked == "And a summary"  # alice's Hub server sees that run


def test_the_hub_runs_the_batch_worker_service(hub):
    service = hub.api("GET", "services/deerflow-batches")
    assert service.status_code == 200, service.text
    pid = service.json().get("pid")
    assert pid, service.json()
    os.kill(pid, 0)  # alive now
    # and it has been up all along on the shared home and config (the Hub restarts a worker that exits)
    assert "Service deerflow-batches exited" not in hub.log.read_text(errors="replace")

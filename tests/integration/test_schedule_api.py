"""Schedules and custom agents through the server extension: per-user, validated, run unattended."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import httpx
import pytest
import yaml
from tornado.httpclient import HTTPClientError

from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration

API = ("deerflow", "api")
ALICE = {"Authorization": "token alice-token"}
BOB = {"Authorization": "token bob-token"}
BOOT = {"turns": [{"tool_calls": [{"name": "setup_agent", "args": {
    "soul": "You are Ada, a terse analyst.", "description": "Terse analyst"}}]}, "Ada is ready."]}
DIGEST = {"turns": ["Digest: nothing new. Assumption: the last 24 hours."]}


def write_config(tmp_path: Path) -> Path:
    models = []
    for name, script in {"digest": DIGEST, "boot": BOOT}.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(script))
        models.append({"name": name, "use": "fixtures.logging_model:LoggingScriptedModel",
                       "log": str(tmp_path / f"{name}.jsonl"), "script": str(tmp_path / f"{name}.yaml")})
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"models": models}))
    return cfg


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path):
    return {
        "ServerApp": {"jpserver_extensions": {"deerflow_jupyter": True},
                      "identity_provider_class": "fixtures.jupyter_identity.TwoUsers"},
        "DeerFlowExtension": {"export_kernel_env": False, "config_path": str(write_config(tmp_path)), "home": str(deerflow_home),
                              "single_user": False, "scheduler_enabled": False},
    }


async def call(jp_fetch, *parts: str, headers: dict, method: str = "GET", body: object = None):
    response = await jp_fetch(*API, *parts, method=method, headers=headers,
                              body=json.dumps(body) if body is not None else None)
    return json.loads(response.body) if response.body else None


async def status_of(jp_fetch, *parts: str, headers: dict, method: str = "GET", body: object = None) -> int:
    with pytest.raises(HTTPClientError) as info:
        await call(jp_fetch, *parts, headers=headers, method=method, body=body)
    return info.value.code


async def test_schedules_are_per_user_and_a_trial_run_is_unattended(jp_fetch):
    created = await call(jp_fetch, "schedules", headers=ALICE, method="POST",
                         body={"cron": "0 7 * * *", "prompt": "Write the digest", "timezone": "Europe/Paris"})
    sid = created["schedule_id"]
    assert created["next_run_at"] > time.time()
    assert [s["schedule_id"] for s in (await call(jp_fetch, "schedules", headers=ALICE))["schedules"]] == [sid]
    assert (await call(jp_fetch, "schedules", headers=BOB))["schedules"] == []
    for parts, method in [(("schedules", sid), "GET"), (("schedules", sid, "runs"), "GET"),
                          (("schedules", sid, "run"), "POST"), (("schedules", sid), "DELETE")]:
        assert await status_of(jp_fetch, *parts, headers=BOB, method=method,
                               body={} if method == "POST" else None) == 404
    record = await call(jp_fetch, "schedules", sid, "run", headers=ALICE, method="POST", body={})
    assert record["status"] == "success" and record["text"].startswith("Digest: nothing new.")
    events = await call(jp_fetch, "threads", record["thread_id"], "runs", record["run_id"], "events", headers=ALICE)
    assert events[0]["interaction_mode"] == "scheduled"
    assert [r["record_id"] for r in (await call(jp_fetch, "schedules", sid, "runs", headers=ALICE))["runs"]] == [
        record["record_id"]]
    bad = {"cron": "61 * * * *", "prompt": "x"}
    assert await status_of(jp_fetch, "schedules", headers=ALICE, method="POST", body=bad) == 422
    await call(jp_fetch, "schedules", sid, headers=ALICE, method="DELETE")
    assert (await call(jp_fetch, "schedules", headers=ALICE))["schedules"] == []


async def test_agents_are_bootstrapped_by_a_run_and_owned_by_their_user(jp_fetch):
    thread = (await call(jp_fetch, "threads", headers=ALICE, method="POST", body={}))["thread_id"]
    body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "a terse analyst"}]},
            "config": {"configurable": {"agent_name": "ada", "is_bootstrap": True, "model_name": "boot"}}}
    await call(jp_fetch, "threads", thread, "runs", "wait", headers=ALICE, method="POST", body=body)
    (ada,) = (await call(jp_fetch, "agents", headers=ALICE))["agents"]
    assert ada["name"] == "ada" and ada["soul"].startswith("You are Ada")
    before = await call(jp_fetch, "agents", "ada", headers=ALICE)
    assert await status_of(jp_fetch, "agents", "ada", headers=ALICE, method="PATCH",
                           body={"tool_groups": ["no-such-group"]}) == 422
    assert await call(jp_fetch, "agents", "ada", headers=ALICE) == before  # nothing written
    changed = await call(jp_fetch, "agents", "ada", headers=ALICE, method="PATCH", body={"display_name": "Ada L."})
    assert changed["display_name"] == "Ada L." and changed["soul"] == before["soul"]
    assert (await call(jp_fetch, "agents", headers=BOB))["agents"] == []
    assert await status_of(jp_fetch, "agents", "ada", headers=BOB) == 404
    assert await status_of(jp_fetch, "agents", "ada", headers=BOB, method="DELETE") == 404
    with_agent = {**body, "config": {"configurable": {"agent_name": "ada", "model_name": "digest"}}}
    bob_thread = (await call(jp_fetch, "threads", headers=BOB, method="POST", body={}))["thread_id"]
    assert await status_of(jp_fetch, "threads", bob_thread, "runs", "wait", headers=BOB, method="POST",
                           body=with_agent) == 404


def test_the_server_runs_due_schedules_in_the_background(deerflow_home, tmp_path):
    config = write_config(tmp_path)
    args = ["--ServerApp.jpserver_extensions={'deerflow_jupyter': True}",
            f"--DeerFlowExtension.config_path={config}", f"--DeerFlowExtension.home={deerflow_home}",
            "--DeerFlowExtension.owner=owner", "--DeerFlowExtension.scheduler_interval=0.5"]
    with running_jupyter(tmp_path, args=args, timeout=120) as server:
        api = f"{server.api}/schedules"
        created = httpx.post(api, headers=server.headers, json={"cron": "*/5 * * * *", "prompt": "Write the digest"})
        assert created.status_code == 201, created.text
        sid = created.json()["schedule_id"]
        with sqlite3.connect(deerflow_home / "deerflow.db") as db:  # the slot has come
            db.execute("UPDATE schedules SET next_run_at=? WHERE schedule_id=?", (time.time() - 1, sid))
        runs: list = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (runs and runs[0]["finished_at"]):
            time.sleep(0.5)
            runs = httpx.get(f"{api}/{sid}/runs", headers=server.headers).json()["runs"]
    assert len(runs) == 1 and runs[0]["status"] == "success", runs
    assert runs[0]["claimed_by"] and runs[0]["run_id"]

"""Durable batches: a real worker process killed mid-way, restart, cancellation, export, ownership.

Items run as scripted subagents whose model waits ``latency`` seconds per answer (like a
provider) and logs every call, so the tests can tell how often each item really ran.  Every test
runs over SQLite and over a real PostgreSQL (``batch_db``; skipped when PostgreSQL is missing).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.errors import NotFoundError
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import HostServices
from deerflow.subagents.batches.sql import open_backend
from deerflow.subagents.batches.store import BatchStore
from deerflow.subagents.batches.submitter import BatchSubmitter, item_runner, open_store
from deerflow.subagents.batches.worker import BatchWorker
from deerflow.subagents.controller import SubagentController
from deerflow.subagents.runtime import SubagentRuntime
from fixtures.batch_databases import BatchDatabase, batch_db_fixture  # noqa: F401  (registers the fixture)
from fixtures.logging_model import read_log

TESTS = Path(__file__).resolve().parents[1]
OUT = "/mnt/user-data/outputs"


def write_config(tmp_path: Path, db: BatchDatabase, *, latency: float) -> tuple[Path, Path]:
    log = tmp_path / "calls.jsonl"
    script = f"""
        turns: ["lead"]
        conversations:
          - match: WRITE
            turns:
              - tool_calls: [{{name: write_file, args: {{path: {OUT}/ok.md, content: "ok"}}}}]
              - "Wrote it [r1]."
          - match: ITEM
            turns: ["Done [r1]."]
    """
    config = tmp_path / "config.yaml"
    config.write_text(
        "models:\n  - name: scripted\n    use: fixtures.logging_model:LoggingScriptedModel\n"
        f"    log: {log}\n    latency: {latency}\n    script: |\n"
        f"{textwrap.indent(textwrap.dedent(script).strip(), ' ' * 6)}\n"
        "subagents:\n  enabled: true\n  poll_interval: 0.1\n  batches:\n    enabled: true\n" + db.config_yaml())
    return config, log


def submit(home: Path, config: Path, items: list[dict[str, Any]], *, user: str = "alice") -> tuple[BatchSubmitter, str]:
    loaded = load_config(config)
    paths = HomePaths(home)
    submitter = BatchSubmitter(BatchStore(open_backend(loaded.config.subagents.batches, paths)), max_items=100)
    context = RunContext(user_id=user, thread_id="t1", run_id="run-1", paths=paths.thread(user, "t1"),
                         config=loaded.config, model_name="scripted")
    status = submitter.submit(context, items, label="test batch", known_types=["general-purpose"])
    return submitter, status.record.batch_id


def runs_per_item(log: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in read_log(log):
        first = next(m["text"] for m in call["messages"] if m["type"] == "human")
        key = first.split()[0]
        counts[key] = counts.get(key, 0) + 1
    return counts


def worker_process(config: Path, home: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen(
        [sys.executable, "-m", "deerflow.subagents.batches.worker_main", "--config", str(config), "--home",
         str(home), "--concurrency", "2", "--lease", "1", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(predicate: Any, *, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.05)


def test_a_killed_worker_resumes_on_restart_and_every_item_ends_exactly_once(batch_db, deerflow_home, tmp_path):
    config, log = write_config(tmp_path, batch_db, latency=0.3)
    items = [{"prompt": f"ITEM-{n:02d} do it", "subagent_type": "general-purpose"} for n in range(20)]
    _, batch_id = submit(deerflow_home, config, items)
    first = worker_process(config, deerflow_home)
    try:
        wait_for(lambda: sum(r["status"] == "completed" for r in batch_db.item_rows(deerflow_home).values()) >= 5)
    finally:
        first.kill()  # SIGKILL: no cleanup, leases left behind
        first.wait(timeout=30)
    at_kill = batch_db.item_rows(deerflow_home)
    done_before = {i for i, r in at_kill.items() if r["status"] == "completed"}
    running_at_kill = {i for i, r in at_kill.items() if r["status"] == "running"}
    assert 5 <= len(done_before) < 20

    second = worker_process(config, deerflow_home, "--until-idle")
    output, _ = second.communicate(timeout=180)
    assert second.returncode == 0, output
    after = batch_db.item_rows(deerflow_home)
    assert {r["status"] for r in after.values()} == {"completed"}
    for index in done_before:  # a finished item is never run again
        assert after[index]["attempts"] == 1 and after[index]["finished_at"] == at_kill[index]["finished_at"]
    assert all(after[i]["attempts"] == 2 for i in running_at_kill)
    runs = runs_per_item(log)
    assert all(runs[f"ITEM-{i:02d}"] == 1 for i in done_before)
    assert set(runs) == {f"ITEM-{n:02d}" for n in range(20)}
    assert all(r["lease_owner"] is None for r in after.values()) and batch_id



def test_two_worker_processes_share_the_queue_and_run_every_item_once(batch_db, deerflow_home, tmp_path):
    config, log = write_config(tmp_path, batch_db, latency=0.5)
    items = [{"prompt": f"ITEM-{n:02d} do it", "subagent_type": "general-purpose"} for n in range(16)]
    submit(deerflow_home, config, items)
    # a long lease: only the atomic claim keeps the two processes apart, never an expiry
    workers = [worker_process(config, deerflow_home, "--lease", "60", "--until-idle") for _ in range(2)]
    outputs = [w.communicate(timeout=180)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    finished = [int(m.group(1)) for out in outputs if (m := re.search(r"worker done: (\d+) items finished", out))]
    assert sum(finished) == 16 and len(finished) == 2 and min(finished) > 0, outputs  # both claimed, none twice
    after = batch_db.item_rows(deerflow_home)
    assert {(r["status"], r["attempts"]) for r in after.values()} == {("completed", 1)}
    assert runs_per_item(log) == {f"ITEM-{n:02d}": 1 for n in range(16)}

async def _worker(config: Path, home: Path, stack: AsyncExitStack, *, concurrency: int = 2) -> BatchWorker:
    loaded = load_config(config)
    controller = SubagentController()
    stack.push_async_callback(controller.aclose)
    paths = HomePaths(home)
    store = await open_store(loaded.config.subagents.batches, paths)
    runner = item_runner(SubagentRuntime(controller), loaded.config, paths, HostServices())
    worker = BatchWorker(store, runner, concurrency=concurrency, lease_seconds=30, poll_interval=0.1)
    worker.start()
    stack.push_async_callback(worker.stop)
    return worker


async def test_cancelling_a_batch_is_durable_and_starts_no_new_item(batch_db, deerflow_home, tmp_path):
    config, log = write_config(tmp_path, batch_db, latency=0.2)
    items = [{"prompt": f"ITEM-{n:02d}", "subagent_type": "general-purpose"} for n in range(12)]
    submitter, batch_id = await asyncio.to_thread(submit, deerflow_home, config, items)
    async with AsyncExitStack() as stack:
        await _worker(config, deerflow_home, stack)
        await asyncio.to_thread(wait_for, lambda: submitter.status(batch_id, "alice").counts.execution["completed"] >= 2)
        await asyncio.to_thread(submitter.cancel, batch_id, "alice")
        at_cancel = batch_db.item_rows(deerflow_home)
        await asyncio.to_thread(wait_for, lambda: not submitter.status(batch_id, "alice").counts.execution["running"])
        await asyncio.sleep(0.5)  # give a wrongly-started item every chance to appear
        final = batch_db.item_rows(deerflow_home)
    never_started = {i for i, r in at_cancel.items() if r["attempts"] == 0}
    assert never_started and all(final[i]["status"] == "cancelled" and final[i]["attempts"] == 0
                                 for i in never_started)
    assert {r["status"] for r in final.values()} <= {"completed", "cancelled"}
    started = {f"ITEM-{i:02d}" for i, r in at_cancel.items() if r["attempts"]}
    assert set(runs_per_item(log)) <= started  # the model only ever saw items started before the cancel
    settings = load_config(config).config.subagents.batches
    reopened = await asyncio.to_thread(lambda: BatchSubmitter(BatchStore(open_backend(settings, HomePaths(deerflow_home))),
                                                              max_items=10))
    assert (await asyncio.to_thread(reopened.status, batch_id, "alice")).record.cancel_requested  # durable: another process sees it


async def test_export_matches_the_database_and_verdicts_stay_apart_from_execution(batch_db, deerflow_home, tmp_path):
    config, log = write_config(tmp_path, batch_db, latency=0.0)
    items = [
        {"prompt": "WRITE the file", "subagent_type": "general-purpose",
         "acceptance_criteria": [f"file:{OUT}/ok.md non-empty"]},
        {"prompt": "ITEM-claims", "subagent_type": "general-purpose",
         "acceptance_criteria": [f"file:{OUT}/missing.md exists"]},
        {"prompt": "ITEM-free", "subagent_type": "general-purpose", "acceptance_criteria": ["It is elegant"]},
        {"prompt": "ITEM-plain", "subagent_type": "general-purpose"},
    ]
    submitter, batch_id = await asyncio.to_thread(submit, deerflow_home, config, items)
    async with AsyncExitStack() as stack:
        await _worker(config, deerflow_home, stack)
        await asyncio.to_thread(wait_for, lambda: submitter.status(batch_id, "alice").done)
    exported = [json.loads(line) for line in await asyncio.to_thread(lambda: list(submitter.export_lines(batch_id, "alice")))]
    db = batch_db.item_rows(deerflow_home)
    assert [e["item_index"] for e in exported] == sorted(db)
    for entry in exported:
        row = db[entry["item_index"]]
        assert (entry["status"], entry["acceptance_verdict"], entry["attempts"]) == (
            row["status"], row["acceptance_verdict"], row["attempts"])
        assert entry["result"] == json.loads(row["result"])
    assert [e["status"] for e in exported] == ["completed"] * 4  # execution...
    assert [e["acceptance_verdict"] for e in exported] == ["MET", "UNMET", "UNVERIFIED", None]  # ...vs acceptance
    assert all(e["attempts"] == 1 for e in exported)  # unmet / unverified: never retried
    assert exported[1]["result"]["citations"]["unknown"] == ["r1"]
    counts = (await asyncio.to_thread(submitter.status, batch_id, "alice")).counts
    assert counts.execution["completed"] == 4 and counts.acceptance == {"MET": 1, "UNMET": 1, "UNVERIFIED": 1,
                                                                        "none": 1}
    assert len(runs_per_item(log)) == 4


def test_another_user_cannot_read_export_or_cancel_the_batch(batch_db, deerflow_home, tmp_path):
    config, _ = write_config(tmp_path, batch_db, latency=0.0)
    submitter, batch_id = submit(deerflow_home, config, [{"prompt": "ITEM-1", "subagent_type": "general-purpose"}])
    for action in (lambda: submitter.status(batch_id, "mallory"), lambda: list(submitter.export_lines(batch_id, "mallory")),
                   lambda: submitter.cancel(batch_id, "mallory")):
        with pytest.raises(NotFoundError):
            action()
    assert submitter.list("mallory") == []
    assert not submitter.status(batch_id, "alice").record.cancel_requested
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    cmd = [sys.executable, "-m", "deerflow.cli", "--config", str(config), "--home", str(deerflow_home)]
    theirs = subprocess.run([*cmd, "--user", "mallory", "batches", "export", batch_id], capture_output=True,
                            text=True, env=env, timeout=120)
    assert theirs.returncode == 1 and "unknown batch" in theirs.stderr and not theirs.stdout
    mine = subprocess.run([*cmd, "--user", "alice", "batches", "export", batch_id], capture_output=True, text=True,
                          env=env, timeout=120)
    assert mine.returncode == 0 and json.loads(mine.stdout)["prompt"] == "ITEM-1"

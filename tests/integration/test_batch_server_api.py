"""Batches through the Jupyter server: the lead submits, the server's worker runs, the owner exports.

The run manager hosted by the server installs the SQL batch submitter and its worker; the lead's
``batch_task`` returns at once and the items finish in the background.  Alice reads progress and
exports JSONL over the API; Bob gets a 404 for every batch route.  The server's queue is SQLite,
then a real PostgreSQL (``batch_db``).
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError

from fixtures.batch_databases import BatchDatabase, batch_db_fixture  # noqa: F401  (registers the fixture)

pytestmark = pytest.mark.integration

API = ("deerflow", "api")
ALICE = {"Authorization": "token alice-token"}
BOB = {"Authorization": "token bob-token"}
OUT = "/mnt/user-data/outputs"

SCRIPT = f"""
turns:
  - tool_calls:
      - name: batch_task
        args:
          description: two notes
          items:
            - {{prompt: "NOTE-A write it", subagent_type: general-purpose, acceptance_criteria: ["file:{OUT}/a.md exists"]}}
            - {{prompt: "NOTE-B skip it", subagent_type: general-purpose, acceptance_criteria: ["file:{OUT}/b.md exists"]}}
  - "Submitted the batch."
conversations:
  - match: NOTE-A
    turns:
      - tool_calls: [{{name: write_file, args: {{path: {OUT}/a.md, content: "a"}}}}]
      - "Wrote a.md [r1]."
  - match: NOTE-B
    turns: ["Skipped."]
"""


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path, batch_db: BatchDatabase):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("models:\n  - name: scripted\n    use: deerflow.models.scripted:ScriptedChatModel\n"
                   f"    script: |\n{textwrap.indent(SCRIPT.strip(), ' ' * 6)}\n"
                   "subagents:\n  enabled: true\n  batches:\n    enabled: true\n" + batch_db.config_yaml())
    return {
        "ServerApp": {"jpserver_extensions": {"deerflow_jupyter": True},
                      "identity_provider_class": "fixtures.jupyter_identity.TwoUsers"},
        "DeerFlowExtension": {"export_kernel_env": False, "config_path": str(cfg), "home": str(deerflow_home), "single_user": False},
    }


async def _json(jp_fetch, *parts: str, headers: dict[str, str], method: str = "GET", body: str | None = None):
    return json.loads((await jp_fetch(*API, *parts, method=method, body=body, headers=headers)).body)


async def test_the_owner_follows_and_exports_a_batch_and_nobody_else_can(jp_fetch):
    thread = await _json(jp_fetch, "threads", method="POST", body="{}", headers=ALICE)
    run = json.dumps({"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "go"}]}})
    await jp_fetch(*API, "threads", thread["thread_id"], "runs", "wait", method="POST", body=run, headers=ALICE)
    (batch,) = await _json(jp_fetch, "batches", headers=ALICE)
    batch_id = batch["batch_id"]
    for _ in range(600):
        status = await _json(jp_fetch, "batches", batch_id, headers=ALICE)
        if status["done"]:
            break
        await asyncio.sleep(0.05)
    assert status["execution"]["completed"] == 2
    assert status["acceptance"]["MET"] == 1 and status["acceptance"]["UNMET"] == 1

    export = await jp_fetch(*API, "batches", batch_id, "export", headers=ALICE)
    assert export.headers["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in export.body.decode().splitlines()]
    assert [(e["prompt"].split()[0], e["acceptance_verdict"]) for e in lines] == [("NOTE-A", "MET"), ("NOTE-B", "UNMET")]
    assert lines[0]["result"]["report"] == "Wrote a.md [r1]."

    assert await _json(jp_fetch, "batches", headers=BOB) == []
    for parts, method in [((batch_id,), "GET"), ((batch_id, "export"), "GET"), ((batch_id, "cancel"), "POST")]:
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*API, "batches", *parts, method=method, body="{}" if method == "POST" else None,
                           headers=BOB)
        assert info.value.code == 404, parts
    assert not (await _json(jp_fetch, "batches", batch_id, headers=ALICE))["cancelled"]

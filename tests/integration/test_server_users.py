"""Thread ownership between Jupyter users, and XSRF for cookie-authenticated writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError

from fixtures.jupyter_identity import two_user_server_config

pytestmark = pytest.mark.integration

API = ("deerflow", "api")
ALICE = {"Authorization": "token alice-token"}
BOB = {"Authorization": "token bob-token"}


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path):
    return two_user_server_config(tmp_path, deerflow_home)


def run_body(text: str = "Write me a report") -> str:
    return json.dumps({"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": text}]}})


async def test_another_users_thread_run_and_artifact_are_404_and_unlisted(jp_fetch):
    res = await jp_fetch(*API, "threads", method="POST", body="{}", headers=ALICE)
    thread_id = json.loads(res.body)["thread_id"]
    await jp_fetch(*API, "threads", thread_id, "runs", "wait", method="POST", body=run_body(), headers=ALICE)
    runs = json.loads((await jp_fetch(*API, "threads", thread_id, "runs", headers=ALICE)).body)
    run_id = runs[0]["run_id"]
    for parts, method, body in [
        (("threads", thread_id), "GET", None),
        (("threads", thread_id, "state"), "GET", None),
        (("threads", thread_id, "runs"), "GET", None),
        (("threads", thread_id, "runs", run_id), "GET", None),
        (("threads", thread_id, "runs", run_id, "events"), "GET", None),
        (("threads", thread_id, "runs", "wait"), "POST", run_body("hijack")),
        (("threads", thread_id, "artifacts"), "GET", None),
        (("threads", thread_id, "artifacts", "report.md"), "GET", None),
        (("threads", thread_id, "uploads"), "POST", "x"),
        (("threads", thread_id), "DELETE", None),
    ]:
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*API, *parts, method=method, body=body, headers=BOB,
                           params={"name": "x.txt"} if parts[-1] == "uploads" else None)
        assert info.value.code == 404, parts
    listed = json.loads((await jp_fetch(*API, "threads", "search", method="POST", body="{}", headers=BOB)).body)
    assert listed == []
    mine = json.loads((await jp_fetch(*API, "threads", "search", method="POST", body="{}", headers=ALICE)).body)
    assert [t["thread_id"] for t in mine] == [thread_id]
    # bob's failed attempts changed nothing
    runs_after = json.loads((await jp_fetch(*API, "threads", thread_id, "runs", headers=ALICE)).body)
    assert [r["run_id"] for r in runs_after] == [run_id]


async def test_unknown_token_is_403(jp_fetch):
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, "threads", "search", method="POST", body="{}",
                       headers={"Authorization": "token mallory"})
    assert info.value.code == 403

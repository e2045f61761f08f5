"""The usage route between Jupyter users: each sees only their own tokens; the admin view is the authorizer's call.

The daily budget of 1 token is spent by each user's first run: the next one is a 429.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jupyter_server.auth.authorizer import AllowAllAuthorizer
from jupyter_server.auth.identity import User
from tornado.httpclient import HTTPClientError

from deerflow_jupyter.handlers.usage import grants_admin
from fixtures.jupyter_identity import AliceIsUsageAdmin, two_user_server_config

pytestmark = pytest.mark.integration

API = ("deerflow", "api")
ALICE = {"Authorization": "token alice-token"}
BOB = {"Authorization": "token bob-token"}


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path):
    config = ("models:\n  - name: offline\n    use: deerflow.models.scripted:ScriptedChatModel\n"
              "    script: |\n      turns: [Noted., Noted again.]\nusage:\n  daily_token_budget: 1\n")
    return two_user_server_config(tmp_path, deerflow_home, config,
                                  authorizer_class="fixtures.jupyter_identity.AliceIsUsageAdmin")


async def get_json(jp_fetch, *parts: str, headers, **params):
    return json.loads((await jp_fetch(*API, *parts, headers=headers, params=params)).body)


async def status_of(jp_fetch, *parts: str, **kwargs) -> int:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, *parts, **kwargs)
    return info.value.code


async def run_once(jp_fetch, headers) -> str:
    res = await jp_fetch(*API, "threads", method="POST", headers=headers, body="{}")
    thread = json.loads(res.body)["thread_id"]
    await jp_fetch(*API, "threads", thread, "runs", "wait", method="POST", headers=headers,
                   body=json.dumps({"assistant_id": "lead_agent",
                                    "input": {"messages": [{"role": "user", "content": "remember this"}]}}))
    return thread


async def test_each_user_sees_only_their_own_usage_and_only_an_admin_sees_all(jp_fetch):
    alice_thread = await run_once(jp_fetch, ALICE)
    await run_once(jp_fetch, BOB)

    mine = await get_json(jp_fetch, "usage", headers=ALICE, by="thread")
    assert mine["user"] == "alice" and [r["key"] for r in mine["rows"]] == [alice_thread]
    row = mine["rows"][0]
    assert row["runs"] == 1 and row["calls"] >= 1 and row["total_tokens"] > 0
    assert row["total_tokens"] == row["input_tokens"] + row["output_tokens"]
    bobs = await get_json(jp_fetch, "usage", headers=BOB, by="thread")
    assert alice_thread not in [r["key"] for r in bobs["rows"]] and len(bobs["rows"]) == 1

    # the admin view: alice is granted it by the server's authorizer, bob is not
    everyone = await get_json(jp_fetch, "usage", headers=ALICE, by="user", all_users="true")
    assert [r["key"] for r in everyone["rows"]] == ["alice", "bob"]
    assert await status_of(jp_fetch, "usage", headers=BOB, params={"all_users": "true"}) == 403

    # bad input: one clear 400, never a 500
    assert await status_of(jp_fetch, "usage", headers=ALICE, params={"by": "run"}) == 400
    assert await status_of(jp_fetch, "usage", headers=ALICE, params={"since": "yesterday"}) == 400
    assert await status_of(jp_fetch, "usage") in {401, 403}

    # a budget of 1 token a day: alice's next run is refused with a 429 and the reason; nothing started
    with pytest.raises(HTTPClientError) as refused:
        await run_once(jp_fetch, ALICE)
    assert refused.value.code == 429
    assert "daily token budget spent: alice used" in json.loads(refused.value.response.body)["message"]
    assert (await get_json(jp_fetch, "usage", headers=ALICE, by="user"))["rows"][0]["runs"] == 1


async def test_an_authorizer_that_allows_everything_does_not_make_everyone_an_admin():
    alice = User(username="alice")
    assert not await grants_admin(AllowAllAuthorizer(), None, alice)  # jupyter_server's default: all to everyone
    assert await grants_admin(AliceIsUsageAdmin(), None, alice)
    assert not await grants_admin(AliceIsUsageAdmin(), None, User(username="bob"))

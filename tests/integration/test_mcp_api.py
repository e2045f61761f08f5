"""The MCP management API in a real jupyter_server: masked config, edits that keep secrets, reset, tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError

from deerflow.mcp.secrets import MASK
from fixtures.mcp_servers import stdio_entry, write_extensions
from fixtures.offline_server import offline_server_config

pytestmark = pytest.mark.integration

API = ("deerflow", "api", "mcp")
SECRETS = ["Bearer sk-header-secret-42", "env-secret-value-77", "oauth-client-secret-99"]


@pytest.fixture
def extensions(tmp_path: Path) -> Path:
    return write_extensions(tmp_path / "extensions_config.json", {
        "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": SECRETS[0]},
                   "oauth": {"token_url": "http://127.0.0.1:9/token", "client_id": "me",
                             "client_secret": SECRETS[2]}, "description": "a remote server"},
        "local": stdio_entry(env={"SERVICE_TOKEN": SECRETS[1], "REGION": "$DEERFLOW_TEST_REGION"}),
    }, skills={"enabled": ["keep-me"]})


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path, extensions: Path):
    return offline_server_config(deerflow_home, tmp_path)


async def call(jp_fetch, *parts: str, method: str = "GET", body: object = None, **kw):
    response = await jp_fetch(*API, *parts, method=method, body=None if body is None else json.dumps(body), **kw)
    return json.loads(response.body)


async def test_config_is_masked_and_an_edit_echoing_the_mask_keeps_the_secrets(jp_fetch, extensions: Path):
    shown = await call(jp_fetch, "config")
    remote, local = shown["mcpServers"]["remote"], shown["mcpServers"]["local"]
    assert remote["headers"]["Authorization"] == MASK and remote["oauth"]["client_secret"] == MASK
    assert local["env"] == {"SERVICE_TOKEN": MASK, "REGION": "$DEERFLOW_TEST_REGION"}  # a reference is no secret
    assert not any(secret in json.dumps(shown) for secret in SECRETS)

    remote["description"] = "renamed"
    updated = await call(jp_fetch, "config", method="PUT", body={"mcpServers": shown["mcpServers"]})
    assert updated["mcpServers"]["remote"]["description"] == "renamed"
    assert not any(secret in json.dumps(updated) for secret in SECRETS)
    stored = json.loads(extensions.read_text())
    assert stored["mcpServers"]["remote"]["headers"]["Authorization"] == SECRETS[0]
    assert stored["mcpServers"]["remote"]["oauth"]["client_secret"] == SECRETS[2]
    assert stored["mcpServers"]["local"]["env"]["SERVICE_TOKEN"] == SECRETS[1]
    assert stored["skills"] == {"enabled": ["keep-me"]}  # other sections are left alone


async def test_invalid_edits_are_refused_with_the_key_and_nothing_is_written(jp_fetch, extensions: Path):
    before = extensions.read_text()
    with pytest.raises(HTTPClientError) as bad:
        await call(jp_fetch, "config", method="PUT", body={"mcpServers": {"broken": {"type": "stdio"}}})
    with pytest.raises(HTTPClientError) as masked:
        await call(jp_fetch, "config", method="PUT",
                   body={"mcpServers": {"fresh": stdio_entry(env={"NEW_TOKEN": MASK})}})
    assert bad.value.code == 422 and "mcpServers.broken" in bad.value.response.body.decode()
    assert masked.value.code == 422 and "mcpServers.fresh.env.NEW_TOKEN" in masked.value.response.body.decode()
    assert extensions.read_text() == before


async def test_tools_servers_and_reset(jp_fetch, extensions: Path):
    write_extensions(extensions, {"test": stdio_entry(include_tools=["echo"])})
    before = await call(jp_fetch, "servers")
    listed = await call(jp_fetch, "tools")
    reset = await call(jp_fetch, "reset", method="POST", body={})
    after = await call(jp_fetch, "servers")
    assert [(s["name"], s["status"]) for s in before["servers"]] == [("test", "not_started")]
    assert [t["name"] for t in listed["tools"]] == ["test_echo"]
    assert reset == {"reset": True}
    assert [s["status"] for s in after["servers"]] == ["not_started"]


async def test_mcp_routes_require_authentication(jp_fetch):
    for parts, method, body in [(("config",), "GET", None), (("config",), "PUT", "{}"), (("reset",), "POST", "{}")]:
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*API, *parts, method=method, body=body, headers={"Authorization": ""})
        assert info.value.code == 403


MALFORMED = [
    ("{not json", "malformed JSON"),
    ("[]", "the top level must be a JSON object"),
    ('{"mcpServers": ["remote"], "skills": {}}', "'mcpServers' must be an object of server entries"),
]


async def status_and_detail(jp_fetch, *parts: str, **kw) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, *parts, **kw)
    assert info.value.response is not None
    return info.value.code, json.loads(info.value.response.body)["detail"]


@pytest.mark.parametrize(("text", "reason"), MALFORMED)
async def test_a_malformed_extensions_file_is_named_never_an_empty_config(jp_fetch, extensions: Path, text, reason):
    extensions.write_text(text)
    for parts in (("servers",), ("tools",), ("config",)):
        status, detail = await status_and_detail(jp_fetch, *parts)
        assert status == 500 and reason in detail and str(extensions) in detail, (parts, detail)
        assert "\n" not in detail
    assert extensions.read_text() == text  # nothing was rewritten
    if "mcpServers" in text:  # the skills section is fine: skills are listed
        assert (await jp_fetch("deerflow", "api", "skills")).code == 200
    else:
        with pytest.raises(HTTPClientError) as skills:
            await jp_fetch("deerflow", "api", "skills")
        assert skills.value.code == 500 and str(extensions) in json.loads(skills.value.response.body)["detail"]
        thread = json.loads((await jp_fetch("deerflow", "api", "threads", method="POST", body="{}")).body)
        with pytest.raises(HTTPClientError) as ran:  # a run reads the skills section too: refused before it starts
            await jp_fetch("deerflow", "api", "threads", thread["thread_id"], "runs", "wait", method="POST",
                           body=json.dumps({"assistant_id": "lead_agent", "input": {"messages": [
                               {"role": "user", "content": "hi"}]}}))
        assert ran.value.code == 500 and str(extensions) in json.loads(ran.value.response.body)["detail"]


async def test_an_edit_is_refused_over_a_file_that_is_not_json_and_leaves_it_as_it_was(jp_fetch, extensions: Path):
    extensions.write_text("{not json")
    status, detail = await status_and_detail(jp_fetch, "config", method="PUT",
                                             body=json.dumps({"mcpServers": {"local": stdio_entry()}}))
    assert status == 422 and "malformed JSON" in detail and str(extensions) in detail
    assert extensions.read_text() == "{not json"

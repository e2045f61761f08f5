"""MCP credentials against a real server: OAuth token flows, per-user tokens that fail closed, secrets kept out.

The test server's ``/token`` endpoint is a real OAuth token endpoint and its
``/mcp`` endpoint refuses any request without a live bearer token.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from deerflow import AsyncDeerFlowClient, DeerFlowClient
from deerflow.runs.manager import RunRequest
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log
from fixtures.mcp_servers import (
    call,
    mcp_http_server,
    scripted_config,
    stdio_entry,
    tokens_issued,
    url_entry,
    write_extensions,
)

pytestmark = pytest.mark.integration

WHOAMI_TWICE = [{"tool_calls": [call("test_whoami")]}, "first", {"tool_calls": [call("test_whoami")]}, "second"]


def results(events) -> list[ev.ToolResult]:
    """Tool results in the order the model called the tools (parallel calls finish in any order)."""
    return sorted((e for e in events if isinstance(e, ev.ToolResult)), key=lambda e: e.call_id)


def oauth(base: str, **extra) -> dict:
    return {"token_url": f"{base}/token", "client_id": "test-client", "client_secret": "test-secret-4711",
            "refresh_skew_seconds": 0, **extra}


def test_client_credentials_token_is_fetched_cached_and_refreshed_after_expiry(deerflow_home: Path, tmp_path: Path):
    config, _ = scripted_config(tmp_path, WHOAMI_TWICE)
    with mcp_http_server("http", "--auth", "--token-ttl", "2") as base:
        write_extensions(tmp_path / "extensions_config.json", {"test": url_entry("http", base, oauth=oauth(base))})
        with DeerFlowClient(config_path=config) as client:
            first = client.chat("who am I?")
            issued_by_first_run = tokens_issued(base)
            time.sleep(2.5)  # the token the session holds has expired now
            second = client.chat("and now?", first.thread_id)
        issued = tokens_issued(base)

    assert [r.text for r in results(first.events)] == ["service:test-client"]
    assert [(r.status, r.text) for r in results(second.events)] == [("success", "service:test-client")]
    assert issued_by_first_run >= 1 and issued > issued_by_first_run  # refreshed, not re-used after expiry


def test_a_401_forces_a_refresh_when_the_token_dies_early(deerflow_home: Path, tmp_path: Path):
    config, _ = scripted_config(tmp_path, WHOAMI_TWICE)
    with mcp_http_server("http", "--auth", "--token-ttl", "1", "--reported-ttl", "3600") as base:
        write_extensions(tmp_path / "extensions_config.json", {"test": url_entry("http", base, oauth=oauth(base))})
        with DeerFlowClient(config_path=config) as client:
            first = client.chat("who am I?")
            time.sleep(1.5)  # the server dropped the token although it promised an hour
            second = client.chat("and now?", first.thread_id)
        issued = tokens_issued(base)

    assert [r.status for r in results(first.events) + results(second.events)] == ["success", "success"]
    assert issued >= 2


def test_refresh_token_grant_uses_the_users_own_refresh_token(deerflow_home: Path, tmp_path: Path):
    config, _ = scripted_config(tmp_path, WHOAMI_TWICE)
    with mcp_http_server("http", "--auth") as base:
        entry = url_entry("http", base, credentials={"scope": "user"},
                          oauth=oauth(base, grant_type="refresh_token", client_secret=None))
        write_extensions(tmp_path / "extensions_config.json", {"test": entry})
        with DeerFlowClient(config_path=config, user_id="alice") as client:
            client.set_mcp_credential("test", refresh_token="good-refresh-alice")
            result = client.chat("who am I?")

    assert [r.text for r in results(result.events)] == ["refreshed:alice"]


async def test_a_user_without_their_own_credential_fails_closed(deerflow_home: Path, tmp_path: Path):
    config, _ = scripted_config(tmp_path, [{"tool_calls": [call("test_whoami")]}, "done"])
    with mcp_http_server("http", "--user-token", "alice=tok-alice-123456", "--user-token", "shared=tok-shared-999") as base:
        # The server's own header is a valid identity too: it must never stand in for a user.
        entry = url_entry("http", base, credentials={"scope": "user"},
                          headers={"Authorization": "Bearer tok-shared-999"})
        write_extensions(tmp_path / "extensions_config.json", {"test": entry})
        async with AsyncDeerFlowClient(config_path=config, user_id="alice") as alice:
            await alice.set_mcp_credential("test", token="tok-alice-123456")
            mine = await alice.chat("who am I?")
            manager = await alice.manager()
            live = await manager.start(RunRequest("who am I?", user_id="bob", trusted=True))
            bob_events = [e async for e in live.stream()]

    assert [r.text for r in results(mine.events)] == ["user:alice"]
    (refused,) = results(bob_events)
    assert refused.status == "error" and refused.code == "mcp_credential_missing"
    assert "needs your own credential" in refused.text and "shared" not in refused.text
    assert any(e.kind == "mcp_credential_missing" for e in bob_events if isinstance(e, ev.Notice))


def test_header_values_with_line_breaks_are_refused_before_use(deerflow_home: Path, tmp_path: Path):
    config, _ = scripted_config(tmp_path, ["nothing to do"])
    write_extensions(tmp_path / "extensions_config.json", {
        "test": {"type": "http", "url": "http://127.0.0.1:9/mcp", "credentials": {"scope": "user"}}})
    with DeerFlowClient(config_path=config, user_id="alice") as client:
        with pytest.raises(ValueError, match="line break") as info:
            client.set_mcp_credential("test", headers={"X-Api-Key": "abc\r\nX-Injected: yes"})
        assert "abc" not in str(info.value)  # the value itself is never echoed


def test_secrets_never_reach_events_the_model_or_logs(deerflow_home: Path, tmp_path: Path, caplog):
    secrets = ["sk-env-secret-123456", "test-secret-4711"]
    config, log = scripted_config(tmp_path, [
        {"tool_calls": [call("local_env_value", name="SERVICE_API_TOKEN"), call("remote_whoami")]}, "done"])
    caplog.set_level(logging.DEBUG)
    with mcp_http_server("http", "--auth") as base:
        write_extensions(tmp_path / "extensions_config.json", {
            "local": stdio_entry(env={"SERVICE_API_TOKEN": secrets[0]}),
            "remote": url_entry("http", base, oauth=oauth(base)),
            "down": url_entry("http", "http://127.0.0.1:9", headers={"Authorization": f"Bearer {secrets[0]}"},
                              session_init_timeout=5),
        })
        with DeerFlowClient(config_path=config) as client:
            result = client.chat("show me the token")
            servers = client.mcp_servers()

    leaked, whoami = results(result.events)
    assert leaked.status == "success" and leaked.text == "SERVICE_API_TOKEN=***"  # a leaky server is redacted
    assert whoami.text == "service:test-client"
    assert any(n.data.get("server") == "down" for n in result.notices)
    visible = "\n".join([*(e.model_dump_json() for e in result.events), str(servers),
                         Path(log).read_text(), caplog.text])
    for secret in secrets:
        assert secret not in visible
    assert read_log(log)  # the model was called and saw none of it

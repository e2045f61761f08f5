"""Deferred MCP schemas: names only, ``tool_search`` promotes, unpromoted calls refused, hints auto-promote."""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log
from fixtures.mcp_servers import call, scripted_config, stdio_entry, write_extensions

pytestmark = pytest.mark.integration

ROUTING = {"keywords": ["sum"], "auto_promote": ["add"], "hint": "arithmetic on numbers"}


def results(result) -> list[ev.ToolResult]:
    return [e for e in result.events if isinstance(e, ev.ToolResult)]


def setup(tmp_path: Path, turns: list, include: list[str]) -> tuple[Path, Path, Path]:
    config, log = scripted_config(tmp_path, turns, extra={"tool_search": {"enabled": True}})
    extensions = write_extensions(tmp_path / "extensions_config.json", {
        "test": stdio_entry(include_tools=include, description="a test server", routing=ROUTING)})
    return config, log, extensions


def test_deferred_tools_are_promoted_by_tool_search_and_refused_before(deerflow_home: Path, tmp_path: Path):
    config, log, extensions = setup(tmp_path, [
        {"tool_calls": [call("test_echo", text="too early")]},
        {"tool_calls": [call("tool_search", query="select:test_echo")]},
        {"tool_calls": [call("test_echo", text="now")]},
        "first run done",
        {"tool_calls": [call("test_echo", text="after the catalog changed")]},
        "second run done",
    ], include=["echo", "add"])
    with DeerFlowClient(config_path=config) as client:
        first = client.chat("Say hi")
        promoted = client.thread(first.thread_id).values["promoted"]
        write_extensions(extensions, {"test": stdio_entry(include_tools=["echo", "add", "pid"], routing=ROUTING)})
        second = client.chat("Say hi again", first.thread_id)

    early, search, now = results(first)
    assert early.status == "error" and early.code == "not_promoted" and 'select:test_echo' in early.text
    assert search.status == "success" and '"text"' in search.text  # the schema is returned
    assert now.status == "success" and now.text == "echo: now"
    assert promoted["names"] == ["test_echo"] and promoted["catalog_hash"]

    calls = read_log(log)
    system = calls[0]["messages"][0]["text"]
    assert "<deferred_tools>" in system and "test_echo" in system and "arithmetic on numbers" in system
    assert "tool_search" in calls[0]["tools"] and not {"test_echo", "test_add"} & set(calls[0]["tools"])
    assert "test_echo" in calls[2]["tools"] and "test_add" not in calls[2]["tools"]  # promoted only

    (stale,) = results(second)  # the catalog changed: the old promotion no longer counts
    assert stale.status == "error" and stale.code == "not_promoted"
    assert "test_echo" not in calls[4]["tools"]


def test_routing_hints_auto_promote_for_a_matching_message(deerflow_home: Path, tmp_path: Path):
    config, log, _ = setup(tmp_path, [{"tool_calls": [call("test_add", a=2, b=3)]}, "five"],
                           include=["echo", "add"])
    with DeerFlowClient(config_path=config) as client:
        result = client.chat("Please sum 2 and 3")

    (added,) = results(result)
    assert added.status == "success" and '"total": 5.0' in added.text
    first_call = read_log(log)[0]["tools"]
    assert "test_add" in first_call and "test_echo" not in first_call  # a hint promotes, never forbids

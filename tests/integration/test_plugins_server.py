"""Plugins in real runs and in a real server: tools, middlewares, observers, guarded routes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tornado.httpclient import HTTPClientError

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log
from fixtures.plugin_sources import write_plugin

SCRIPT = {"turns": [{"tool_calls": [{"name": "plugin_echo", "args": {"text": "hello"}}]}, "Done."]}


def write_config(tmp_path: Path) -> Path:
    write_plugin(tmp_path / "plugins", "good")
    write_plugin(tmp_path / "plugins", "broken")
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
    data = {
        "models": [{"name": "scripted", "use": "fixtures.logging_model:LoggingScriptedModel",
                    "log": str(tmp_path / "calls.jsonl"), "script": str(tmp_path / "script.yaml")}],
        "plugins": [{"name": "good", "path": "plugins/good", "options": {"log": str(tmp_path / "plugin.log")}},
                    {"name": "broken", "path": "plugins/broken"}],
    }
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    return config


def test_plugin_tool_middleware_and_observer_take_part_in_a_run(deerflow_home, tmp_path):
    with DeerFlowClient(config_path=write_config(tmp_path)) as client:
        result = client.chat("Use the plugin")
    assert result.status == "success", result.error
    (tool,) = [e for e in result.events if isinstance(e, ev.ToolResult)]
    assert tool.status == "success" and tool.text == "plugin 1 says: hello"
    assert "plugin_echo" in read_log(tmp_path / "calls.jsonl")[0]["tools"]
    assert "broken_tool" not in read_log(tmp_path / "calls.jsonl")[0]["tools"]
    assert (tmp_path / "plugin.log").read_text() == "model call\nmodel call\n"  # middleware saw both calls
    observed = (tmp_path / "plugin.events").read_text().split()
    assert observed[0] == "run_started" and observed[-1] == "run_finished"


API = ("deerflow", "api")
ALICE = {"Authorization": "token alice-token"}


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path):
    return {
        "ServerApp": {"jpserver_extensions": {"deerflow_jupyter": True},
                      "identity_provider_class": "fixtures.jupyter_identity.TwoUsers"},
        "DeerFlowExtension": {"export_kernel_env": False, "config_path": str(write_config(tmp_path)), "home": str(deerflow_home),
                              "single_user": False, "scheduler_enabled": False},
    }


@pytest.mark.integration
async def test_plugin_routes_need_a_user_and_failures_are_reported(jp_fetch):
    status = json.loads((await jp_fetch(*API, "plugins", "good", "status", headers=ALICE)).body)
    assert status == {"plugin": "good", "user": "alice"}
    for headers in ({"Authorization": "token mallory"}, {}):
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*API, "plugins", "good", "status", headers=headers)
        assert info.value.code == 403
    reports = json.loads((await jp_fetch(*API, "plugins", headers=ALICE)).body)["plugins"]
    assert [(r["name"], r["status"]) for r in reports] == [("good", "loaded"), ("broken", "failed")]
    assert "database is unreachable" in reports[1]["error"]
    with pytest.raises(HTTPClientError) as info:  # there is no way to add or change plugins over HTTP
        await jp_fetch(*API, "plugins", method="POST", body=json.dumps({"name": "x", "path": "/tmp"}), headers=ALICE)
    assert info.value.code == 405

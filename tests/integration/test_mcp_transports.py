"""A real MCP server (the SDK's MCPServer) over stdio, SSE and streamable HTTP, through agent runs.

One scripted turn calls four tools at once: a structured result, an image,
a tool error and a slow tool that runs into ``tool_call_timeout``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log
from fixtures.mcp_servers import (
    call,
    mcp_http_server,
    scripted_config,
    stdio_entry,
    url_entry,
    write_extensions,
)

pytestmark = pytest.mark.integration

TURNS = [
    {"tool_calls": [call("test_add", a=2, b=3), call("test_image", caption="one red pixel"),
                    call("test_fail", message="the disk is full"), call("test_slow", seconds=30)]},
    "All four answered.",
]


@contextlib.contextmanager
def server_entry(kind: str):
    if kind == "stdio":
        yield stdio_entry(tool_call_timeout=1.5)
        return
    with mcp_http_server(kind) as base:
        yield url_entry(kind, base, tool_call_timeout=1.5)


@pytest.mark.parametrize("kind", ["stdio", "sse", "http"])
def test_list_call_structured_image_error_and_timeout(kind, deerflow_home: Path, tmp_path: Path):
    config, log = scripted_config(tmp_path, TURNS)
    with server_entry(kind) as entry:
        write_extensions(tmp_path / "extensions_config.json", {"test": entry})
        with DeerFlowClient(config_path=config) as client:
            result = client.chat("Use the test server")
            messages = client.thread(result.thread_id).messages
            image_bytes = client.read_artifact(result.thread_id, result.artifacts[0]) if result.artifacts else b""

    assert result.status == "success", result.error
    offered = read_log(log)[0]["tools"]
    assert {"test_add", "test_image", "test_fail", "test_slow", "test_echo"} <= set(offered)
    assert not any("markup" in name or "\n" in name for name in offered)  # unsafe names were dropped

    results = {e.name: e for e in result.events if isinstance(e, ev.ToolResult)}
    assert results["test_add"].status == "success" and '"total": 5.0' in results["test_add"].text
    stored = next(m for m in messages if isinstance(m, ToolMessage) and m.name == "test_add")
    assert stored.artifact["structured_content"] == {"a": 2.0, "b": 3.0, "total": 5.0}

    assert results["test_image"].status == "success" and "one red pixel" in results["test_image"].text
    (artifact,) = [e for e in result.events if isinstance(e, ev.Artifact)]
    assert artifact.path.startswith("/mnt/user-data/outputs/mcp/test/") and artifact.mime_type == "image/png"
    assert artifact.path in results["test_image"].text  # the model is told where the image is
    assert image_bytes.startswith(b"\x89PNG")

    assert results["test_fail"].status == "error" and "the disk is full" in results["test_fail"].text
    assert results["test_slow"].status == "error" and results["test_slow"].code == "mcp_timeout"
    assert "did not answer within 1.5s" in results["test_slow"].text

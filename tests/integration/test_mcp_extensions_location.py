"""Which ``extensions_config.json`` a running server reads: the rule of SPEC §2, applied at each read.

``$DEERFLOW_EXTENSIONS_CONFIG``, else the file beside ``config.yaml`` when it exists, else
``$DEERFLOW_HOME/extensions_config.json``.  "When it exists" is judged when the file is read, so an
operator who creates the file beside ``config.yaml`` under a running server is heard without a restart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.mcp_servers import stdio_entry, write_extensions

pytestmark = pytest.mark.integration


@pytest.fixture
def etc(tmp_path: Path) -> Path:
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "config.yaml").write_text("models:\n  - name: offline\n    use: deerflow.models.scripted:ScriptedChatModel\n"
                                        "    script: quickstart\n")
    return folder


@pytest.fixture
def jp_server_config(deerflow_home: Path, etc: Path):
    write_extensions(deerflow_home / "extensions_config.json", {"homeonly": stdio_entry()})
    return {
        "ServerApp": {"jpserver_extensions": {"deerflow_jupyter": True}},
        "DeerFlowExtension": {"export_kernel_env": False, "config_path": str(etc / "config.yaml"),
                              "home": str(deerflow_home), "owner": "owner"},
    }


async def names(jp_fetch) -> list[str]:
    response = await jp_fetch("deerflow", "api", "mcp", "servers")
    return sorted(s["name"] for s in json.loads(response.body)["servers"])


async def config(jp_fetch) -> list[str]:
    response = await jp_fetch("deerflow", "api", "mcp", "config")
    return sorted(json.loads(response.body)["mcpServers"])


async def test_a_file_created_beside_config_yaml_under_a_running_server_is_read(jp_fetch, etc: Path,
                                                                                deerflow_home: Path):
    assert await names(jp_fetch) == ["homeonly"] and await config(jp_fetch) == ["homeonly"]
    beside = write_extensions(etc / "extensions_config.json", {"beside": stdio_entry()})
    assert await names(jp_fetch) == ["beside"] and await config(jp_fetch) == ["beside"]
    await jp_fetch("deerflow", "api", "mcp", "config", method="PUT",
                   body=json.dumps({"mcpServers": {"edited": stdio_entry()}}))
    assert json.loads(beside.read_text())["mcpServers"].keys() == {"edited"}  # an edit goes there too
    assert await names(jp_fetch) == ["edited"]
    beside.unlink()  # gone again: back to the home file
    assert await names(jp_fetch) == ["homeonly"]
    assert json.loads((deerflow_home / "extensions_config.json").read_text())["mcpServers"].keys() == {"homeonly"}

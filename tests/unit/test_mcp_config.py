"""extensions_config.json ``mcpServers``: validation with file + key, $VAR, signatures, masking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deerflow.errors import ConfigError
from deerflow.mcp.config import parse_snapshot, read_signature
from deerflow.mcp.editing import masked_config, update_config
from deerflow.mcp.secrets import MASK, Redactor, mask_servers, unmask_servers


def snapshot(path: Path, servers: dict, env: dict | None = None):
    path.write_text(json.dumps({"mcpServers": servers}))
    return parse_snapshot(*read_signature(path), env=env or {})


def test_each_entry_is_validated_on_its_own_and_errors_name_file_and_key(tmp_path: Path):
    path = tmp_path / "extensions_config.json"
    found = snapshot(path, {
        "good": {"command": "run-me"},
        "nocmd": {"type": "stdio"},
        "typo": {"command": "x", "comand": "y"},
        "web": {"type": "http", "url": "ftp://example"},
        "hdr": {"type": "http", "url": "http://h/mcp", "headers": {"X-Key": "a\r\nInjected: 1"}},
        "bad name!": {"command": "x"},
        "off": {"command": "x", "enabled": False},
    })
    servers = found.servers
    assert found.enabled().keys() == {"good"}
    assert servers["nocmd"].error == f"config error in {path.resolve()} at 'mcpServers.nocmd': " \
                                     "a stdio server needs 'command'"
    assert "'mcpServers.typo.comand'" in servers["typo"].error and "unknown key" in servers["typo"].error
    assert "must be an http:// or https:// URL" in servers["web"].error
    assert "'mcpServers.hdr.headers'" in servers["hdr"].error and "line break" in servers["hdr"].error
    assert "Injected" not in servers["hdr"].error  # the value is never echoed
    assert "server names start with a letter" in servers["bad name!"].error
    assert servers["off"].config is not None and not servers["off"].enabled


def test_env_references_are_substituted_and_a_missing_one_disables_only_its_server(tmp_path: Path):
    found = snapshot(tmp_path / "e.json", {
        "a": {"type": "http", "url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "b": {"type": "http", "url": "$MCP_URL"},
        "c": {"command": "x", "env": {"KEY": "$NOT_SET"}},
    }, env={"MCP_URL": "https://example.org/mcp", "TOKEN": "t"})
    assert found.servers["a"].config.headers == {"Authorization": "Bearer ${TOKEN}"}  # only whole values
    assert found.servers["b"].config.url == "https://example.org/mcp"
    assert "environment variable $NOT_SET is not set" in found.servers["c"].error
    assert "'mcpServers.c.env.KEY'" in found.servers["c"].error


def test_signature_follows_the_resolved_path_and_the_content(tmp_path: Path):
    real = tmp_path / "real.json"
    real.write_text('{"mcpServers": {}}')
    link = tmp_path / "extensions_config.json"
    link.symlink_to(real)
    first, _ = read_signature(link)
    assert first.path == str(real.resolve())
    assert read_signature(link)[0] == first
    real.write_text('{"mcpServers": {"a": {"command": "x"}}}')
    assert read_signature(link)[0] != first
    assert read_signature(tmp_path / "absent.json")[0].digest == "absent"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "malformed JSON" in parse_snapshot(*read_signature(bad)).file_error


def test_prefix_default_custom_and_off(tmp_path: Path):
    found = snapshot(tmp_path / "e.json", {"a": {"command": "x"}, "b": {"command": "x", "tool_name_prefix": "bee"},
                                           "c": {"command": "x", "tool_name_prefix": False}})
    assert [found.servers[n].config.prefix(n) for n in "abc"] == ["a_", "bee_", ""]


def test_masking_hides_secrets_keeps_references_and_unmasking_restores_them():
    stored = {"s": {"headers": {"Authorization": "Bearer abc"}, "env": {"K": "v1", "R": "$REF"},
                    "oauth": {"token_url": "http://t", "client_secret": "cs", "client_id": "id"}}}
    masked = mask_servers(stored)
    assert masked["s"]["headers"]["Authorization"] == MASK and masked["s"]["env"] == {"K": MASK, "R": "$REF"}
    assert masked["s"]["oauth"] == {"token_url": "http://t", "client_secret": MASK, "client_id": "id"}
    assert stored["s"]["env"]["K"] == "v1"  # a copy
    assert unmask_servers(masked, stored) == stored
    with pytest.raises(ConfigError, match=r"mcpServers\.s\.env\.NEW"):
        unmask_servers({"s": {"env": {"NEW": MASK}}}, stored)


def test_update_keeps_other_sections_and_refuses_invalid_entries(tmp_path: Path):
    path = tmp_path / "extensions_config.json"
    path.write_text(json.dumps({"skills": {"x": 1}, "mcpServers": {"s": {"command": "c", "env": {"K": "secret"}}}}))
    shown = masked_config(path)
    shown["mcpServers"]["s"]["args"] = ["--flag"]
    update_config(path, shown["mcpServers"])
    assert json.loads(path.read_text()) == {"skills": {"x": 1},
                                            "mcpServers": {"s": {"command": "c", "env": {"K": "secret"},
                                                                 "args": ["--flag"]}}}
    with pytest.raises(ConfigError, match=r"mcpServers\.t\.type"):
        update_config(path, {"t": {"type": "carrier-pigeon", "command": "c"}})


def test_redactor_blanks_known_secrets_everywhere():
    redact = Redactor(["sk-123456", "ab"])  # two characters are too short to be worth blanking
    redact.add("tok-999999")
    assert redact("key sk-123456 and tok-999999, about ab") == "key *** and ***, about ab"
    assert redact.deep({"k": ["sk-123456"], "sk-123456": 1}) == {"k": ["***"], "***": 1}


def test_the_file_is_read_off_the_event_loop_by_runs_and_listings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """prepare_run and the listings read, realpath and hash the file in a worker thread; the sync
    ``catalog()`` is for sync callers and is refused on a loop's thread (DEERFLOW_LOOP_GUARD=1)."""
    import asyncio
    import threading

    from deerflow.config.paths import HomePaths
    from deerflow.mcp import manager as manager_module
    from deerflow.persistence.aio import LoopBlocked

    path = tmp_path / "extensions_config.json"
    path.write_text(json.dumps({"mcpServers": {"off": {"enabled": False, "command": "x"}}}))
    readers: list[int] = []

    def spy(p: Path):
        readers.append(threading.get_ident())
        return read_signature(p)

    monkeypatch.setattr(manager_module, "read_signature", spy)
    mcp = manager_module.McpManager(extensions_path=path, home=HomePaths(tmp_path / "home"))

    async def scenario() -> int:
        await mcp.prepare_run(user_id="u", thread_id="t")
        await mcp.check_config()
        assert [s["name"] for s in await mcp.servers()] == ["off"] and await mcp.tool_list() == []
        assert await mcp.server_config("off") is None
        with pytest.raises(LoopBlocked, match="acatalog"):
            mcp.catalog()
        await mcp.aclose()
        return threading.get_ident()

    loop_thread = asyncio.run(scenario())
    assert len(readers) == 5 and loop_thread not in readers
    assert mcp.catalog().servers["off"].status == "disabled"  # no loop here: the sync path reads in place
    assert readers[-1] == threading.get_ident()


def test_a_config_file_that_does_not_answer_refuses_in_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``acatalog`` waits for the file at most the off-loop deadline: a hung mount is DiskUnavailable
    (HTTP 503, "try again shortly"), not a run or a listing held forever; the next read works."""
    import asyncio
    import threading

    from deerflow.config.paths import HomePaths
    from deerflow.mcp import manager as manager_module
    from deerflow.persistence.offloop import OFF_LOOP, DiskUnavailable

    path = tmp_path / "extensions_config.json"
    path.write_text(json.dumps({"mcpServers": {"off": {"enabled": False, "command": "x"}}}))
    disk = threading.Event()

    def stalled(p: Path):
        disk.wait(60)
        return read_signature(p)

    monkeypatch.setattr(manager_module, "read_signature", stalled)
    monkeypatch.setattr(OFF_LOOP, "deadline", 0.2)
    mcp = manager_module.McpManager(extensions_path=path, home=HomePaths(tmp_path / "home"))

    async def scenario() -> str:
        try:
            with pytest.raises(DiskUnavailable, match=r"^reading the MCP config did not finish within 0\.2 s"):
                async with asyncio.timeout(60):  # the hang guard: the old code waits for the read
                    await mcp.acatalog()
        finally:
            disk.set()
        async with asyncio.timeout(60):
            while OFF_LOOP.stuck():
                await asyncio.sleep(0.02)
        monkeypatch.setattr(OFF_LOOP, "deadline", 60.0)
        return (await mcp.acatalog()).servers["off"].status

    assert asyncio.run(scenario()) == "disabled"

"""The ACP client against a real ACP agent subprocess (the echo agent, over stdio)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from acp.schema import AllowedOutcome, DeniedOutcome, PermissionOption

from deerflow.acp.echo_agent import ECHO_FILE, THOUGHT_PREFIX
from deerflow.acp.mcp_servers import extensions_mcp_servers, to_acp
from deerflow.acp.permissions import answer, decide
from deerflow.acp.session import AcpError, AcpInvocation, invoke
from deerflow.config.schema import AcpAgentConfig

ECHO = Path(__file__).resolve().parents[1] / "fixtures" / "acp_echo_agent.py"


def invocation(workspace: Path, *, attended: bool = True, **config) -> AcpInvocation:
    cfg = AcpAgentConfig(command=config.pop("command", sys.executable), args=config.pop("args", [str(ECHO)]),
                         **config)
    return AcpInvocation(name="echo", config=cfg, workspace=workspace, attended=attended)


async def test_only_message_text_comes_back_and_the_agent_writes_in_its_workspace(tmp_path):
    workspace = tmp_path / "acp-workspace"
    result = await invoke(invocation(workspace), "hello there")
    assert result.text == f"Echo: hello there\nI wrote {ECHO_FILE}. MCP servers received: 0."
    assert THOUGHT_PREFIX not in result.text and result.thought_chunks == 1  # the thought stayed internal
    assert result.stop_reason == "end_turn"
    assert (workspace / ECHO_FILE).read_text() == "# Echo\n\nhello there\n"
    assert [d.allowed for d in result.permissions] == [True]


@pytest.mark.parametrize(("attended", "setting", "written"), [
    (False, "auto", False),  # unattended: nobody to ask, deny
    (True, "deny", False),
    (False, "allow", True),
])
async def test_permission_requests_are_answered_by_policy(tmp_path, attended, setting, written):
    workspace = tmp_path / "ws"
    result = await invoke(invocation(workspace, attended=attended, permissions=setting), "note this")
    assert (workspace / ECHO_FILE).exists() is written
    assert ("I wrote" in result.text) is written
    assert result.permissions[0].allowed is written


async def test_missing_executable_is_an_actionable_error(tmp_path):
    with pytest.raises(AcpError) as info:
        await invoke(invocation(tmp_path, command="no-such-acp-adapter", args=[]), "hi")
    assert info.value.code == "acp_executable_missing"
    assert "acp_agents.echo.command" in info.value.message and "no-such-acp-adapter" in info.value.message
    assert "Errno" not in info.value.message


async def test_an_agent_that_is_not_acp_fails_with_its_stderr(tmp_path):
    bad = invocation(tmp_path, args=["-c", "import sys; sys.stderr.write('adapter not logged in'); sys.exit(3)"])
    with pytest.raises(AcpError) as info:
        await invoke(bad, "hi")
    assert info.value.code == "acp_agent_failed"
    assert "adapter not logged in" in info.value.message


async def test_enabled_mcp_servers_are_handed_to_the_agent(tmp_path):
    ext = tmp_path / "extensions_config.json"
    ext.write_text('{"mcpServers": {"files": {"command": "mcp-files", "args": ["--root", "/data"]},'
                   ' "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X": "1"}},'
                   ' "off": {"command": "x", "enabled": false}, "broken": {"type": "stdio"}}}')
    servers = to_acp(extensions_mcp_servers(ext)())
    assert [(s.name, type(s).__name__) for s in servers] == [("files", "McpServerStdio"), ("web", "HttpMcpServer")]
    inv = invocation(tmp_path / "ws")
    result = await invoke(AcpInvocation(inv.name, inv.config, inv.workspace, True, servers), "x")
    assert result.text.endswith("MCP servers received: 2.")


def test_permission_answers_pick_the_agents_own_options():
    options = [PermissionOption(option_id="yes", name="Yes", kind="allow_always"),
               PermissionOption(option_id="no", name="No", kind="reject_once")]
    assert answer(options, allowed=True).outcome == AllowedOutcome(outcome="selected", option_id="yes")
    assert answer(options, allowed=False).outcome == AllowedOutcome(outcome="selected", option_id="no")
    assert isinstance(answer(options[:1], allowed=False).outcome, DeniedOutcome)
    assert decide("auto", attended=True)[0] and not decide("auto", attended=False)[0]

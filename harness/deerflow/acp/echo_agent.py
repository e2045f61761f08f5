"""A tiny ACP agent for offline demos and for checking an ACP setup.

Run it as ``python -m deerflow.acp.echo_agent``; configure it like any ACP agent::

    acp_agents:
      echo:
        command: /path/to/python
        args: ["-m", "deerflow.acp.echo_agent"]

For each prompt it exercises what a client must handle: a *thought* chunk
(which clients must keep internal), a permission request before writing, a
file write through the client's ``fs/write_text_file`` into its working
directory (``echo.md``), and its answer streamed as two message chunks.  It
also says how many MCP servers it was handed.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    run_agent,
    update_agent_message_text,
    update_agent_thought_text,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    TextContentBlock,
    ToolCallUpdate,
)

ECHO_FILE = "echo.md"
THOUGHT_PREFIX = "(private reasoning) "


class EchoAgent:
    """Echoes prompts; writes ``echo.md`` when the client allows it."""

    def __init__(self) -> None:
        self._conn: Any = None
        self._sessions: dict[str, tuple[Path, int]] = {}
        self._can_write = False

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        fs = getattr(client_capabilities, "fs", None)
        self._can_write = bool(fs and fs.write_text_file)
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="deerflow-echo", version="1"))

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        self._sessions[session_id] = (Path(cwd), len(mcp_servers or []))
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        cwd, mcp_count = self._sessions[session_id]
        text = "".join(b.text for b in prompt if isinstance(b, TextContentBlock)).strip()
        await self._conn.session_update(session_id, update_agent_thought_text(THOUGHT_PREFIX + f"echoing {text!r}"))
        wrote = await self._write(session_id, cwd, text)
        note = f"I wrote {ECHO_FILE}." if wrote else f"I was not allowed to write {ECHO_FILE}."
        await self._conn.session_update(session_id, update_agent_message_text(f"Echo: {text}\n"))
        await self._conn.session_update(session_id, update_agent_message_text(
            f"{note} MCP servers received: {mcp_count}."))
        return PromptResponse(stop_reason="end_turn")

    async def _write(self, session_id: str, cwd: Path, text: str) -> bool:
        if not self._can_write:
            return False
        options = [PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                   PermissionOption(option_id="reject", name="Reject", kind="reject_once")]
        decision = await self._conn.request_permission(
            session_id, ToolCallUpdate(tool_call_id="write-echo", title=f"Write {ECHO_FILE}", kind="edit"), options)
        outcome = decision.outcome
        if not (isinstance(outcome, AllowedOutcome) and outcome.option_id == "allow"):
            return False
        await self._conn.write_text_file(session_id, str(cwd / ECHO_FILE), f"# Echo\n\n{text}\n")
        return True

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


def main() -> None:
    # the SDK's Agent protocol lists every method, but it routes only those an agent has (the rest are
    # "method not found"): this test agent has the few it needs
    asyncio.run(run_agent(EchoAgent()))  # pyright: ignore[reportArgumentType]


if __name__ == "__main__":
    main()

__all__ = ["ECHO_FILE", "THOUGHT_PREFIX", "EchoAgent", "main"]

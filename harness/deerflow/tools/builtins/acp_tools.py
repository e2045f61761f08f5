"""``invoke_acp_agent``: delegate a task to an external agent configured in ``acp_agents``.

The tool exists only when ``acp_agents`` is not empty; its description lists the
agents.  Each call starts the agent afresh in the thread's ACP workspace
(``$DEERFLOW_HOME/users/{user}/threads/{thread}/acp-workspace/``), which the
lead agent reads at ``/mnt/acp-workspace`` (read-only), and returns the agent's
message text only — thoughts stay internal.  The files the agent created or
changed are listed after its answer, as virtual paths the lead can read.

The protocol itself lives in :mod:`deerflow.acp` and needs the optional
``agent-client-protocol`` SDK (extra ``acp``); without it a call fails with the
install command instead of breaking runs that never use ACP.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from deerflow.config.schema import AcpAgentConfig, AppConfig
from deerflow.errors import ToolFailure
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import services_of
from deerflow.threadfs import SafeDir, UnsafePath
from deerflow.tools.offload import OFFLOADER

ACP_TOOL_NAME = "invoke_acp_agent"
ACP_WORKSPACE_VIRTUAL = "/mnt/acp-workspace"
SNAPSHOT_DEADLINE_S = 30.0
"""How long listing the workspace's files (a bounded walk) may take on the tool offloader: before
the agent starts, past it the tool fails and nothing is started; after, the agent's answer is
kept and only the list of files it wrote is left out."""
SNAPSHOT_MAX_ENTRIES = 2000


class InvokeAcpArgs(BaseModel):
    agent: str = Field(description="Name of the configured ACP agent.")
    prompt: str = Field(description="The complete task: the agent starts fresh and sees nothing of this thread.")


def acp_tools(app_config: AppConfig) -> list[BaseTool]:
    """``[invoke_acp_agent]`` when ACP agents are configured, else nothing."""
    if not app_config.acp_agents:
        return []
    return [invoke_acp_agent_tool(app_config.acp_agents)]


def invoke_acp_agent_tool(agents: Mapping[str, AcpAgentConfig]) -> BaseTool:
    """The tool, its description naming the configured agents."""
    listing = "\n".join(f"- {name}: {cfg.description or 'no description'}" for name, cfg in agents.items())

    async def invoke_acp_agent(agent: str, prompt: str, runtime: ToolRuntime[RunContext]) -> str:
        config = agents.get(agent)
        if config is None:
            raise ToolFailure(f"unknown ACP agent {agent!r}; configured: {', '.join(agents)}", code="bad_arguments")
        if not prompt.strip():
            raise ToolFailure("prompt is empty: give the agent its whole task", code="bad_arguments")
        return await _call(agent, config, prompt, runtime.context)

    return StructuredTool.from_function(
        coroutine=invoke_acp_agent, name=ACP_TOOL_NAME, args_schema=InvokeAcpArgs,
        description="Hand a task to an external coding agent over ACP and get its answer. It works in "
                    f"its own folder, which you can read at {ACP_WORKSPACE_VIRTUAL} (read-only). "
                    f"Configured agents:\n{listing}")


async def _call(name: str, config: AcpAgentConfig, prompt: str, context: RunContext) -> str:
    try:
        from deerflow.acp.mcp_servers import to_acp
        from deerflow.acp.session import AcpError, AcpInvocation, invoke
    except ImportError:
        raise ToolFailure("ACP support is not installed: the 'acp' extra (pip install '.[acp]' in a clone) "
                          "(the agent-client-protocol SDK)", code="acp_unavailable") from None
    workspace = context.paths.acp_workspace
    source = context.services.mcp_server_configs
    offloader, key = services_of(context).offloader or OFFLOADER, str(getattr(context, "thread_id", ""))
    invocation = AcpInvocation(name=name, config=config, workspace=workspace,
                               attended=context.interaction.attended,
                               mcp_servers=to_acp(source()) if callable(source) else [],
                               offloader=offloader, key=key)
    what = f"listing {ACP_WORKSPACE_VIRTUAL}"
    before = await offloader.arun(_snapshot, workspace, key=key, what=what, deadline=SNAPSHOT_DEADLINE_S)
    try:
        result = await invoke(invocation, prompt)
    except AcpError as exc:
        raise ToolFailure(exc.message, code=exc.code) from None
    text = result.text.strip() or f"(the agent sent no message; stop reason: {result.stop_reason})"
    try:
        after = await offloader.arun(_snapshot, workspace, key=key, what=what, deadline=SNAPSHOT_DEADLINE_S)
    except ToolFailure as exc:  # the agent's answer is kept: only the list of its files is missing
        return f"{text}\n\n(The files written by the agent could not be listed: {exc.message})"
    changed = [p for p, stamp in after.items() if before.get(p) != stamp]
    if changed:
        text += "\n\nFiles written by the agent: " + ", ".join(f"{ACP_WORKSPACE_VIRTUAL}/{p}" for p in changed)
    return text


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Relative path → (size, mtime_ns) of the workspace's files: a blocking walk (run it off the
    event loop), bounded in the entries it reads (the agent decides how many there are), nothing
    followed."""
    try:
        top = SafeDir.open(root)
    except UnsafePath:
        return {}
    out: dict[str, tuple[int, int]] = {}
    with top:
        for rel, info in top.walk(max_entries=SNAPSHOT_MAX_ENTRIES):
            if info.kind == "file":
                out[rel] = (info.size, info.mtime_ns)
    return out


__all__ = ["ACP_TOOL_NAME", "acp_tools", "invoke_acp_agent_tool"]

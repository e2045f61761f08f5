"""External agents over the Agent Client Protocol (ACP, stdio).

``invoke_acp_agent`` (:mod:`deerflow.tools.builtins.acp_tools`) hands a prompt to
an agent configured under ``acp_agents`` in ``config.yaml``;
:mod:`deerflow.acp.session` speaks the protocol with the
``agent-client-protocol`` SDK (optional extra ``acp``),
:mod:`deerflow.acp.permissions` answers the agent's permission requests and
:mod:`deerflow.acp.mcp_servers` passes on the enabled MCP servers.  Each agent
works in the thread's ``acp-workspace/``, which the lead agent reads at
``/mnt/acp-workspace`` (read-only).
"""

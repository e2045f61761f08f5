"""Service keys of the MCP capability, importable without the MCP SDK.

Code that only looks the MCP services up (the run manager, subagents, the
client) imports these names from here, so importing it does not load
:mod:`deerflow.mcp.manager` and the SDK behind it (about half a second).
"""

MCP_SERVICE = "mcp"
"""Key of the MCP manager in ``RunManager.services`` (and so in ``RunContext.services``)."""

MCP_RUN_SERVICE = "mcp_run"
"""Key of the run's :class:`~deerflow.mcp.run_tools.McpRunTools` in ``RunContext.services``
(its subagents use the same MCP tools)."""

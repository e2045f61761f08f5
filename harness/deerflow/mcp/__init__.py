"""MCP servers as tool sources, on the official ``mcp`` SDK (major version 2).

The capability in one paragraph: servers are declared under ``mcpServers`` in
``extensions_config.json`` (stdio, SSE or streamable HTTP).  Nothing starts
until a run needs tools; then every enabled server is started (stdio: in the
thread's workspace, scrubbed environment) and listed concurrently, a failing
or hanging one is reported and skipped, and the tools are cached by the
config file's resolved path and content hash.  Each MCP tool becomes an
async LangChain tool named ``<server>_<tool>`` with the server's JSON schema;
unsafe names are dropped.  Sessions are reused per (server, user, thread) and
closed when idle or when the host closes.  Credentials (headers, env, per-user
secrets, OAuth token flows) fail closed and are masked or redacted wherever
they could leak.  With ``tool_search.enabled`` schemas are deferred until
``tool_search`` promotes them; long-running server tasks get a local task id.

Modules, in the order a run meets them:

=================  ==============================================================
``config``         the ``mcpServers`` schema, per-entry validation, file signature
``manager``        :class:`McpManager`: cache, discovery, calls, reset, close
``catalog``        server states and tools of one config version
``transport``      one live session per server/user/thread (stdio, SSE, HTTP)
``sessions``       the session pool: reuse, idle reaping, shutdown
``credentials``    headers/env, per-user store, OAuth tokens (fail closed)
``tools``          listing wrappers (filter, prefix, name checks), the tool object
``results``        CallToolResult → text, structured content, saved images
``deferral``       deferred schemas: catalog hash, search, routing hints
``run_tools``      one run's MCP view (tools, notices, deferred catalog)
``tasks``          long-running tasks: local ids, polling, bounded results
``secrets``        masking for the API, redaction for messages and logs
``editing``        masked read / validated write of the config (server API)
``cli``            ``deerflow mcp list|tools|reset``
=================  ==============================================================
"""

from typing import TYPE_CHECKING

from deerflow._lazy import lazy_exports

if TYPE_CHECKING:
    from deerflow.mcp.config import McpServerConfig
    from deerflow.mcp.credentials import UserCredential
    from deerflow.mcp.manager import McpManager, McpOptions, open_mcp
    from deerflow.mcp.run_tools import McpRunTools

# Imported on first use: importing the package (the CLI does) stays cheap.
_EXPORTS = {
    "McpServerConfig": "config",
    "UserCredential": "credentials",
    "McpManager": "manager",
    "McpOptions": "manager",
    "open_mcp": "manager",
    "McpRunTools": "run_tools",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["McpManager", "McpOptions", "McpRunTools", "McpServerConfig", "UserCredential", "open_mcp"]

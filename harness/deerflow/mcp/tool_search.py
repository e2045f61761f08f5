"""``tool_search``: load the schemas of deferred tools (see :mod:`deerflow.mcp.deferral`).

The result lists each found tool's name, description and parameters, and
the call writes their names to the thread's ``promoted`` state (with the
catalog hash), so the next model call binds them.  Promotion is visibility
only: authorization and an active skill's policy are enforced elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command

from deerflow.errors import ToolFailure
from deerflow.mcp.deferral import DeferredCatalog, describe_specs

TOOL_SEARCH = "tool_search"

_SCHEMA = {
    "type": "object",
    "properties": {"query": {
        "type": "string",
        "description": 'Either "select:NAME[,NAME...]" to load tools you know by name, or a few keywords '
                       "describing what you need.",
    }},
    "required": ["query"],
}


def make_tool_search(catalog: Callable[[], DeferredCatalog | None]) -> BaseTool:
    """The tool, reading the run's deferred catalog through ``catalog`` at call time."""

    async def search(runtime: ToolRuntime, query: str) -> Command:
        deferred = catalog()
        if deferred is None or not deferred.specs:
            raise ToolFailure("there are no deferred tools to load in this run", code="nothing_deferred")
        found = deferred.search(query)
        if not found.matches:
            unknown = f" Unknown names: {', '.join(found.unknown)}." if found.unknown else ""
            raise ToolFailure(f"no deferred tool matches {query!r}.{unknown} Names: "
                              + ", ".join(sorted(deferred.specs)), code="no_match")
        names = [s.name for s in found.matches]
        text = (f"Loaded {len(names)} tool(s); you can call them from your next step: {', '.join(names)}."
                + (f" Unknown names: {', '.join(found.unknown)}." if found.unknown else "")
                + "\n\n" + describe_specs(found.matches))
        message = ToolMessage(content=text, tool_call_id=runtime.tool_call_id or "", name=TOOL_SEARCH,
                              artifact={"promoted": names, "catalog_hash": deferred.hash})
        return Command(update={"promoted": {"catalog_hash": deferred.hash, "names": names},
                               "messages": [message]})

    return StructuredTool(
        name=TOOL_SEARCH, coroutine=search, args_schema=_SCHEMA,
        description="Load deferred tools (listed by name in <deferred_tools>) so you can call them: "
                    "returns their descriptions and parameters.",
    )

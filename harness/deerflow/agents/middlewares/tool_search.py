"""Deferred tool schemas: hide unpromoted tools from the model, refuse calls to them.

The policy lives in :mod:`deerflow.mcp.deferral`; this middleware applies it to
one run:

* ``before_agent`` — routing hints may promote a few tools for the new user
  message (written to ``promoted`` state, never removing anything);
* ``wrap_model_call`` — deferred tools not promoted against the current
  catalog hash are taken out of ``request.tools`` (the model still sees their
  names in ``<deferred_tools>``, appended to the system prompt);
* ``wrap_tool_call`` — a call to an unpromoted deferred tool is answered with
  an error ToolMessage telling the model to load it first.

It only narrows what other middlewares see: authorization and an active
skill's policy still decide separately whether a *promoted* tool may run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse, ToolCallRequest
from langchain_core.messages import HumanMessage, SystemMessage, TextContentBlock, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Command

from deerflow.mcp.deferral import DeferredCatalog
from deerflow.runtime.notes import note_kind

if TYPE_CHECKING:  # the MCP SDK loads when a server is used, not on import
    from deerflow.mcp.run_tools import McpRunTools

Result = ToolMessage | Command[Any]


def with_section(system: SystemMessage | None, section: str | None) -> SystemMessage | None:
    """``system`` with one more text block (unchanged when ``section`` is None)."""
    if not section:
        return system
    block: TextContentBlock = {"type": "text", "text": section}
    if system is None:
        return SystemMessage(content_blocks=[block])
    return SystemMessage(content_blocks=[*system.content_blocks, {"type": "text", "text": "\n\n"}, block])


class DeferredToolsMiddleware(AgentMiddleware):
    """Applies tool-search deferral to one run's MCP tools."""

    def __init__(self, run_tools: McpRunTools) -> None:
        super().__init__()
        self.run_tools = run_tools

    @property
    def catalog(self) -> DeferredCatalog | None:
        deferred = self.run_tools.deferred
        return deferred if deferred is not None and deferred.specs else None

    # -- routing hints -------------------------------------------------------------------------
    def before_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        del runtime
        catalog = self.catalog
        if catalog is None:
            return None
        message = _latest_user_message(state.get("messages") or [])
        if message is None:
            return None
        wanted = [n for n in catalog.auto_promotions(message) if n not in catalog.promoted(state.get("promoted"))]
        if not wanted:
            return None
        return {"promoted": {"catalog_hash": catalog.hash, "names": wanted}}

    async def abefore_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    # -- model requests ------------------------------------------------------------------------
    def _project(self, request: ModelRequest) -> ModelRequest:
        catalog = self.catalog
        if catalog is None:
            return request
        promoted = catalog.promoted(request.state.get("promoted"))
        hidden = set(catalog.specs) - promoted
        tools = [t for t in request.tools if isinstance(t, dict) or t.name not in hidden]
        return request.override(tools=tools,
                                system_message=with_section(request.system_message, catalog.prompt_section(promoted)))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        return handler(self._project(request))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> Any:
        return await handler(self._project(request))

    # -- tool calls ----------------------------------------------------------------------------
    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        catalog = self.catalog
        name = request.tool_call["name"]
        if catalog is None or name not in catalog.specs or name in catalog.promoted(request.state.get("promoted")):
            return None
        return ToolMessage(
            content=f'Error: {name} is deferred and not loaded yet. Call tool_search with "select:{name}" '
                    "first, then call it again with the parameters it shows.",
            tool_call_id=request.tool_call["id"], name=name, status="error",
            artifact={"status": "error", "code": "not_promoted"},
        )

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        return self._refusal(request) or handler(request)

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: Callable[[ToolCallRequest], Awaitable[Result]]) -> Result:
        return self._refusal(request) or await handler(request)


def _latest_user_message(messages: list[Any]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and note_kind(message) is None:
            return message.text
    return None


__all__ = ["DeferredToolsMiddleware", "with_section"]

"""MCP tools as LangChain tools: listing wrappers, name checks, the tool object.

A server's listing passes through small wrappers, each doing one thing:

    ServerListing (raw MCP tools → specs)
      → FilteredListing (``include_tools`` / ``exclude_tools`` globs)
      → PrefixedListing (``<server>_<tool>`` by default)
      → ValidatedListing (drops names the model could be confused or attacked
        with — newlines, markup, odd characters, > 64 chars — with a warning)

Each surviving :class:`ToolSpec` becomes an async ``StructuredTool`` whose
``args_schema`` is the server's JSON schema, untouched.  The tool reads the
run's identity from ``ToolRuntime`` at call time, so tool objects are built once
per catalog and shared by every run and thread.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command

if TYPE_CHECKING:  # the MCP SDK loads when a server is used, not on import
    import mcp_types

logger = logging.getLogger(__name__)

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RAW_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
MAX_DESCRIPTION = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool as the harness offers it."""

    server: str
    remote_name: str
    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def digest(self) -> str:
        """Identity of the tool's contract (name, description, schema) for catalog hashes."""
        blob = json.dumps([self.name, self.description, self.input_schema], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Listing(Protocol):
    def specs(self) -> list[ToolSpec]: ...


@dataclass(frozen=True)
class ServerListing:
    """The raw tools of one server, as specs (names not yet checked or prefixed)."""

    server: str
    tools: tuple[mcp_types.Tool, ...]

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(self.server, t.name, t.name, _clean_description(t.description or t.title or ""),
                         _object_schema(t.input_schema)) for t in self.tools]


@dataclass(frozen=True)
class FilteredListing:
    """Keeps tools matching ``include`` (all when None) and not matching ``exclude`` (globs)."""

    inner: Listing
    include: tuple[str, ...] | None
    exclude: tuple[str, ...] = ()

    def specs(self) -> list[ToolSpec]:
        def wanted(name: str) -> bool:
            included = self.include is None or any(fnmatch.fnmatchcase(name, p) for p in self.include)
            return included and not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)

        return [s for s in self.inner.specs() if wanted(s.remote_name)]


@dataclass(frozen=True)
class PrefixedListing:
    """Prefixes every name (``time_`` + ``get_current_time``); dots become underscores."""

    inner: Listing
    prefix: str

    def specs(self) -> list[ToolSpec]:
        return [replace(s, name=self.prefix + s.name.replace(".", "_")) for s in self.inner.specs()]


@dataclass(frozen=True)
class ValidatedListing:
    """Drops tools whose name is unsafe or unusable, warning through ``warn`` once per tool."""

    inner: Listing
    warn: Callable[[str], None]

    def specs(self) -> list[ToolSpec]:
        kept: dict[str, ToolSpec] = {}
        for spec in self.inner.specs():
            problem = name_problem(spec)
            if problem is None and spec.name in kept:
                problem = "another tool of this server already has that name"
            if problem is not None:
                self.warn(f"MCP server {spec.server!r}: tool {spec.remote_name!r} dropped ({problem})")
                continue
            kept[spec.name] = spec
        return list(kept.values())


def name_problem(spec: ToolSpec) -> str | None:
    """Why a tool name is refused, or None when it is fine."""
    if not RAW_NAME.match(spec.remote_name):
        return "its name has characters outside letters, digits, '_', '-' and '.'"
    if not TOOL_NAME.match(spec.name):
        return f"the exposed name {spec.name!r} is longer than 64 characters or has odd characters"
    return None


def server_specs(server: str, tools: list[mcp_types.Tool], *, prefix: str, include: list[str] | None,
                 exclude: list[str], warn: Callable[[str], None]) -> list[ToolSpec]:
    """A server's listing through the wrappers, in order."""
    listing: Listing = ServerListing(server, tuple(tools))
    listing = FilteredListing(listing, tuple(include) if include is not None else None, tuple(exclude))
    if prefix:
        listing = PrefixedListing(listing, prefix)
    return ValidatedListing(listing, warn).specs()


def _clean_description(text: str) -> str:
    text = _CONTROL.sub(" ", text).strip()
    return text[:MAX_DESCRIPTION] + ("…" if len(text) > MAX_DESCRIPTION else "") or "(no description)"


def _object_schema(schema: Any) -> dict[str, Any]:
    """The input schema as an object schema (a server may omit ``properties``)."""
    data = dict(schema) if isinstance(schema, dict) else {}
    data["type"] = "object"
    data.setdefault("properties", {})
    return data


class ToolCaller(Protocol):
    """Executes a call of an MCP tool for the run in ``runtime`` (the MCP manager)."""

    async def call_tool(self, spec: ToolSpec, arguments: dict[str, Any],
                        runtime: ToolRuntime[Any]) -> ToolMessage | Command[Any]: ...


def make_tool(spec: ToolSpec, caller: ToolCaller) -> BaseTool:
    """An async LangChain tool for ``spec``; ``runtime`` is injected by the tool node."""

    async def call(runtime: ToolRuntime[Any], **arguments: Any) -> ToolMessage | Command[Any]:
        return await caller.call_tool(spec, arguments, runtime)

    return StructuredTool(name=spec.name, description=spec.description, args_schema=spec.input_schema,
                          coroutine=call, metadata={"mcp_server": spec.server, "mcp_tool": spec.remote_name})

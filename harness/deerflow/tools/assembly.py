"""Which tools a run gets, and in what priority.

``get_available_tools`` gathers tools from every source and keeps the first
tool of each name, in this priority (stated once, here):

1. **harness built-ins** — framework contracts the rest of the product relies
   on (``present_files``, ``ask_clarification``, the file and execution tools…);
2. **config tools** — ``tools:`` entries in ``config.yaml`` (``use: module:attr``),
   then tools of startup **plugins** (also operator-chosen code);
3. **MCP tools** — from enabled MCP servers (untrusted; can never shadow the above);
4. **subagent tools** (``task``, batches) and **ACP tools** (``invoke_acp_agent``).

A dropped duplicate is logged.  Sources that later parts of the harness
provide (MCP, subagents, ACP, skills…) plug in through :class:`ToolSources`.
Finally the user's authorization policy removes what they may not use.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field

from langchain_core.tools import BaseTool

from deerflow.config.schema import AppConfig, ToolConfig
from deerflow.errors import ConfigError
from deerflow.reflection import resolve_variable
from deerflow.tools.authorization import ToolPolicy, filter_tools

logger = logging.getLogger(__name__)

ToolFactory = Callable[[], Sequence[BaseTool]]


@dataclass
class ToolSources:
    """Tool providers filled in by the host; an absent provider adds nothing.

    Attributes:
        builtins: Harness tools, already grouped (``{group: [tools]}``).
        mcp: Returns the MCP tools (called only when ``include_mcp``).
        subagents: Returns ``task`` and batch tools (called only when enabled).
        acp: Returns ACP agent tools.
        plugins: Returns the tools of startup plugins (after config tools).
    """

    builtins: dict[str, list[BaseTool]] = field(default_factory=dict)
    mcp: ToolFactory | None = None
    subagents: ToolFactory | None = None
    acp: ToolFactory | None = None
    plugins: ToolFactory | None = None


class ToolCache:
    """Built tools reused across runs, keyed by everything they are built from.

    Building a ``StructuredTool`` derives a pydantic schema from its function's
    signature (several milliseconds per tool); the built-in tools depend only on
    the host's sandbox provider and a few config values, so a host builds each
    group once per key and every run shares the (immutable) tool objects.  The
    host drops the cache when its config changes.  Bounded: past ``max_entries``
    keys the oldest is forgotten.
    """

    def __init__(self, max_entries: int = 64) -> None:
        self._tools: dict[Hashable, list[BaseTool]] = {}
        self._lock = threading.Lock()  # subagents may build on worker threads
        self._max = max_entries

    def get(self, key: Hashable, build: Callable[[], list[BaseTool]]) -> list[BaseTool]:
        """The tools for ``key``, built by ``build`` on first use; a new list each call."""
        with self._lock:
            tools = self._tools.get(key)
        if tools is None:
            tools = build()
            with self._lock:
                self._tools.setdefault(key, tools)
                while len(self._tools) > self._max:
                    del self._tools[next(iter(self._tools))]
        return list(tools)

    def clear(self) -> None:
        with self._lock:
            self._tools.clear()


"""Key of the host's :class:`ToolCache` in ``RunManager.services`` (subagents build from it too)."""


# Built-in groups that ignore the ``groups`` filter: the framework needs them.
ALWAYS_ON_GROUPS = frozenset({"builtin"})


def get_available_tools(
    groups: Sequence[str] | None = None,
    include_mcp: bool = True,
    model_name: str | None = None,
    subagent_enabled: bool = False,
    *,
    app_config: AppConfig,
    sources: ToolSources | None = None,
    user_id: str | None = None,
    config_file: str | None = None,
    hidden: Collection[str] = (),
) -> list[BaseTool]:
    """Assemble, de-duplicate and authorize the tools for one run.

    Args:
        groups: Tool groups to include (config tools and built-in groups);
            ``None`` means all.  ``builtin`` tools are always included.
        include_mcp: Whether to ask the MCP source for tools.
        model_name: The model in use (vision-only tools depend on it).
        subagent_enabled: Whether the subagent tools are offered.
        app_config: The config in force.
        sources: Host-provided tool sources.
        user_id: Whose authorization policy applies.
        config_file: Config path, for error messages.
        hidden: Tool names this run must not offer, whatever their source
            (the run's interaction policy hides ``ask_clarification`` when
            nobody can answer).
    """
    del model_name  # vision-dependent tools are filtered by their source
    sources = sources or ToolSources()
    wanted = None if groups is None else set(groups) | ALWAYS_ON_GROUPS
    ordered: list[BaseTool] = []
    for group, tools in sources.builtins.items():
        if wanted is None or group in wanted:
            ordered.extend(tools)
    ordered.extend(load_config_tools(app_config.tools, groups=wanted, config_file=config_file))
    if sources.plugins is not None:
        ordered.extend(sources.plugins())
    if include_mcp and sources.mcp is not None:
        ordered.extend(sources.mcp())
    if subagent_enabled and sources.subagents is not None:
        ordered.extend(sources.subagents())
    if sources.acp is not None:
        ordered.extend(sources.acp())
    tools = [t for t in dedupe_by_name(ordered) if t.name not in hidden]
    policy = ToolPolicy.for_user(app_config.authorization, user_id or "")
    return filter_tools(tools, policy)


def dedupe_by_name(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """Keep the first tool of each name; log the ones dropped."""
    seen: dict[str, BaseTool] = {}
    for tool in tools:
        if tool.name in seen:
            logger.warning("tool %r is provided twice; keeping the higher-priority one", tool.name)
            continue
        seen[tool.name] = tool
    return list(seen.values())


def load_config_tools(
    entries: Sequence[ToolConfig], *, groups: set[str] | None, config_file: str | None = None
) -> list[BaseTool]:
    """Resolve ``tools:`` entries (a BaseTool, or a factory returning one)."""
    out: list[BaseTool] = []
    for index, entry in enumerate(entries):
        if groups is not None and entry.group not in groups:
            continue
        key = f"tools[{index}].use"
        obj = resolve_variable(entry.use, key=key, file=config_file)
        if not isinstance(obj, BaseTool) and callable(obj):
            try:
                obj = obj(**entry.options())
            except TypeError as exc:
                raise ConfigError(f"cannot create tool {entry.name!r}: {exc}", file=config_file, key=key) from None
        if not isinstance(obj, BaseTool):
            raise ConfigError(f"{entry.use!r} is not a langchain tool", file=config_file, key=key)
        if obj.name != entry.name:
            logger.warning("config tool %r resolves to a tool named %r; the model sees %r",
                           entry.name, obj.name, obj.name)
        out.append(obj)
    return out

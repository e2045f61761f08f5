"""What a plugin can contribute, and the object its ``register`` function receives.

A plugin is Python code that runs *in the host process with the host's
privileges*: it can do anything the server can.  That is why plugins are
configured only in ``config.yaml`` (read at startup, never written through the
API or reachable by the agent) and why their contributions are collected in a
transaction — :class:`PluginRegistrar` buffers them and the loader commits them
only when ``register`` returns cleanly.

A plugin module defines::

    def register(plugin: PluginRegistrar) -> None:
        plugin.add_tool(my_tool)                      # a langchain BaseTool
        plugin.add_middleware(MyMiddleware)           # a factory: a fresh instance per run
        plugin.add_observer(on_event)                 # called with every run event
        plugin.add_route("/status", StatusHandler)    # served at /deerflow/api/plugins/<name>/status

Routes need a jupyter_server handler class (``JupyterHandler`` subclass); the
server wraps it so that Jupyter authentication and the ``deerflow``
authorization resource apply to every request.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import BaseTool

Observer = Callable[[Any], Awaitable[None] | None]
MiddlewareFactory = Callable[[], AgentMiddleware]
_ROUTE = re.compile(r"^(/[A-Za-z0-9_.\-()?<>\[\]\\+*{},:^$|]*)+$")


class PluginError(Exception):
    """A contribution the host cannot accept (the plugin's load is rolled back)."""


@dataclass
class Contributions:
    """Everything one plugin added."""

    tools: list[BaseTool] = field(default_factory=list)
    middlewares: list[MiddlewareFactory] = field(default_factory=list)
    observers: list[Observer] = field(default_factory=list)
    routes: list[tuple[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"tools": [t.name for t in self.tools], "middlewares": len(self.middlewares),
                "observers": len(self.observers), "routes": [r for r, _ in self.routes]}


class PluginRegistrar:
    """Handed to a plugin's ``register``; buffers its contributions until the load commits.

    Attributes:
        name: The plugin's id from ``config.yaml``.
        options: Its ``options`` mapping (read-only by convention).
    """

    def __init__(self, name: str, options: Mapping[str, Any]) -> None:
        self.name = name
        self.options = dict(options)
        self._pending = Contributions()

    def add_tool(self, tool: BaseTool) -> None:
        if not isinstance(tool, BaseTool):
            raise PluginError(f"add_tool needs a langchain BaseTool, got {type(tool).__name__}")
        self._pending.tools.append(tool)

    def add_middleware(self, factory: MiddlewareFactory | type[AgentMiddleware]) -> None:
        """A middleware *factory* (a class or a callable): each run gets its own instance."""
        if isinstance(factory, AgentMiddleware) or not callable(factory):
            raise PluginError("add_middleware needs a factory (the middleware class or a function), "
                              "so that runs never share middleware state")
        self._pending.middlewares.append(factory)

    def add_observer(self, observer: Observer) -> None:
        if not callable(observer):
            raise PluginError("add_observer needs a callable taking one run event")
        self._pending.observers.append(observer)

    def add_route(self, pattern: str, handler: Any) -> None:
        """A tornado route pattern (starting with ``/``) under ``/deerflow/api/plugins/<name>``."""
        if not isinstance(pattern, str) or not _ROUTE.match(pattern) or ".." in pattern:
            raise PluginError(f"route pattern {pattern!r} must start with '/' and stay under the plugin's prefix")
        if not isinstance(handler, type):
            raise PluginError("add_route needs a handler class")
        self._pending.routes.append((pattern, handler))

    def commit(self) -> Contributions:
        """The buffered contributions (the loader calls this once ``register`` returned)."""
        done, self._pending = self._pending, Contributions()
        return done


__all__ = ["Contributions", "MiddlewareFactory", "Observer", "PluginError", "PluginRegistrar"]

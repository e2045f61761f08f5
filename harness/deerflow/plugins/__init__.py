"""Python extensions: the most powerful capability seam, and the most restricted.

Configured in ``config.yaml`` ``plugins`` (startup only; never writable through
the API or by the agent), loaded by :mod:`deerflow.plugins.loader` (source
validation, snapshots, rollback), contributing through
:class:`~deerflow.plugins.api.PluginRegistrar`: tools, middlewares, run-event
observers and authenticated server routes.  :class:`PluginSet` is what a host
holds: the committed contributions and a report per configured plugin.

**Plugins run with the host's privileges** (the server's, or your own process's
for the CLI and the embedded client).  Use one only for code you trust.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import BaseTool

from deerflow.config.schema import PluginConfig
from deerflow.plugins.api import PluginError, PluginRegistrar
from deerflow.plugins.loader import LoadedPlugin, PluginReport, load_one

if TYPE_CHECKING:
    from deerflow.runtime.events import Event

logger = logging.getLogger(__name__)

Publish = Callable[["Event"], Awaitable[None]]


@dataclass
class PluginSet:
    """The plugins a host loaded at startup."""

    plugins: list[LoadedPlugin] = field(default_factory=list)
    reports: list[PluginReport] = field(default_factory=list)

    def tools(self) -> list[BaseTool]:
        return [t for p in self.plugins for t in p.contributions.tools]

    def middlewares(self) -> list[AgentMiddleware]:
        """Fresh middleware instances for one run."""
        return [factory() for p in self.plugins for factory in p.contributions.middlewares]

    def routes(self) -> list[tuple[str, str, Any]]:
        """``(plugin name, pattern, handler class)`` for every contributed route."""
        return [(p.name, pattern, handler) for p in self.plugins for pattern, handler in p.contributions.routes]

    def observe(self, publish: Publish) -> Publish:
        """``publish`` that also shows each event to the observers (their failures are logged, never raised)."""
        observers = [(p.name, o) for p in self.plugins for o in p.contributions.observers]
        if not observers:
            return publish

        async def observed(event: Event) -> None:
            await publish(event)
            for name, observer in observers:
                try:
                    result = observer(event)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:
                    logger.error("observer of plugin %s failed on a %s event", name,
                                 getattr(event, "type", "?"), exc_info=exc)  # never raise while logging

        return observed


def load_plugins(entries: Sequence[PluginConfig], *, home: Path, base_dir: Path | None = None) -> PluginSet:
    """Load every configured plugin once (startup); failures are reported, not raised.

    Args:
        entries: ``config.yaml`` ``plugins``.
        home: ``$DEERFLOW_HOME`` (snapshots go to ``plugins/snapshots``).
        base_dir: Where relative ``path`` values start (the config file's directory).
    """
    found = PluginSet()
    for entry in entries:
        loaded, report = load_one(entry, snapshots=home / "plugins" / "snapshots", base_dir=base_dir)
        found.reports.append(report)
        if loaded is not None:
            found.plugins.append(loaded)
    return found


__all__ = ["PluginError", "PluginRegistrar", "PluginReport", "PluginSet", "load_plugins"]

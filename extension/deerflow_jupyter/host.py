"""The harness runtime hosted by one Jupyter server.

One :class:`~deerflow.runs.manager.RunManager` per server, opened lazily on
the server's event loop the first time a request needs it (so a broken config
is reported on the API instead of killing the server) and closed when the
extension stops.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from deerflow.config.loader import LoadedConfig, load_config
from deerflow.config.paths import HomePaths, default_home
from deerflow.errors import ConfigError
from deerflow.notebooks.access import NotebookAccess
from deerflow.plugins import PluginSet, load_plugins
from deerflow.runs.manager import RunManager


class HarnessHost:
    """Owns the run manager of a server.

    Args:
        config_path: ``config.yaml`` to use (None: the standard lookup).
        home: ``$DEERFLOW_HOME`` (None: the environment's).
        notebooks: The user's notebooks (the server's ContentsManager), handed to runs as
            ``services.notebooks``; None: the notebook tools say they are unavailable.
    """

    def __init__(self, *, config_path: str | None = None, home: str | None = None,
                 notebooks: NotebookAccess | None = None) -> None:
        self.config_path = config_path
        self.notebooks = notebooks
        self.home = HomePaths(Path(home).expanduser() if home else default_home())
        if notebooks is not None and notebooks.stored is None:  # rendered notebooks, shared by processes
            notebooks.keep_in(self.home.home / "cache" / "notebooks")
        self._manager: RunManager | None = None
        self._lock = asyncio.Lock()
        self._loaded: LoadedConfig | None = None
        self._plugins: PluginSet | None = None

    def plugins(self) -> PluginSet:
        """The startup plugins, loaded once (a broken config loads none: the API reports the config error)."""
        if self._plugins is None:
            try:
                loaded = self.loaded()
            except ConfigError:
                return PluginSet()
            self._plugins = load_plugins(loaded.config.plugins, home=self.home.home,
                                         base_dir=loaded.path.parent if loaded.path else None)
        return self._plugins

    def loaded(self) -> LoadedConfig:
        """The validated config (raises ConfigError, reported by the handlers)."""
        if self._loaded is None:
            self._loaded = load_config(self.config_path)
            self.home = self.home.with_storage(self._loaded.config.storage)
        return self._loaded

    async def manager(self) -> RunManager:
        async with self._lock:
            if self._manager is None:
                self._manager = await RunManager.open(loaded=self.loaded(), home=self.home, plugins=self.plugins())
                if self.notebooks is not None:
                    self._manager.use_notebooks(self.notebooks)
            return self._manager

    async def close(self, *, reason: str | None = None) -> None:
        """Close the run manager; with ``reason``, its active runs are recorded ``interrupted: {reason}``."""
        async with self._lock:
            if self._manager is not None:
                await self._manager.close(reason=reason)
                self._manager = None

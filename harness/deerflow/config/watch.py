"""An edited ``config.yaml`` takes effect at the next run, without a restart.

People edit the config while JupyterLab (or a kernel) is running: add a model,
set an API key variable, change a tool.  The run manager asks
:meth:`ConfigWatch.check` before each run; when the file changed on disk it is
read and validated again:

* **valid** — the new config is used from this run on for everything built
  per run (models, tools, skills, subagent types, limits, prompts...).  The
  sections of :data:`STARTUP_SECTIONS` configure services opened once per host
  (the sandbox, the browser, storage...): their changes wait for a restart,
  and the returned note says which ones do;
* **invalid** — :class:`~deerflow.errors.ConfigError` naming the file and the
  key; the caller refuses the run, so nothing runs on a config the user did not
  mean, and the file is read again at the next attempt.

Only the file's identity (mtime, size, inode) is looked at per run; the file is
parsed again only when that changes, and a rewrite with the same content is
not a change.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from deerflow.config.loader import LoadedConfig, load_config
from deerflow.config.schema import AppConfig

STARTUP_SECTIONS = ("sandbox", "browser", "web", "storage", "plugins", "skills", "mcp", "tool_search")
"""Top-level sections read when the host opens its services; ``subagents.batches`` too."""


@dataclass(frozen=True)
class ConfigChange:
    """A config edit picked up: the new config and what of it needs a restart."""

    loaded: LoadedConfig
    needs_restart: tuple[str, ...] = ()

    def note(self) -> str:
        where = self.loaded.path
        if not self.needs_restart:
            return f"{where} changed: this run uses the edited settings"
        return (f"{where} changed: this run uses the edited settings, except {', '.join(self.needs_restart)}, "
                "which take effect when the server (or kernel) restarts")


@dataclass
class ConfigWatch:
    """Notices edits of the config file a host was started with."""

    loaded: LoadedConfig
    _stamp: tuple[int, int, int] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._stamp = _stamp(self.loaded.path)

    def check(self) -> ConfigChange | None:
        """The change since the last check, or None.

        Raises:
            ConfigError: the edited file is invalid (checked again next time).
        """
        path = self.loaded.path
        stamp = _stamp(path)
        if path is None or stamp == self._stamp:
            return None
        fresh = load_config(path)  # raises before anything is remembered
        self._stamp = stamp
        if fresh.config == self.loaded.config and fresh.extensions == self.loaded.extensions:
            return None
        change = ConfigChange(fresh, startup_changes(self.loaded.config, fresh.config))
        self.loaded = fresh
        return change


def startup_changes(old: AppConfig, new: AppConfig) -> tuple[str, ...]:
    """The startup sections whose settings differ."""
    changed = [name for name in STARTUP_SECTIONS if getattr(old, name) != getattr(new, name)]
    if old.subagents.batches != new.subagents.batches:
        changed.append("subagents.batches")
    return tuple(changed)


def _stamp(path: Path | None) -> tuple[int, int, int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1, -1)  # gone: load_config says so when asked
    return (st.st_mtime_ns, st.st_size, st.st_ino)


__all__ = ["STARTUP_SECTIONS", "ConfigChange", "ConfigWatch", "startup_changes"]

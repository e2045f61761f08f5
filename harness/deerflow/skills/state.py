"""Which skills are enabled, per user.

The format is the ``skills`` object of ``extensions_config.json`` (as in
DeerFlow), one entry per skill name::

    {
      "mcpServers": {...},
      "skills": {
        "deep-research": {"enabled": true},
        "skill-creator": {"enabled": false}
      }
    }

Two files use it, the later one winning per skill:

1. the operator's ``extensions_config.json`` (``$DEERFLOW_EXTENSIONS_CONFIG``,
   beside ``config.yaml``, or in ``$DEERFLOW_HOME``) — defaults for everyone;
2. ``$DEERFLOW_HOME/users/{user}/extensions_config.json`` — the user's own
   choices, the file ``enable``/``disable`` write (other keys are preserved).

A skill listed in neither is enabled.  Writes go to a temporary file that
replaces the old one, so a reader never sees half a file.  A malformed file is
a :class:`~deerflow.errors.ConfigError` naming the file and the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deerflow.errors import ConfigError
from deerflow.persistence.files import atomic_write_text, read_json_object

USER_STATE_FILE = "extensions_config.json"


def read_states(path: Path) -> dict[str, bool]:
    """The ``skills`` enabled flags of one file ({} when it does not exist).

    Raises:
        ConfigError: invalid JSON, or a ``skills`` entry of the wrong shape.
    """
    data = read_json_object(path)
    section = data.get("skills", {})
    if not isinstance(section, dict):
        raise ConfigError("'skills' must be an object of skill names", file=str(path), key="skills")
    states: dict[str, bool] = {}
    for name, entry in section.items():
        key = f"skills.{name}"
        if not isinstance(entry, dict) or set(entry) - {"enabled"}:
            raise ConfigError('each skill entry must look like {"enabled": true}', file=str(path), key=key)
        enabled = entry.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError("'enabled' must be true or false", file=str(path), key=f"{key}.enabled")
        states[name] = enabled
    return states


def resolve_enabled(name: str, layers: Sequence[Mapping[str, bool]]) -> bool:
    """The enabled flag of ``name``: the last layer that mentions it, else True."""
    for layer in reversed(layers):
        if name in layer:
            return layer[name]
    return True


def write_state(path: Path, name: str, enabled: bool) -> None:
    """Set one skill's flag in ``path``, keeping every other key of the file."""
    data = read_json_object(path)
    section = data.get("skills")
    if not isinstance(section, dict):
        section = {}
    section[name] = {"enabled": enabled}
    data["skills"] = section
    _write_json(path, data)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")

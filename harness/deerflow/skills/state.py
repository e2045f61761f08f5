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
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deerflow.errors import ConfigError

USER_STATE_FILE = "extensions_config.json"


def read_states(path: Path) -> dict[str, bool]:
    """The ``skills`` enabled flags of one file ({} when it does not exist).

    Raises:
        ConfigError: invalid JSON, or a ``skills`` entry of the wrong shape.
    """
    data = _read_json(path)
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


def resolve_enabled(name: str, layers: list[Mapping[str, bool]]) -> bool:
    """The enabled flag of ``name``: the last layer that mentions it, else True."""
    for layer in reversed(layers):
        if name in layer:
            return layer[name]
    return True


def write_state(path: Path, name: str, enabled: bool) -> None:
    """Set one skill's flag in ``path``, keeping every other key of the file."""
    data = _read_json(path)
    section = data.get("skills")
    if not isinstance(section, dict):
        section = {}
    section[name] = {"enabled": enabled}
    data["skills"] = section
    _write_json(path, data)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read the file ({exc.strerror})", file=str(path)) from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"malformed JSON at line {exc.lineno}: {exc.msg}", file=str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError("the top level must be a JSON object", file=str(path))
    return data


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".extensions-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

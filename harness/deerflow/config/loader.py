"""Finding, reading and validating ``config.yaml``.

Lookup order (SPEC §2): ``$DEERFLOW_CONFIG``, else ``./config.yaml``, else
``$DEERFLOW_HOME/config.yaml``; with none of them the defaults apply.  The
companion ``extensions_config.json`` (MCP servers, skill enablement) is found
at ``$DEERFLOW_EXTENSIONS_CONFIG``, else beside the config in use, else
``$DEERFLOW_HOME/extensions_config.json``; "beside" counts when the file exists
at the time it is read, not when the config was loaded (:class:`ExtensionsLocation`).

String values of the form ``$VAR`` or ``${VAR}`` are read from the
environment; ``$$`` escapes a literal dollar.  Every problem becomes a
:class:`~deerflow.errors.ConfigError` naming the file, the key and the fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from deerflow.config.paths import default_home
from deerflow.config.schema import AppConfig
from deerflow.errors import ConfigError

_ENV_REF = re.compile(r"^\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))$")


@dataclass(frozen=True)
class ExtensionsLocation:
    """Where ``extensions_config.json`` is, chosen each time it is asked (SPEC §2).

    ``$DEERFLOW_EXTENSIONS_CONFIG`` (read when the config is loaded) wins; else the file
    beside ``config.yaml`` *if it exists now*; else ``$DEERFLOW_HOME/extensions_config.json``.
    Asking at each read, not once at load, means an operator who creates the file beside
    ``config.yaml`` while a server runs is heard on the next run, without a config reload.
    """

    explicit: Path | None
    beside: Path | None
    home: Path

    def resolve(self) -> Path:
        """The file to read or write now (it need not exist); one ``stat`` unless explicit."""
        if self.explicit is not None:
            return self.explicit
        if self.beside is not None and self.beside.is_file():
            return self.beside
        return self.home


@dataclass(frozen=True)
class LoadedConfig:
    """A validated config and where it came from (``path`` is None for defaults)."""

    config: AppConfig
    path: Path | None
    extensions: ExtensionsLocation

    @property
    def extensions_path(self) -> Path:
        """``extensions_config.json`` as things are now (see :class:`ExtensionsLocation`)."""
        return self.extensions.resolve()


def find_config_path(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path | None:
    """Return the config file to use, or None when there is none."""
    env = os.environ if env is None else env
    explicit = env.get("DEERFLOW_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError("DEERFLOW_CONFIG points to a file that does not exist", file=str(path))
        return path
    local = (cwd or Path.cwd()) / "config.yaml"
    if local.is_file():
        return local
    home_cfg = default_home(env) / "config.yaml"
    return home_cfg if home_cfg.is_file() else None


def resolve_extensions(where: Path | ExtensionsLocation) -> Path:
    """A fixed path as it is, a location as things are now."""
    return where.resolve() if isinstance(where, ExtensionsLocation) else where


def extensions_location(config_path: Path | None, env: Mapping[str, str] | None = None) -> ExtensionsLocation:
    """The rule for finding ``extensions_config.json`` next to ``config_path``, resolved at each read."""
    env = os.environ if env is None else env
    explicit = env.get("DEERFLOW_EXTENSIONS_CONFIG")
    return ExtensionsLocation(explicit=Path(explicit).expanduser() if explicit else None,
                              beside=config_path.parent / "extensions_config.json" if config_path else None,
                              home=default_home(env) / "extensions_config.json")


def find_extensions_path(config_path: Path | None, env: Mapping[str, str] | None = None) -> Path:
    """Where ``extensions_config.json`` is now (it need not exist)."""
    return extensions_location(config_path, env).resolve()


def load_config(path: Path | str | None = None, *, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Find (unless given), read, interpolate and validate the config.

    Raises:
        ConfigError: for unreadable files, bad YAML, missing env vars or invalid values.
    """
    env = os.environ if env is None else env
    cfg_path = Path(path).expanduser() if path is not None else find_config_path(env)
    raw: Any = {}
    if cfg_path is not None:
        raw = _read_yaml(cfg_path)
    file = str(cfg_path) if cfg_path else None
    data = interpolate(raw, env=env, file=file)
    config = validate_config(data, file=file)
    return LoadedConfig(config, cfg_path, extensions_location(cfg_path, env))


def validate_config(data: Any, *, file: str | None = None) -> AppConfig:
    """Validate already-parsed config data."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"the top level must be a mapping of sections, not {type(data).__name__}", file=file)
    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        raise _from_validation(exc, file) from None


def interpolate(value: Any, *, env: Mapping[str, str], file: str | None = None, key: str = "") -> Any:
    """Replace ``$VAR`` string values with environment values, recursively."""
    if isinstance(value, dict):
        return {k: interpolate(v, env=env, file=file, key=_join(key, str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env=env, file=file, key=f"{key}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value
    if value.startswith("$$"):
        return value[1:]
    match = _ENV_REF.match(value)
    if not match:
        return value
    name = match.group("braced") or match.group("bare")
    if name not in env:
        raise ConfigError(f"environment variable ${name} is not set", file=file, key=key or None)
    return env[name]


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the file ({exc.strerror})", file=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"malformed YAML{where}: {problem}", file=str(path)) from None


def _from_validation(exc: ValidationError, file: str | None) -> ConfigError:
    errors = exc.errors()
    first = errors[0]
    key = _loc(first["loc"])
    if first["type"] == "extra_forbidden":
        problem = "unknown key (check the spelling; config.example.yaml lists every key)"
    else:
        problem = first["msg"].removeprefix("Value error, ")
    if len(errors) > 1:
        others = "; ".join(f"'{_loc(e['loc'])}': {e['msg']}" for e in errors[1:4])
        problem += f" (also: {others})"
    return ConfigError(problem, file=file, key=key)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out = f"{out}[{part}]" if isinstance(part, int) else _join(out, str(part))
    return out


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


"""The ``mcpServers`` section of ``extensions_config.json``.

The file is shared with skill enablement (another section), so only the
``mcpServers`` object is read here and every other top-level key is left alone.
Each server entry is validated on its own: one broken entry is reported (file
and key) and skipped while the others keep working.  ``$VAR`` / ``${VAR}``
string values are read from the environment exactly as in ``config.yaml``.

The file's identity for caching is its :class:`ConfigSignature` — resolved path
plus a hash of the bytes — so editing the file takes effect on the next run
without a restart, and an unchanged file costs one read and one hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from deerflow.config.loader import interpolate
from deerflow.errors import ConfigError
from deerflow.persistence.files import atomic_write_text, read_json_object

SERVERS_KEY = "mcpServers"
SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def check_header(name: str, value: str) -> None:
    """Refuse a header that would corrupt the request (CR/LF, control characters, bad name).

    Raises:
        ValueError: naming the header, never echoing its value (it may be a secret).
    """
    if not HEADER_NAME.match(name):
        raise ValueError(f"header name {name!r} is not a valid HTTP token")
    if any((ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F for ch in value):
        raise ValueError(f"header {name!r} has a line break or control character in its value")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OAuthConfig(_Strict):
    """Token endpoint flow for an HTTP/SSE server (tokens cached, refreshed before expiry)."""

    grant_type: Literal["client_credentials", "refresh_token"] = "client_credentials"
    token_url: str
    client_id: str | None = None
    client_secret: str | None = None
    refresh_token: str | None = None
    scope: str | None = None
    audience: str | None = None
    refresh_skew_seconds: float = Field(default=30.0, ge=0)

    @field_validator("token_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _check_url(value)


class UserCredentials(_Strict):
    """Whose credential a call carries.

    ``scope: user`` means every user must bring their own credential (from their
    credential store); without it the call fails — it never runs under the
    server's shared identity.  ``header``/``scheme`` say how a token is sent.
    """

    scope: Literal["server", "user"] = "server"
    header: str = "Authorization"
    scheme: str | None = "Bearer"

    @field_validator("header")
    @classmethod
    def _header_name(cls, value: str) -> str:
        check_header(value, "")
        return value

    @field_validator("scheme")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[A-Za-z][A-Za-z0-9._-]*$", value):
            raise ValueError("an auth scheme is one word, such as 'Bearer'")
        return value


class RoutingHints(_Strict):
    """Hints that steer the model toward a server; they never forbid anything."""

    keywords: list[str] = Field(default_factory=list)
    auto_promote: list[str] = Field(default_factory=list, max_length=5)
    hint: str | None = Field(default=None, max_length=500)


class TaskTools(_Strict):
    """A server's long-running task protocol (tools named by their unprefixed MCP names)."""

    submit: str
    status: str
    cancel: str | None = None
    id_field: str = "job_id"
    status_field: str = "status"
    done_values: list[str] = Field(default_factory=lambda: ["done", "completed", "succeeded"])
    failed_values: list[str] = Field(default_factory=lambda: ["failed", "error", "cancelled"])
    result_field: str = "result"
    poll_interval: float = Field(default=2.0, gt=0)
    max_result_chars: int = Field(default=4000, ge=100)
    timeout: float = Field(default=3600.0, gt=0)


class McpServerConfig(_Strict):
    """One entry of ``mcpServers``."""

    enabled: bool = True
    type: Literal["stdio", "sse", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    oauth: OAuthConfig | None = None
    credentials: UserCredentials = Field(default_factory=UserCredentials)
    description: str | None = None
    tool_name_prefix: bool | str = True
    include_tools: list[str] | None = None
    exclude_tools: list[str] = Field(default_factory=list)
    tool_call_timeout: float = Field(default=60.0, gt=0)
    session_init_timeout: float = Field(default=30.0, gt=0)
    routing: RoutingHints = Field(default_factory=RoutingHints)
    tasks: TaskTools | None = None

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            check_header(name, value)
        return headers

    @field_validator("tool_name_prefix")
    @classmethod
    def _prefix(cls, value: bool | str) -> bool | str:
        if isinstance(value, str) and not re.match(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$", value):
            raise ValueError("a custom prefix must start with a letter and use letters, digits, _ or -")
        return value

    @model_validator(mode="after")
    def _transport_keys(self) -> McpServerConfig:
        if self.type == "stdio":
            if not self.command:
                raise ValueError("a stdio server needs 'command'")
            if self.url or self.headers or self.oauth:
                raise ValueError("'url', 'headers' and 'oauth' are for sse/http servers, not stdio")
        else:
            if not self.url:
                raise ValueError(f"a {self.type} server needs 'url'")
            _check_url(self.url)
            if self.command or self.args:
                raise ValueError(f"'command' and 'args' are for stdio servers, not {self.type}")
        return self

    def prefix(self, server: str) -> str:
        """The name prefix of this server's tools (``""`` when prefixing is off)."""
        if self.tool_name_prefix is True:
            return f"{server}_"
        if isinstance(self.tool_name_prefix, str):
            return f"{self.tool_name_prefix}_"
        return ""


def _check_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValueError("must be an http:// or https:// URL")
    return value


@dataclass(frozen=True)
class ConfigSignature:
    """What the MCP catalog cache is keyed on: the file's resolved path and content hash."""

    path: str
    digest: str


@dataclass(frozen=True)
class ServerEntry:
    """A configured server: its validated config, or why it is unusable."""

    name: str
    config: McpServerConfig | None
    error: str | None = None

    @property
    def enabled(self) -> bool:
        return self.config is not None and self.config.enabled


@dataclass(frozen=True)
class McpConfigSnapshot:
    """The MCP servers of one version of the file.

    ``problem`` is why the file gives no servers at all (malformed JSON, the wrong types,
    unreadable), naming the file: runs go on without MCP and say so in a notice, while a
    listing of the servers raises it (:meth:`check`) rather than show an empty config.
    """

    signature: ConfigSignature
    servers: dict[str, ServerEntry] = field(default_factory=dict)
    problem: ConfigError | None = field(default=None, compare=False)

    @property
    def file_error(self) -> str | None:
        return str(self.problem) if self.problem is not None else None

    def check(self) -> None:
        """Raise :attr:`problem`, if any (a ``ConfigError`` naming the file).

        A fresh exception each time: the snapshot is cached, and one object raised again and
        again would carry every earlier traceback with it.
        """
        if self.problem is not None:
            raise ConfigError(self.problem.problem, file=self.problem.file, key=self.problem.key)

    def enabled(self) -> dict[str, McpServerConfig]:
        return {n: e.config for n, e in self.servers.items() if e.enabled and e.config is not None}


def read_signature(path: Path) -> tuple[ConfigSignature, bytes | None]:
    """The file's signature and bytes (None when it does not exist)."""
    resolved = os.path.realpath(path)
    try:
        data = Path(resolved).read_bytes()
    except FileNotFoundError:
        return ConfigSignature(resolved, "absent"), None
    except OSError as exc:
        return ConfigSignature(resolved, f"unreadable:{exc.errno}"), None
    return ConfigSignature(resolved, hashlib.sha256(data).hexdigest()), data


def parse_snapshot(signature: ConfigSignature, data: bytes | None, *,
                   env: Mapping[str, str] | None = None) -> McpConfigSnapshot:
    """Validate every server entry of the file's bytes (each on its own)."""
    if data is None:
        missing = signature.digest.startswith("unreadable")
        return McpConfigSnapshot(signature, problem=ConfigError("the file cannot be read", file=signature.path)
                                 if missing else None)
    try:
        raw = json.loads(data.decode("utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return McpConfigSnapshot(signature, problem=ConfigError(f"malformed JSON: {exc}", file=signature.path))
    if not isinstance(raw, dict):
        return McpConfigSnapshot(signature, problem=ConfigError("the top level must be a JSON object",
                                                                file=signature.path))
    servers = raw.get(SERVERS_KEY, {})
    if not isinstance(servers, dict):
        return McpConfigSnapshot(signature, problem=ConfigError(f"'{SERVERS_KEY}' must be an object of server "
                                                                "entries", file=signature.path, key=SERVERS_KEY))
    env = os.environ if env is None else env
    entries = {name: parse_entry(name, value, file=signature.path, env=env) for name, value in servers.items()}
    return McpConfigSnapshot(signature, entries)


def config_problem(path: Path) -> ConfigError | None:
    """Why ``path`` gives no MCP servers at all (malformed, wrong types, unreadable), else None."""
    return parse_snapshot(*read_signature(path)).problem


def parse_entry(name: str, value: Any, *, file: str | None, env: Mapping[str, str] | None) -> ServerEntry:
    """Validate one server entry; a problem becomes a ``ServerEntry`` with ``error`` (file + key)."""
    try:
        return ServerEntry(name, validate_entry(name, value, file=file, env=env))
    except ConfigError as exc:
        return ServerEntry(name, None, str(exc))


def validate_entry(name: str, value: Any, *, file: str | None, env: Mapping[str, str] | None) -> McpServerConfig:
    """Validate one server entry.

    Args:
        env: Environment for ``$VAR`` values; None leaves them as written (for checking an
            edit whose variables live on the server, not in the editor's process).

    Raises:
        ConfigError: naming the file and the key (``mcpServers.<name>.<field>``).
    """
    key = f"{SERVERS_KEY}.{name}"
    if not SERVER_NAME.match(name):
        raise ConfigError("server names start with a letter and use letters, digits, _ or - "
                          "(at most 32 characters)", file=file, key=key)
    if not isinstance(value, dict):
        raise ConfigError("a server entry must be an object", file=file, key=key)
    data = interpolate(value, env=env, file=file, key=key) if env is not None else value
    try:
        return McpServerConfig.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, file=file, key=key) from None


def _validation_error(exc: ValidationError, *, file: str | None, key: str) -> ConfigError:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    problem = ("unknown key (check the spelling)" if first["type"] == "extra_forbidden"
               else first["msg"].removeprefix("Value error, "))
    return ConfigError(problem, file=file, key=f"{key}.{loc}" if loc else key)


def read_document(path: Path) -> dict[str, Any]:
    """The whole JSON document (``{}`` when absent), for editing through the API.

    Raises:
        ConfigError: the file exists but is not a JSON object.
    """
    return read_json_object(path)


def write_document(path: Path, doc: dict[str, Any]) -> None:
    """Replace the file atomically (readers see the old or the new version, never half)."""
    atomic_write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n", mode=0o644)

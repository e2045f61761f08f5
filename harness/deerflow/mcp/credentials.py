"""Credentials for MCP sessions: static headers/env, per-user secrets and OAuth tokens.

Authority crosses into an MCP server along one explicit path, resolved per
(server, user) when a session opens:

* the server's own ``headers`` / ``env`` from the config (its shared identity);
* with ``credentials.scope: user``, the user's own entry from their
  :class:`UserCredentialStore` (files, or the team's PostgreSQL) — and **no fallback**: a user without one gets
  :class:`CredentialMissing`, never the shared identity;
* with ``oauth``, a :class:`TokenProvider` that fetches a token from the token
  endpoint (client credentials, or a refresh token — the user's own under
  ``scope: user``), caches it, refreshes it before it expires and injects it
  into every HTTP request through :class:`BearerAuth` (a 401 forces one refresh).

Every header value is checked for CR/LF before use, and the error never
echoes the value.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2

from deerflow.config.paths import HomePaths
from deerflow.mcp.config import McpServerConfig, OAuthConfig, check_header
from deerflow.persistence.files import atomic_write_text
from deerflow.persistence.offloop import off_loop
from deerflow.persistence.sqlite import SqliteStore

CREDENTIALS_FILE = "mcp-credentials.json"


class CredentialError(Exception):
    """A credential problem; the message names the server, never a secret."""


class CredentialMissing(CredentialError):
    """The user has no credential for a server that requires one (fail closed)."""


@dataclass(frozen=True)
class UserCredential:
    """One user's secrets for one server."""

    token: str | None = None
    refresh_token: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def secrets(self) -> list[str]:
        return [s for s in (self.token, self.refresh_token, *self.headers.values(), *self.env.values()) if s]


class UserCredentialStore:
    """Per-user credentials: files under the user's folder, or a table when ``storage.url`` is PostgreSQL.

    On SQLite (one machine) each user's credentials are
    ``{users_root}/<user>/mcp-credentials.json`` (mode 0600).  With a team database they are
    rows of ``mcp_credentials`` (:class:`CredentialTable`), so a user's second server, on
    another machine, uses the same credentials.  Database rows are read off the event loop:
    :meth:`load` (awaited when a run starts) caches the user's rows, and :meth:`get` answers
    from that cache; :meth:`aset` writes through.
    """

    def __init__(self, home: HomePaths) -> None:
        self.home = home
        self.table = CredentialTable(home.database_url) if home.database_url else None
        self._cache: dict[str, dict[str, UserCredential]] = {}

    def _path(self, user_id: str) -> Path:
        return self.home.user_dir(user_id) / CREDENTIALS_FILE

    def _read(self, user_id: str) -> dict[str, Any]:
        try:
            data = json.loads(self._path(user_id).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError) as exc:
            raise CredentialError(f"the credential file of user {user_id!r} is unreadable ({type(exc).__name__})") \
                from None
        return data if isinstance(data, dict) else {}

    async def load(self, user_id: str) -> None:
        """Read the user's credentials from the database (off the loop); a no-op for files."""
        if self.table is not None:
            self._cache[user_id] = await self.table.aio.for_user(user_id)

    def get(self, user_id: str, server: str) -> UserCredential | None:
        if self.table is not None:
            return self._cache.get(user_id, {}).get(server)
        return _credential(self._read(user_id).get(server))

    async def aset(self, user_id: str, server: str, credential: UserCredential | None) -> None:
        """Store (or, with None, remove) a user's credential for a server, off the event loop."""
        if credential is not None:
            for name, value in credential.headers.items():
                check_header(name, value)
        if self.table is None:  # DiskUnavailable (503 "try again shortly") past the deadline
            await off_loop(self.set, user_id, server, credential,
                           what=f"saving the credential for MCP server {server!r}")
            return
        await self.table.aio.put(user_id, server, None if credential is None else json.dumps(_entry(credential)))
        await self.load(user_id)

    def set(self, user_id: str, server: str, credential: UserCredential | None) -> None:
        """Store (or, with None, remove) a user's credential for a server (sync callers: the CLI, files)."""
        if self.table is not None:
            self.table.put(user_id, server, None if credential is None else json.dumps(_entry(credential)))
            self._cache.pop(user_id, None)
            return
        data = self._read(user_id)
        if credential is None:
            data.pop(server, None)
        else:
            for name, value in credential.headers.items():
                check_header(name, value)
            data[server] = _entry(credential)
        atomic_write_text(self._path(user_id), json.dumps(data, indent=2), mode=0o600)


class CredentialTable(SqliteStore):
    """``mcp_credentials`` in the team's PostgreSQL (one JSON entry per user and server)."""

    schema = ("CREATE TABLE IF NOT EXISTS mcp_credentials (user_id TEXT NOT NULL, server TEXT NOT NULL, "
              "entry TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (user_id, server));")
    schema_part = "mcp_credentials"
    loop_guarded = True  # async code uses ``.aio``

    def for_user(self, user_id: str) -> dict[str, UserCredential]:
        with self._connect() as db:
            rows = db.execute("SELECT server, entry FROM mcp_credentials WHERE user_id=?", (user_id,)).fetchall()
        found = {row["server"]: _credential(json.loads(row["entry"])) for row in rows}
        return {server: credential for server, credential in found.items() if credential is not None}

    def put(self, user_id: str, server: str, entry: str | None) -> None:
        with self._connect() as db:
            if entry is None:
                db.execute("DELETE FROM mcp_credentials WHERE user_id=? AND server=?", (user_id, server))
            else:
                db.execute("INSERT INTO mcp_credentials (user_id, server, entry, updated_at) VALUES (?,?,?,?)"
                           " ON CONFLICT (user_id, server) DO UPDATE SET entry=excluded.entry,"
                           " updated_at=excluded.updated_at", (user_id, server, entry, time.time()))


def _entry(credential: UserCredential) -> dict[str, Any]:
    return {k: v for k, v in {"token": credential.token, "refresh_token": credential.refresh_token,
                              "headers": credential.headers, "env": credential.env}.items() if v}


def _credential(entry: Any) -> UserCredential | None:
    if not isinstance(entry, dict):
        return None
    return UserCredential(token=entry.get("token"), refresh_token=entry.get("refresh_token"),
                          headers=dict(entry.get("headers") or {}), env=dict(entry.get("env") or {}))


class TokenProvider:
    """OAuth access tokens for one (server, identity), cached and refreshed before expiry."""

    def __init__(self, server: str, oauth: OAuthConfig, *, refresh_token: str | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_secret: Callable[[str], None] | None = None) -> None:
        self.server = server
        self._on_secret = on_secret
        self.oauth = oauth
        self.refresh_token = refresh_token or oauth.refresh_token
        self._clock = clock
        self._token: str | None = None
        self._expires_at = 0.0
        self._lock = asyncio.Lock()
        self.fetches = 0

    def _fresh(self) -> bool:
        return self._token is not None and self._clock() < self._expires_at - self.oauth.refresh_skew_seconds

    async def token(self, *, force: bool = False) -> str:
        """A valid access token (fetched when absent, expiring soon or ``force``d).

        Raises:
            CredentialError: the token endpoint refused or could not be reached.
        """
        async with self._lock:
            if force or not self._fresh():
                await self._fetch()
            assert self._token is not None
            return self._token

    def invalidate(self) -> None:
        self._token = None

    async def _fetch(self) -> None:
        form = {"grant_type": self.oauth.grant_type}
        if self.oauth.grant_type == "refresh_token":
            if not self.refresh_token:
                raise CredentialMissing(f"server {self.server!r} needs a refresh token and none is configured")
            form["refresh_token"] = self.refresh_token
        optional = {"client_id": self.oauth.client_id, "client_secret": self.oauth.client_secret,
                    "scope": self.oauth.scope, "audience": self.oauth.audience}
        form.update({k: v for k, v in optional.items() if v})
        try:
            async with httpx.AsyncClient(timeout=30.0) as client:
                response = await client.post(self.oauth.token_url, data=form)
        except httpx.HTTPError as exc:
            raise CredentialError(f"the token endpoint of server {self.server!r} is unreachable "
                                  f"({type(exc).__name__})") from None
        if response.status_code != 200:
            raise CredentialError(f"the token endpoint of server {self.server!r} refused the credentials "
                                  f"(HTTP {response.status_code})")
        body = _json(response)
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise CredentialError(f"the token endpoint of server {self.server!r} returned no access_token")
        check_header("Authorization", token)
        if self._on_secret is not None:
            self._on_secret(token)
        self._token = token
        self._expires_at = self._clock() + float(body.get("expires_in") or 3600)
        if isinstance(body.get("refresh_token"), str):
            self.refresh_token = body["refresh_token"]
        self.fetches += 1


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


class BearerAuth(httpx2.Auth):
    """Injects the provider's token into each request; a 401 triggers one forced refresh."""

    def __init__(self, provider: TokenProvider, *, header: str = "Authorization", scheme: str | None = "Bearer") -> None:
        self.provider = provider
        self.header = header
        self.scheme = scheme

    def _value(self, token: str) -> str:
        return f"{self.scheme} {token}" if self.scheme else token

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers[self.header] = self._value(await self.provider.token())
        response = yield request
        if response.status_code == 401:
            request.headers[self.header] = self._value(await self.provider.token(force=True))
            yield request


@dataclass
class ResolvedCredentials:
    """What a session to one server, for one user, carries."""

    headers: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    auth: httpx2.Auth | None = None
    secrets: list[str] = field(default_factory=list)

    async def ready(self) -> None:
        """Fetch the OAuth token up front, so a refused credential is reported as such.

        Raises:
            CredentialError: the token endpoint refused or is unreachable.
        """
        if isinstance(self.auth, BearerAuth):
            await self.auth.provider.token()


def resolve_credentials(server: str, config: McpServerConfig, user_id: str, *, store: UserCredentialStore,
                        providers: dict[tuple[str, str], TokenProvider],
                        on_secret: Callable[[str], None] | None = None) -> ResolvedCredentials:
    """The headers, env and auth a session of ``user_id`` to ``server`` uses.

    ``providers`` caches token providers by (server, identity) so tokens outlive sessions.

    Raises:
        CredentialMissing: ``scope: user`` and the user has no credential for the server.
        CredentialError: a credential value is malformed (CR/LF in a header...).
    """
    resolved = ResolvedCredentials(headers=dict(config.headers), env=dict(config.env))
    user_scoped = config.credentials.scope == "user"
    mine = store.get(user_id, server) if user_scoped else None
    if user_scoped and mine is None:
        raise CredentialMissing(f"server {server!r} needs your own credential and user {user_id!r} has none; "
                                f"add it with client.set_mcp_credential({server!r}, token=...)")
    if mine is not None:
        resolved.env.update(mine.env)
        resolved.headers.update(mine.headers)
        resolved.secrets += mine.secrets()
        if mine.token and config.oauth is None:
            scheme = config.credentials.scheme
            resolved.headers[config.credentials.header] = f"{scheme} {mine.token}" if scheme else mine.token
    if config.oauth is not None:
        identity = user_id if user_scoped else ""
        key = (server, identity)
        if key not in providers:
            providers[key] = TokenProvider(server, config.oauth, on_secret=on_secret,
                                           refresh_token=mine.refresh_token if mine else None)
        resolved.auth = BearerAuth(providers[key], header=config.credentials.header,
                                   scheme=config.credentials.scheme)
    for name, value in resolved.headers.items():
        try:
            check_header(name, value)
        except ValueError as exc:
            raise CredentialError(f"server {server!r}: {exc}") from None
    return resolved

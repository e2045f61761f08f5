"""The SQL seam of durable batches: one small backend per database, portable SQL above it.

The batch store (:mod:`.store`) writes plain SQL that both SQLite and
PostgreSQL accept: ``TEXT``/``INTEGER``/``DOUBLE PRECISION`` columns, ``?``
placeholders (rewritten to ``%s`` for drivers that use the ``format``
paramstyle), no ``INSERT OR REPLACE``/``ON CONFLICT``, no ``RETURNING``.
Concurrency control is the database's own: a claim is one
``UPDATE ... WHERE status='pending'`` whose row count says who won.

* :class:`SqliteBackend` — the default, a file under ``$DEERFLOW_HOME``;
  WAL mode and a connection per thread, so several processes
  (the server, ``deerflow batches worker``) can share it.  ``synchronous=NORMAL``:
  a committed claim or result survives a killed process (WAL); a power cut
  may lose the last commits, never consistency — an item then simply runs
  again once its lease expires.
* :class:`PostgresBackend` — for multi-user deployments; needs the
  optional ``psycopg`` driver (a clear error says so when it is missing).
  At the default ``READ COMMITTED`` level two claims of one row serialize on
  its row lock and the second re-checks its ``WHERE`` against the committed
  row, so it matches nothing; the schema is created under an advisory lock.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deerflow.config.paths import HomePaths
from deerflow.config.schema import BatchesConfig
from deerflow.errors import ConfigError
from deerflow.persistence.sqlite import switch_to_wal

Row = dict[str, Any]
_PLACEHOLDER = re.compile(r"\?")
_SCHEMA_LOCK = 0x64656572  # any constant shared by every process creating the batch schema


class SqlBackend(ABC):
    """Runs portable SQL (``?`` placeholders) on one database."""

    name: str = "sql"

    @abstractmethod
    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A DB-API cursor inside one transaction (committed on success, rolled back on error)."""

    def execute(self, cursor: Any, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the affected row count."""
        cursor.execute(self.translate(sql), tuple(params))
        return int(cursor.rowcount or 0)

    def query(self, cursor: Any, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run a query; rows as dicts keyed by column name."""
        cursor.execute(self.translate(sql), tuple(params))
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def translate(self, sql: str) -> str:
        """Adapt placeholders to the driver (identity for ``?`` drivers)."""
        return sql

    def lock_schema(self, cursor: Any) -> None:  # noqa: B027 - optional hook: SQLite's DDL needs no lock
        """Serialize schema creation with other processes for the rest of this transaction."""

    def describe(self) -> str:
        return self.name

    def close(self) -> None:  # noqa: B027 - optional hook: backends without pooled connections keep it
        """Release pooled connections (nothing to do for per-transaction connections)."""


class _ThreadConnections:
    """One open connection per thread, reopened when it was closed, all closed by :meth:`close`.

    Opening a connection is the expensive part of a short transaction (a WAL
    checkpoint for SQLite, a new server process for PostgreSQL), and a
    connection must not be shared by two threads at once; the worker runs its
    store calls on a small thread pool, so a connection per thread is a handful.
    """

    def __init__(self, connect: Callable[[], Any], *, usable: Callable[[Any], bool] = lambda _: True) -> None:
        self._connect = connect
        self._usable = usable
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[Any] = []

    def get(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or not self._usable(conn):
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._open.append(conn)
        return conn

    def close(self) -> None:
        """Close every connection opened so far (idempotent)."""
        with self._lock:
            connections, self._open = self._open, []
        for conn in connections:
            conn.close()
        self._local = threading.local()


class SqliteBackend(SqlBackend):
    """SQLite file in WAL mode, one connection per thread (safe across threads and processes).

    Connections are kept open: closing the last connection of a WAL database
    checkpoints it, which made a claim cost several milliseconds.
    """

    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._connections = _ThreadConnections(self._connect)
        switch_to_wal(self._connections.get())

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        db.execute("PRAGMA synchronous=NORMAL")  # WAL: survives a killed process; power loss may drop the tail
        return db

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        db = self._connections.get()
        with db:
            yield db.cursor()

    def close(self) -> None:
        """Close every connection this backend opened (idempotent)."""
        self._connections.close()

    def describe(self) -> str:
        return f"sqlite:{self.path}"


class PostgresBackend(SqlBackend):
    """PostgreSQL through ``psycopg`` (the ``postgres`` extra), one connection per thread.

    Connections run in autocommit mode with an explicit transaction around each
    operation.  A connection the server dropped is replaced on the thread's next
    operation (the operation that saw it drop fails once).
    """

    name = "postgres"

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise ConfigError("the postgres batch queue needs the psycopg driver: "
                              "the 'postgres' extra (pip install '.[postgres]' in a clone)", key="subagents.batches.backend") from None
        self.url = url
        self._connections = _ThreadConnections(lambda: psycopg.connect(url, autocommit=True),
                                               usable=lambda conn: not conn.closed)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        conn = self._connections.get()
        with conn.transaction(), conn.cursor() as cursor:
            yield cursor

    def close(self) -> None:
        """Close every connection this backend opened (idempotent)."""
        self._connections.close()

    def translate(self, sql: str) -> str:
        return _PLACEHOLDER.sub("%s", sql.replace("%", "%%"))

    def lock_schema(self, cursor: Any) -> None:
        """Take a transaction-scoped advisory lock.

        ``CREATE TABLE IF NOT EXISTS`` is not atomic in PostgreSQL: two processes
        creating the schema at once (a server and a worker on a fresh database)
        would otherwise fail with a unique violation in the system catalog.
        """
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))

    def describe(self) -> str:
        return "postgres"


def open_backend(config: BatchesConfig, home: HomePaths) -> SqlBackend:
    """The backend named by ``subagents.batches``.

    Raises:
        ConfigError: postgres without a URL or without its driver.
    """
    if config.backend == "postgres":
        if not config.postgres_url:
            raise ConfigError("the postgres batch queue needs subagents.batches.postgres_url",
                              key="subagents.batches.postgres_url")
        return PostgresBackend(config.postgres_url)
    path = Path(config.sqlite_path).expanduser() if config.sqlite_path else home.home / "batches.db"
    return SqliteBackend(path)


__all__ = ["PostgresBackend", "Row", "SqlBackend", "SqliteBackend", "open_backend"]

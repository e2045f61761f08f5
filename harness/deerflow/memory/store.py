"""Opening LangGraph's ``BaseStore`` for memory, from the ``storage`` config.

SQLite (``SqliteStore``) at ``$DEERFLOW_HOME/memory.db`` by default (or next to
``storage.sqlite_path``); ``PostgresStore`` when the teams storage setting
(``storage.checkpointer: postgres``) moves shared state to PostgreSQL.  No
home-made store: the store is LangGraph's, this module only opens it.
"""

from __future__ import annotations

import sqlite3
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path

from langgraph.store.base import BaseStore

from deerflow.config.schema import StorageConfig
from deerflow.errors import ConfigError
from deerflow.persistence.sqlite import StorageError, as_storage_error, file_problem


def memory_db_path(storage: StorageConfig, home: Path) -> Path:
    """Where SQLite memory lives: beside a configured checkpoint file, else in the home."""
    if storage.sqlite_path:
        return Path(storage.sqlite_path).expanduser().parent / "memory.db"
    return home / "memory.db"


def open_store(storage: StorageConfig, *, home: Path, stack: ExitStack | AsyncExitStack) -> BaseStore:
    """Open (and set up) the memory store; ``stack`` closes it.

    Raises:
        StorageError: the SQLite file is corrupt, unreadable or not a file.
        ConfigError: postgres without its URL or package.
    """
    if storage.checkpointer == "postgres":
        return _open_postgres(storage, stack)
    from langgraph.store.sqlite import SqliteStore

    path = memory_db_path(storage, home)
    problem = file_problem(path)
    if problem is not None:
        raise StorageError(path, problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    except OSError as exc:
        raise StorageError(path, f"cannot be opened ({exc.strerror or exc})") from None
    stack.callback(conn.close)
    try:
        conn.execute("PRAGMA busy_timeout=5000")  # the CLI and a server may share the file
        conn.execute("PRAGMA journal_mode=WAL")
        store = SqliteStore(conn)
        store.setup()
    except sqlite3.DatabaseError as exc:
        raise as_storage_error(path, exc) from None
    return store


def _open_postgres(storage: StorageConfig, stack: ExitStack | AsyncExitStack) -> BaseStore:
    if not storage.postgres_url:
        raise ConfigError("postgres storage needs storage.postgres_url", key="storage.postgres_url")
    try:
        from langgraph.store.postgres import PostgresStore
    except ModuleNotFoundError:
        raise ConfigError("postgres memory needs: pip install langgraph-checkpoint-postgres",
                          key="storage.checkpointer") from None
    store = stack.enter_context(PostgresStore.from_conn_string(storage.postgres_url))
    store.setup()
    return store

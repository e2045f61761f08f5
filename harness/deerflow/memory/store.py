"""Opening LangGraph's ``BaseStore`` for memory, from the ``storage`` config.

SQLite (``SqliteStore``) at ``$DEERFLOW_HOME/memory.db`` by default (or next to
``storage.sqlite_path``); ``PostgresStore`` when the teams storage setting
(``storage.url: postgresql://...``) moves shared state to PostgreSQL
(:mod:`deerflow.persistence.postgres`: a pool, schema setup under an advisory lock).  No
home-made store: the store is LangGraph's, this module only opens it.
"""

from __future__ import annotations

import fcntl
import sqlite3
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path

from langgraph.store.base import BaseStore

from deerflow.config.schema import StorageConfig
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
        DatabaseUnavailable: PostgreSQL did not answer within ``storage.connect_timeout``.
    """
    if storage.checkpointer == "postgres":
        from deerflow.persistence.postgres import open_store_pg

        return open_store_pg(storage, stack)
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
        with _setup_lock(path):
            store.setup()
    except sqlite3.DatabaseError as exc:
        raise as_storage_error(path, exc) from None
    return store


@contextmanager
def _setup_lock(path: Path) -> Iterator[None]:
    """Serialise ``SqliteStore.setup()`` across processes (``flock`` on the database file).

    Its migrations are not idempotent when two processes run them at once (both
    ``ALTER TABLE ... ADD COLUMN``: "duplicate column name"), and the CLI, a server and
    a worker may start together.  ``flock`` is separate from SQLite's own byte-range
    locks, so it only orders the setups; the second finds the schema current.
    """
    with open(path, "rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

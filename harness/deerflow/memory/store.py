"""Opening LangGraph's ``BaseStore`` for memory, from the ``storage`` config.

SQLite (``SqliteStore``) at ``$DEERFLOW_HOME/memory.db`` by default (or next to
``storage.sqlite_path``); ``PostgresStore`` when the teams storage setting
(``storage.url: postgresql://...``) moves shared state to PostgreSQL
(:mod:`deerflow.persistence.postgres`: a pool, schema setup under an advisory lock).  No
home-made store: the store is LangGraph's, this module only opens it.
"""

from __future__ import annotations

import fcntl
import importlib
import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, IndexConfig

from deerflow.config.schema import MemoryEmbeddingConfig
from deerflow.config.storage import StorageConfig
from deerflow.errors import ConfigError
from deerflow.persistence.sqlite import StorageError, as_storage_error, file_problem, switch_to_wal

logger = logging.getLogger(__name__)


def memory_db_path(storage: StorageConfig, home: Path) -> Path:
    """Where SQLite memory lives: beside a configured checkpoint file, else in the home."""
    if storage.sqlite_path:
        return Path(storage.sqlite_path).expanduser().parent / "memory.db"
    return home / "memory.db"


def open_store(storage: StorageConfig, *, home: Path, stack: ExitStack | AsyncExitStack,
               embedding: MemoryEmbeddingConfig | None = None) -> BaseStore:
    """Open (and set up) the memory store; ``stack`` closes it.

    With ``embedding`` the store gets LangGraph's own index config (``{"dims", "embed",
    "fields": ["text"]}``): facts are embedded when written and searched by meaning.
    SQLite needs its ``sqlite-vec`` extension loaded for that, which some Python builds
    cannot do (pyenv's, macOS python.org's); then ``pysqlite3`` (the ``memory-search``
    extra) is used, and without it memory ranks by words, with a warning.

    Raises:
        StorageError: the SQLite file is corrupt, unreadable or not a file.
        ConfigError: postgres without its URL or package; an embedding class that cannot be loaded.
        DatabaseUnavailable: PostgreSQL did not answer within ``storage.connect_timeout``.
    """
    index = index_config(embedding) if embedding is not None else None
    if storage.checkpointer == "postgres":
        from deerflow.persistence.postgres import open_store_pg

        return open_store_pg(storage, stack, index=index)
    path = memory_db_path(storage, home)
    problem = file_problem(path)
    if problem is not None:
        raise StorageError(path, problem)
    if index is None and not path.exists():  # a new home: open when there is something to read or write
        from deerflow.memory.lazy_store import StoreOnFirstUse

        lazy = StoreOnFirstUse(path, lambda: _open_sqlite(path, index, stack))
        stack.callback(lazy.close)
        return lazy
    return _open_sqlite(path, index, stack)


def _open_sqlite(path: Path, index: IndexConfig | None, stack: ExitStack | AsyncExitStack) -> BaseStore:
    """Connect to, and set up, the SQLite memory store at ``path`` (see :func:`open_store`)."""
    from langgraph.store.sqlite import SqliteStore

    driver = _driver(vectors=index is not None)
    if index is not None and driver is None:
        logger.warning("memory: this Python's sqlite3 cannot load sqlite-vec, so facts are ranked by words; "
                       "for semantic search: pip install 'deerflow[memory-search]'")
        index, driver = None, sqlite3
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = driver.connect(str(path), check_same_thread=False, isolation_level=None)
    except OSError as exc:
        raise StorageError(path, f"cannot be opened ({exc.strerror or exc})") from None
    stack.callback(conn.close)
    try:
        conn.execute("PRAGMA busy_timeout=5000")  # the CLI and a server may share the file
        switch_to_wal(conn)
        store = SqliteStore(conn, index=index)  # conn: sqlite3's or pysqlite3's (the same API)
        with _setup_lock(path):
            store.setup()
    except (sqlite3.DatabaseError, driver.DatabaseError) as exc:
        raise as_storage_error(path, exc) from None
    return store


def index_config(embedding: MemoryEmbeddingConfig) -> IndexConfig:
    """LangGraph's store index config for ``embedding``: the text of each fact is embedded.

    Raises:
        ConfigError: the class cannot be imported or built.
    """
    module_name, _, attr = embedding.use.partition(":")
    key = "memory.embedding.use"
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load the embedding class {embedding.use!r} ({exc})", key=key) from None
    try:
        embeddings = cls(**embedding.kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot build {embedding.use!r}: {exc}", key="memory.embedding.kwargs") from None
    return {"dims": embedding.dims, "embed": embeddings, "fields": ["text"]}


def _driver(*, vectors: bool) -> Any:
    """The sqlite3 module to connect with (None: vectors wanted and no module can load extensions)."""
    if not vectors or hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        import pysqlite3.dbapi2 as driver
    except ImportError:
        return None
    return driver


@contextmanager
def _setup_lock(path: Path) -> Iterator[None]:
    """Serialise ``SqliteStore.setup()`` across processes (``flock`` on ``<db>.setup-lock``).

    Its migrations are not idempotent when two processes run them at once (both
    ``ALTER TABLE ... ADD COLUMN``: "duplicate column name"), and the CLI, a server and
    a worker may start together.  The lock is a file of its own, never a descriptor of the
    database: POSIX locks belong to the process and the file, so closing *any* descriptor of
    the database drops the shared lock this process's connections hold on it in WAL mode,
    for good; another process's last close would then take the database as unused,
    checkpoint it and delete the WAL under them.
    """
    fd = os.open(path.with_name(path.name + ".setup-lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock

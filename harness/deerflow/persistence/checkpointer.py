"""The LangGraph checkpointer a host uses, from ``storage`` config."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import AsyncExitStack
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from deerflow.config.storage import StorageConfig
from deerflow.persistence.sqlite import (
    StorageError,
    as_storage_error,
    ensure_wal_file,
    file_problem,
)


async def open_checkpointer(storage: StorageConfig, *, default_path: Path, stack: AsyncExitStack) -> BaseCheckpointSaver:
    """Open the configured checkpointer; ``stack`` closes it.

    SQLite (default) lives at ``storage.sqlite_path`` or ``default_path``; with a
    ``postgresql://`` ``storage.url`` it is LangGraph's ``AsyncPostgresSaver`` on a pool
    (:mod:`deerflow.persistence.postgres`).  Either way the graph's channels are the
    project's (the ``messages`` ``DeltaChannel``), so the storage bound holds on both.

    Raises:
        StorageError: the SQLite file is corrupt, truncated, unreadable or not a file.
        DatabaseUnavailable: PostgreSQL did not answer within ``storage.connect_timeout``.
    """
    if storage.checkpointer == "memory":
        return InMemorySaver()
    if storage.checkpointer == "postgres":
        from deerflow.persistence.postgres import open_checkpointer_pg

        return await open_checkpointer_pg(storage, stack)
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = sqlite_checkpoint_path(storage, default_path)
    problem = file_problem(path)
    if problem is not None:
        raise StorageError(path, problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(ensure_wal_file, path)  # new files: retried while another process switches too
        conn = aiosqlite.connect(str(path))
        _daemon_worker(conn)
        await conn
    except OSError as exc:
        raise StorageError(path, f"cannot be opened ({exc.strerror or exc})") from None
    except sqlite3.DatabaseError as exc:
        raise as_storage_error(path, exc) from None
    stack.push_async_callback(conn.close)
    try:
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
    except sqlite3.DatabaseError as exc:
        raise as_storage_error(path, exc) from None
    return saver


def sqlite_checkpoint_path(storage: StorageConfig, default_path: Path) -> Path:
    """Where the SQLite checkpointer keeps its file."""
    return Path(storage.sqlite_path).expanduser() if storage.sqlite_path else default_path



def _daemon_worker(conn: object) -> None:
    """Let the process exit even if the connection is never closed (the worker thread is daemonic).

    aiosqlite runs each connection on a non-daemon thread that waits for work
    until ``close()``: a server whose loop ended without its cleanup (SIGINT
    without a terminal) could never exit.  Writes are committed per operation,
    so a daemon thread ending with the process loses nothing committed.
    """
    thread = getattr(conn, "_thread", None)
    if thread is not None and not thread.is_alive():
        thread.daemon = True

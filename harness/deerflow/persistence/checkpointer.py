"""The LangGraph checkpointer a host uses, from ``storage`` config."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from deerflow.config.schema import StorageConfig
from deerflow.errors import ConfigError


async def open_checkpointer(storage: StorageConfig, *, default_path: Path, stack: AsyncExitStack) -> BaseCheckpointSaver:
    """Open the configured checkpointer; ``stack`` closes it.

    SQLite (default) lives at ``storage.sqlite_path`` or ``default_path``.
    """
    if storage.checkpointer == "memory":
        return InMemorySaver()
    if storage.checkpointer == "postgres":
        if not storage.postgres_url:
            raise ConfigError("postgres checkpointer needs storage.postgres_url", key="storage.postgres_url")
        try:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        except ModuleNotFoundError:
            raise ConfigError("the postgres checkpointer needs: pip install langgraph-checkpoint-postgres",
                              key="storage.checkpointer") from None
        saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(storage.postgres_url))
        await saver.setup()
        return saver
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = Path(storage.sqlite_path).expanduser() if storage.sqlite_path else default_path
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = await aiosqlite.connect(str(path))
    stack.push_async_callback(conn.close)
    await conn.execute("PRAGMA journal_mode=WAL")
    saver = AsyncSqliteSaver(conn)
    await saver.setup()
    return saver

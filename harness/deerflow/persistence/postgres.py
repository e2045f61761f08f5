"""PostgreSQL for shared state: LangGraph's stock savers on a ``psycopg_pool`` pool.

Nothing here is a storage layer of its own: checkpoints are ``AsyncPostgresSaver`` and
memory is ``PostgresStore`` (``langgraph-checkpoint-postgres``).  This module adds the
three things an operator of several servers needs around them:

* **a pool** (``psycopg_pool``), each connection checked on checkout, so a connection
  the server dropped (restart, failover, idle timeout) is replaced instead of failing
  the next run; its reconnection gives up after a few seconds
  (:data:`~deerflow.persistence.pgsql.RECONNECT_SECONDS`) so the next request tries at
  once, rather than after a backoff that doubles for as long as an outage lasted;
* **a deadline** on connecting: an unreachable database is one clear error at start
  (:class:`DatabaseUnavailable`), never a hang;
* **one line for an outage** (the pools of :func:`_pool_classes`): when a
  saver cannot get a connection, or its connection drops mid-call, the error is
  :class:`~deerflow.persistence.aio.StoreUnavailable` naming the database's host and port,
  libpq's reason and what to check (HTTP 503, CLI exit 75; a run ends with that line),
  not psycopg's ``PoolTimeout: couldn't get a connection after 10.00 sec``;
* **serialised schema setup**: LangGraph's ``setup()`` is idempotent but not safe when
  two processes run it at once (both ``CREATE TABLE IF NOT EXISTS`` the same table, both
  insert migration version 0).  It runs under a PostgreSQL advisory lock held on a
  separate connection, so the second process waits, then finds the schema current.
  The waiter *polls* ``pg_try_advisory_lock`` instead of blocking in ``pg_advisory_lock``:
  a statement blocked in the lock holds a snapshot, and the saver's migrations build
  indexes ``CONCURRENTLY``, which wait for every open snapshot — the two processes
  would wait on each other for ever.

The URL may hold a password: it never appears in an error or a log line here.
"""

from __future__ import annotations

import asyncio
import functools
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from deerflow.config.storage import StorageConfig
from deerflow.errors import ConfigError
from deerflow.persistence import pgsql
from deerflow.persistence.aio import StoreUnavailable
from deerflow.persistence.pgsql import RECONNECT_SECONDS

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.base import IndexConfig
    from langgraph.store.postgres import PostgresStore

SCHEMA_LOCK_KEY = zlib.crc32(b"deerflow.schema-setup")
"""The advisory lock every DeerFlow process takes around LangGraph's ``setup()`` (one key, all parts)."""

SETUP_WAIT_SECONDS = 300.0
"""How long a process waits for another's schema setup (index builds on a big table take a while)."""

_POLL_SECONDS = 0.2
_TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"

INSTALL_HINT = "the 'postgres' extra (pip install '.[postgres]' in a clone) (langgraph-checkpoint-postgres, psycopg-pool)"


class DatabaseUnavailable(StoreUnavailable):
    """The configured PostgreSQL cannot be reached within ``storage.connect_timeout`` (at start).

    Unavailable, not broken: the fix is the URL, the network or the database server,
    and the same command works once it answers (HTTP 503, CLI exit 75, one line naming
    the host and port, never the URL).
    """


def postgres_url(storage: StorageConfig) -> str:
    """The configured PostgreSQL URL.

    Raises:
        ConfigError: PostgreSQL was chosen without a URL.
    """
    if not storage.postgres_url:
        raise ConfigError("PostgreSQL storage needs storage.url: postgresql://USER@HOST/DB", key="storage.url")
    return storage.postgres_url


def _connection_kwargs() -> dict[str, Any]:
    """What LangGraph's Postgres savers require of every connection (see their ``from_conn_string``)."""
    from psycopg.rows import dict_row

    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def _unavailable(storage: StorageConfig, exc: BaseException) -> DatabaseUnavailable:
    found = pgsql.unavailable(postgres_url(storage), exc, waited=storage.connect_timeout, connecting=True)
    return DatabaseUnavailable(found.path, found.problem)


@functools.cache
def _pool_classes() -> tuple[type, type]:
    """``ConnectionPool`` and ``AsyncConnectionPool`` whose failures are one line (:func:`pgsql.unavailable`).

    LangGraph's savers take every connection through ``pool.connection()`` (their
    ``get_connection``), so this one seam covers every call they make: no connection in
    time, or one that dropped mid-call, becomes ``StoreUnavailable``.
    """
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    class DeerFlowPool(ConnectionPool[Any]):
        @contextmanager
        def connection(self, timeout: float | None = None) -> Iterator[Any]:
            try:
                with super().connection(timeout) as conn:
                    yield conn
            except psycopg.OperationalError as exc:  # PoolTimeout included
                raise pgsql.unavailable(str(self.conninfo), exc, waited=timeout or self.timeout) from None

    class DeerFlowAsyncPool(AsyncConnectionPool[Any]):
        @asynccontextmanager
        async def connection(self, timeout: float | None = None) -> AsyncIterator[Any]:
            try:
                async with super().connection(timeout) as conn:
                    yield conn
            except psycopg.OperationalError as exc:  # PoolTimeout included
                raise pgsql.unavailable(str(self.conninfo), exc, waited=timeout or self.timeout) from None

    return DeerFlowPool, DeerFlowAsyncPool


async def open_checkpointer_pg(storage: StorageConfig, stack: AsyncExitStack) -> AsyncPostgresSaver:
    """An ``AsyncPostgresSaver`` on a pool; the schema set up under the advisory lock.

    Raises:
        ConfigError: no URL, or the package is missing.
        DatabaseUnavailable: the database did not answer in time.
    """
    url = postgres_url(storage)
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg_pool import AsyncConnectionPool
    except ModuleNotFoundError:
        raise ConfigError(f"PostgreSQL storage needs: {INSTALL_HINT}", key="storage.url") from None
    pool = _pool_classes()[1](
        url, min_size=1, max_size=storage.pool_max_size, kwargs=_connection_kwargs(), open=False,
        timeout=storage.connect_timeout, check=AsyncConnectionPool.check_connection, name="deerflow-checkpoints",
        reconnect_timeout=RECONNECT_SECONDS, connection_class=pgsql.connection_classes()[1])
    await _open_async(storage, pool.open(wait=True, timeout=storage.connect_timeout))
    stack.push_async_callback(pool.close)
    saver = AsyncPostgresSaver(pool)
    async with _schema_lock_async(storage, url):
        await saver.setup()
    return saver


async def _open_async(storage: StorageConfig, opening: Awaitable[Any]) -> Any:
    import psycopg
    from psycopg_pool import PoolTimeout

    try:
        return await opening
    except (PoolTimeout, psycopg.OperationalError) as exc:
        raise _unavailable(storage, exc) from None


@asynccontextmanager
async def _schema_lock_async(storage: StorageConfig, url: str) -> AsyncIterator[None]:
    """Hold the schema advisory lock on a connection of its own (session-level; released on close)."""
    import psycopg

    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=_whole(storage))
    except psycopg.OperationalError as exc:
        raise _unavailable(storage, exc) from None
    async with conn:
        deadline = time.monotonic() + SETUP_WAIT_SECONDS
        while not _lock_taken(await (await conn.execute(_TRY_LOCK, (SCHEMA_LOCK_KEY,))).fetchone()):
            _check_wait(deadline, url)
            await asyncio.sleep(_POLL_SECONDS)
        try:
            yield
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))


def open_store_pg(storage: StorageConfig, stack: ExitStack | AsyncExitStack, *,
                  index: IndexConfig | None = None) -> PostgresStore:
    """LangGraph's ``PostgresStore`` on a pool, set up under the same advisory lock.

    Synchronous because ``BaseStore`` callers here are (memory runs its work off the loop).

    Raises:
        ConfigError: no URL, or the package is missing.
        DatabaseUnavailable: the database did not answer in time.
    """
    url = postgres_url(storage)
    try:
        from langgraph.store.postgres import PostgresStore
        from langgraph.store.postgres.base import PostgresIndexConfig
        from psycopg_pool import ConnectionPool
    except ModuleNotFoundError:
        raise ConfigError(f"PostgreSQL memory needs: {INSTALL_HINT}", key="storage.url") from None
    import psycopg
    from psycopg_pool import PoolTimeout

    pool = _pool_classes()[0](
        url, min_size=1, max_size=max(2, storage.pool_max_size // 2), kwargs=_connection_kwargs(), open=False,
        timeout=storage.connect_timeout, check=ConnectionPool.check_connection, name="deerflow-memory",
        reconnect_timeout=RECONNECT_SECONDS, connection_class=pgsql.connection_classes()[0])
    try:
        pool.open(wait=True, timeout=storage.connect_timeout)
    except (PoolTimeout, psycopg.OperationalError) as exc:
        raise _unavailable(storage, exc) from None
    stack.callback(pool.close)
    # index: memory's embedding (pgvector), LangGraph's own config
    store = PostgresStore(pool, index=PostgresIndexConfig(**index) if index is not None else None)
    with _schema_lock_sync(storage, url):
        store.setup()
    return store


def _lock_taken(row: tuple[Any, ...] | None) -> bool:
    """``pg_try_advisory_lock``'s answer, from its one row."""
    return bool(row and row[0])


@contextmanager
def _schema_lock_sync(storage: StorageConfig, url: str) -> Iterator[None]:
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=_whole(storage))
    except psycopg.OperationalError as exc:
        raise _unavailable(storage, exc) from None
    with conn:
        deadline = time.monotonic() + SETUP_WAIT_SECONDS
        while not _lock_taken(conn.execute(_TRY_LOCK, (SCHEMA_LOCK_KEY,)).fetchone()):
            _check_wait(deadline, url)
            time.sleep(_POLL_SECONDS)
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))


def _check_wait(deadline: float, url: str) -> None:
    """Give up waiting for another process's schema setup after :data:`SETUP_WAIT_SECONDS`."""
    if time.monotonic() > deadline:
        raise DatabaseUnavailable(pgsql.where(url), f"another process held the schema setup lock for over "
                                  f"{SETUP_WAIT_SECONDS:g} s: is a DeerFlow process stuck starting?")


def _whole(storage: StorageConfig) -> int:
    """libpq's ``connect_timeout`` is whole seconds (minimum 2 is enforced by libpq itself)."""
    return max(2, int(storage.connect_timeout + 0.999))

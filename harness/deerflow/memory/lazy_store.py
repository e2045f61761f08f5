"""A SQLite memory store that is opened when there is something in it, or to write to it.

A new home has no ``memory.db``, and most first runs write no memory: opening LangGraph's
``SqliteStore`` there costs an import of ``langgraph.store.sqlite`` (which imports
``sqlite_vec`` and with it ``numpy``: ~0.1 s CPU) and the store's schema setup, only to
learn that it is empty.  :class:`StoreOnFirstUse` answers reads with "nothing" while the
file does not exist, and opens the real store (through the same opener as an eager open,
so the same checks and setup) for the first write, or for a read once the file exists —
another process (a server, a worker) may have created it meanwhile.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from langgraph.store.base import BaseStore, GetOp, ListNamespacesOp, Op, Result, SearchOp

_READS = (GetOp, SearchOp, ListNamespacesOp)


class StoreOnFirstUse(BaseStore):
    """``BaseStore`` over the store ``opener`` returns, opened on first write or first read of an existing file.

    Only without an embedding index (with one, ``index_config`` must be the opened store's).
    """

    index_config = None

    def __init__(self, path: Path, opener: Callable[[], BaseStore]) -> None:
        self._path = path
        self._opener = opener
        self._store: BaseStore | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def opened(self) -> bool:
        return self._store is not None

    def close(self) -> None:
        """After the host's stack closes (the opened store's connection with it), every use fails."""
        self._closed = True

    def _nothing(self, ops: list[Op]) -> list[Result] | None:
        """The results of ``ops`` without opening anything, when they only read a store that is not there."""
        if self._store is not None or self._closed or not all(isinstance(op, _READS) for op in ops):
            return None
        if self._path.exists():
            return None
        return [None if isinstance(op, GetOp) else [] for op in ops]

    def open_now(self) -> BaseStore:
        """The real store, opened now if it was not (its checks and schema setup run here)."""
        return self._open()

    def _open(self) -> BaseStore:
        with self._lock:
            if self._closed:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            if self._store is None:
                self._store = self._opener()
            return self._store

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        empty = self._nothing(ops)
        return empty if empty is not None else self._open().batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """As the opened store does: SQLite's store is synchronous and refuses ``abatch``."""
        ops = list(ops)
        empty = self._nothing(ops)
        return empty if empty is not None else await self._open().abatch(ops)

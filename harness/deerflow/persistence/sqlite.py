"""One way to open the harness's small SQLite stores.

Short-lived connections per operation in WAL mode: safe from any thread and
from several processes sharing one ``$DEERFLOW_HOME``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class SqliteStore:
    """Base of a store: creates the file and its schema, hands out transactional connections."""

    schema: str = ""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(self.schema)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30)
        db.row_factory = sqlite3.Row
        try:
            with db:
                yield db
        finally:
            db.close()

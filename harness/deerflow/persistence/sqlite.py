"""One way to open the harness's small SQLite stores, and to tell when a store file is broken.

Connections in WAL mode: safe from any thread and from several processes sharing
one ``$DEERFLOW_HOME``.  A thread of a store's own executor (``store.aio``, which
every run and request goes through) keeps one connection per store and reuses it
while the file at the store's path is still the file it opened (opening one costs
~0.9 ms CPU, about ten times the statements of a small call, and a run makes about
ten store calls); any other thread (a CLI, a notebook kernel's sync call) opens one
per operation.  A connection whose operation failed is closed, never reused.

A store file that is corrupt, truncated, unreadable or not a file at all is
an operator's problem, not a crash: every failure to use it is a
:class:`StorageError` naming the file, the problem and the way out
(``deerflow doctor --repair`` moves it aside and starts an empty store).  The
schema is created on first use rather than in the constructor, so a process
(the Jupyter extension) still starts with a broken file and reports it.

The same store classes run on PostgreSQL when they are given a
``postgresql://`` URL (``storage.url``) instead of a path: their SQL is written
once, and :mod:`deerflow.persistence.pgsql` supplies the connection, the
dialect differences and the versioned schema.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.errors import UserError

if TYPE_CHECKING:
    from deerflow.persistence.aio import AsyncStore

REPAIR_HINT = "move it aside and start an empty store with `deerflow doctor --repair` (nothing is deleted)"

# sqlite3 messages that mean the file itself cannot be used (not a busy lock or a constraint).
_BROKEN_FILE = (
    "file is not a database", "malformed", "unable to open database file", "disk i/o error",
    "readonly database", "not authorized", "file is encrypted",
)


SQLITE_BUSY, SQLITE_LOCKED = 5, 6
WAL_SWITCH_SECONDS = 30.0  # how long switching a new file to WAL waits for other processes doing the same


def is_locked_error(exc: BaseException) -> bool:
    """SQLite's "another connection holds the lock" (SQLITE_BUSY or SQLITE_LOCKED), from sqlite3 or
    pysqlite3: by the error code, or by SQLite's words where a driver gives no code."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text or "database table is locked" in text


def switch_to_wal(db: Any, *, seconds: float | None = None) -> None:
    """``PRAGMA journal_mode=WAL`` on ``db`` (sqlite3 or pysqlite3), retried while another process holds the lock.

    SQLite does not call its busy handler for the switch when it could deadlock
    (two connections, each reading the new file, both wanting it exclusively), so
    processes opening a new store at once see "database is locked" at once and
    must retry themselves.  Once the file is in WAL mode the switch is a no-op.
    When SQLite did call the busy handler (the attempt took at least half the
    connection's busy timeout), the lock was held for all of it by someone else
    (another process's long transaction): that is the answer, not a reason to
    wait the busy timeout again and again until ``seconds``.

    Raises:
        sqlite3.OperationalError: still locked after ``seconds`` (default :data:`WAL_SWITCH_SECONDS`),
            or after the connection's own busy timeout.
    """
    deadline = time.monotonic() + (WAL_SWITCH_SECONDS if seconds is None else seconds)
    busy_wait = _busy_timeout_seconds(db) / 2
    delay = 0.005
    while True:
        started = time.monotonic()
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except Exception as exc:
            now = time.monotonic()
            if not is_locked_error(exc) or now >= deadline or (busy_wait > 0 and now - started >= busy_wait):
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _busy_timeout_seconds(db: Any) -> float:
    """The connection's busy timeout (0 when it has none or cannot say)."""
    try:
        return float(db.execute("PRAGMA busy_timeout").fetchone()[0]) / 1000
    except Exception:  # noqa: BLE001 - sqlite3's or pysqlite3's error, or a wrapper without rows: none known
        return 0.0


def ensure_wal_file(path: Path) -> None:
    """Create ``path`` if need be and put it in WAL mode, through a connection of its own (blocking;
    no busy handler: :func:`switch_to_wal`'s retries are the wait)."""
    db = sqlite3.connect(path, timeout=0)
    try:
        switch_to_wal(db)
    finally:
        db.close()


class StorageError(UserError):
    """A store file that cannot be used: corrupt, truncated, unreadable, or not a file.

    Args:
        path: The file.
        problem: What is wrong with it, in a few words.
    """

    exit_code = 4

    def __init__(self, path: Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"storage error: {self.path}: {problem}; {REPAIR_HINT}")


def is_broken_file_error(exc: BaseException) -> bool:
    """True when a sqlite3 error means the database file is unusable (corrupt, unreadable...)."""
    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, sqlite3.IntegrityError):
        return False
    text = str(exc).lower()
    return any(marker in text for marker in _BROKEN_FILE)


def file_problem(path: Path) -> str | None:
    """What makes ``path`` unusable as a SQLite database, without opening it (None: fine or absent).

    Cheap enough for every open: the file type, permissions, header and size.
    A missing file is fine (it is created on first use).
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be inspected ({exc.strerror or exc})"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory, not a database file"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if not os.access(path, os.R_OK | os.W_OK):
        return "is not readable and writable by this user"
    if info.st_size == 0:
        return None  # an empty file is an empty database
    return _contents_problem(path, info.st_size)


def _contents_problem(path: Path, size: int) -> str | None:
    """The header and the size, as SQLite itself reads them (a read-only connection).

    Never through a descriptor of our own: ``fcntl`` locks belong to the process and the file,
    so closing *any* descriptor of the file drops every lock this process's other connections
    hold on it (SQLite's own opens share and keep theirs). Another process would then take the
    database as unused and recover its WAL under them: "disk I/O error", then a malformed file
    (``tests/integration/test_store_processes.py``).
    """
    uri = "file:" + urllib.parse.quote(str(path)) + "?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=5)
    except sqlite3.Error as exc:
        return f"cannot be read ({exc})"
    try:
        db.execute("PRAGMA schema_version").fetchone()  # reads and checks the header and page 1
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
        (pages,) = db.execute("PRAGMA page_count").fetchone()
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc).lower():
            return "is not a SQLite database (unknown or damaged header)"
        if is_broken_file_error(exc):  # e.g. the header names more pages than the file holds
            return f"is truncated or damaged ({exc}; {size} bytes on disk)"
        return None  # busy or locked: not the file's problem
    finally:
        db.close()
    with contextlib.suppress(OSError):  # the size now: another process may have grown the file (and emptied its WAL)
        size = max(size, path.stat().st_size)
    if pages * page_size > size and not _wal_holds_pages(path):
        return f"is truncated ({size} bytes, the header says {pages * page_size})"
    return None


def _wal_holds_pages(path: Path) -> bool:
    try:
        return path.with_name(path.name + "-wal").stat().st_size > 0
    except OSError:
        return False


def check_database(path: Path, *, deep: bool = True) -> str | None:
    """What is wrong with the SQLite database at ``path`` (None: usable or absent).

    ``deep`` runs ``PRAGMA quick_check`` (reads every page: for diagnosis, not every open).
    """
    problem = file_problem(path)
    if problem is not None or not path.exists() or path.stat().st_size == 0:
        return problem
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        return f"cannot be opened ({exc})"
    try:
        db.execute("PRAGMA schema_version").fetchone()
        if deep:
            rows = [str(r[0]) for r in db.execute("PRAGMA quick_check(3)").fetchall()]
            if rows != ["ok"]:
                return "is corrupt (" + "; ".join(rows)[:200] + ")"
    except sqlite3.DatabaseError as exc:
        if not is_broken_file_error(exc):
            raise
        return f"is corrupt ({exc})"
    finally:
        db.close()
    return None


class SqliteStore:
    """Base of a store: creates the file and its schema on first use, hands out transactional connections.

    Raises (from every operation):
        StorageError: the file is corrupt, truncated, unreadable or not a file.
    """

    schema: str = ""
    schema_part: str = ""  # its name in PostgreSQL's ``deerflow_schema`` (the version table)
    migrations: tuple[str, ...] = ()  # PostgreSQL: ``migrations[i]`` moves schema version i + 1 to i + 2
    busy_timeout_seconds: float = 30.0  # how long one statement waits for another writer's lock
    loop_guarded: bool = False  # DEERFLOW_LOOP_GUARD=1: refuse sync calls on an event loop's thread

    def __init__(self, path: Path | str) -> None:
        """Open (lazily) the store at ``path``: a SQLite file, or a ``postgresql://`` URL (``storage.url``)."""
        from deerflow.persistence.pgsql import database, is_postgres_url

        self._pg = database(str(path)) if is_postgres_url(path) else None
        self.path = self._pg.where if self._pg is not None else Path(path)
        self._ready = False
        self._ready_lock = threading.Lock()
        self._kept = threading.local()  # in an executor thread: (connection, the file's identity at its open)

    @property
    def backend(self) -> str:
        """``postgres`` or ``sqlite``: where this store's rows live."""
        return "postgres" if self._pg is not None else "sqlite"

    def _ensure_schema(self) -> None:
        with self._ready_lock:
            if self._ready:
                return
            problem = file_problem(self.path)
            if problem is not None:
                raise StorageError(self.path, problem)
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(self.path, f"its folder cannot be created ({exc.strerror or exc})") from None
            db = self._open()
            try:
                switch_to_wal(db)
                with db:
                    db.executescript(self.schema)
            except sqlite3.DatabaseError as exc:
                raise as_storage_error(self.path, exc) from None
            finally:
                db.close()
            self._ready = True

    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout_seconds)
        except sqlite3.DatabaseError as exc:
            raise as_storage_error(self.path, exc) from None
        db.row_factory = sqlite3.Row
        return db

    @functools.cached_property
    def aio(self) -> AsyncStore:
        """This store's methods as awaitables for async code: a bounded executor and a deadline."""
        from deerflow.persistence.aio import AsyncStore

        return AsyncStore(self)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if self.loop_guarded:
            from deerflow.persistence.aio import guard_loop

            guard_loop(type(self).__name__)
        if self._pg is not None:
            yield from self._connect_pg()
            return
        if not self._ready:
            self._ensure_schema()
        # A nested call (a store method inside another's transaction) gets its own connection, as
        # before: sharing the outer one would commit the outer transaction at the inner one's end.
        keep = getattr(_THREAD, "keeps_connections", False) and not getattr(self._kept, "busy", False)
        db = self._reuse() if keep else None
        if db is None:
            db = self._open_and_keep() if keep else self._open()
        kept = getattr(self._kept, "db", None) is db
        if kept:
            self._kept.busy = True
        try:
            with db:
                yield db
        except BaseException as exc:
            self._forget(db)
            db.close()  # a failed operation's connection is never reused
            if isinstance(exc, sqlite3.DatabaseError) and is_broken_file_error(exc):
                raise as_storage_error(self.path, exc) from None
            raise
        finally:
            if kept:
                self._kept.busy = False
        if getattr(self._kept, "db", None) is not db:
            db.close()

    def _reuse(self) -> sqlite3.Connection | None:
        """This thread's kept connection, if the store's file is still the one it opened."""
        db = getattr(self._kept, "db", None)
        if db is None:
            return None
        if _identity(self.path) == self._kept.identity:
            return db
        self._forget(db)  # moved aside (``doctor --repair``) or replaced: open the file there now
        db.close()
        with self._ready_lock:
            self._ready = False
        self._ensure_schema()
        return None

    def _open_and_keep(self) -> sqlite3.Connection:
        """A new connection, kept for this thread unless the file changed while it opened."""
        before = _identity(self.path)
        db = self._open()
        if before is not None and _identity(self.path) == before:
            self._kept.db, self._kept.identity = db, before
        return db

    def _forget(self, db: sqlite3.Connection) -> None:
        if getattr(self._kept, "db", None) is db:
            self._kept.db = None

    def _connect_pg(self) -> Iterator[Any]:
        """One PostgreSQL transaction (the schema part created or migrated on first use)."""
        from deerflow.persistence.pgsql import SchemaPart

        assert self._pg is not None
        if not self._ready:
            self._pg.ensure(SchemaPart(self.schema_part or type(self).__name__.lower(), self.schema, self.migrations))
            self._ready = True
        with self._pg.transaction() as db:
            yield db


_THREAD = threading.local()


def keep_connections_in_this_thread() -> None:
    """Make this thread keep one connection per store (an executor thread of ``store.aio``)."""
    _THREAD.keeps_connections = True


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def as_storage_error(path: Path, exc: sqlite3.DatabaseError) -> Exception:
    """``exc`` as a :class:`StorageError` about ``path`` when it means the file is unusable, else ``exc``."""
    if not is_broken_file_error(exc):
        return exc
    return StorageError(path, file_problem(path) or f"cannot be used ({exc})")

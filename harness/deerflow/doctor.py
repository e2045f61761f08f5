"""``deerflow doctor``: what is broken in this installation, and how to fix it.

Checks the configuration, the storage files of ``$DEERFLOW_HOME`` (SQLite
databases: corrupt, truncated, unreadable, or something else where the file
should be), the PostgreSQL database when ``storage.url`` names one (reachable,
schema versions) and whether the configured sandbox provider can run here.  The
same storage findings back the server's ``GET /deerflow/api/health``.

:func:`repair` never deletes anything: a broken store file (with its
``-wal``/``-shm`` companions) is renamed aside to
``NAME.broken-YYYYMMDD-HHMMSS`` and an empty database takes its place, so the
old data stays there for a person (or a recovery tool) to look at.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from deerflow.config.loader import LoadedConfig, load_config
from deerflow.config.paths import HomePaths
from deerflow.config.schema import AppConfig
from deerflow.config.storage import StorageConfig
from deerflow.errors import ConfigError
from deerflow.persistence.checkpointer import sqlite_checkpoint_path
from deerflow.persistence.sqlite import check_database, ensure_wal_file

Check = Literal["config", "storage", "database", "sandbox"]


@dataclass(frozen=True)
class Finding:
    """One check's verdict.

    Attributes:
        check: What was checked (``config``, ``storage``, ``sandbox``).
        subject: The file or provider checked.
        ok: False when something is broken.
        detail: What was found (the problem when not ``ok``).
        fix: What to do about it (None when ``ok``).
    """

    check: Check
    subject: str
    ok: bool
    detail: str
    fix: str | None = None

    def line(self) -> str:
        """One line for a terminal."""
        mark = "ok " if self.ok else "BROKEN"
        text = f"{mark} {self.check}: {self.subject}: {self.detail}"
        return text + (f" — {self.fix}" if self.fix else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StoreFile:
    """A SQLite file of the installation and what it holds."""

    name: str
    path: Path


def store_files(home: HomePaths, config: AppConfig | None) -> list[StoreFile]:
    """The SQLite files of ``home`` (none of those ``storage.url`` moved to PostgreSQL)."""
    storage = config.storage if config is not None else None
    if storage is not None and storage.checkpointer == "postgres":  # threads, runs, tasks: in PostgreSQL
        return [StoreFile("batches", home.home / "batches.db")]
    files = [StoreFile("threads, runs and schedules", home.database)]
    if storage is None or storage.checkpointer == "sqlite":
        default = home.home / "checkpoints.db"
        files.append(StoreFile("conversation checkpoints",
                               sqlite_checkpoint_path(storage, default) if storage is not None else default))
    files.append(StoreFile("batches", home.home / "batches.db"))
    files.append(StoreFile("MCP tasks", home.home / "mcp-tasks.db"))
    return files


def check_storage(files: Sequence[StoreFile], *, deep: bool = True) -> list[Finding]:
    """A finding per store file (absent files are fine: they are created on first use)."""
    findings = []
    for store in files:
        problem = check_database(store.path, deep=deep)
        if problem is None:
            state = "present" if store.path.exists() else "absent (created on first use)"
            findings.append(Finding("storage", str(store.path), True, f"{store.name}: {state}"))
        else:
            findings.append(Finding(
                "storage", str(store.path), False, f"{store.name}: {problem}",
                "move it aside and start an empty store: deerflow doctor --repair (renames it, deletes nothing)"))
    return findings


def check_storage_url(storage: StorageConfig) -> Finding | None:
    """Whether the PostgreSQL of ``storage.url`` answers, and its schema versions (None: SQLite).

    A connection of its own (no pool), bounded by ``storage.connect_timeout``; the message
    never repeats the URL (it may hold a password).
    """
    if storage.checkpointer != "postgres" or not storage.postgres_url:
        return None
    from deerflow.persistence.pgsql import libpq_reason, where

    subject = str(where(storage.postgres_url))  # host, port and name: never the URL (it may hold a password)
    try:
        import psycopg
    except ModuleNotFoundError:
        return Finding("database", subject, False, "the psycopg driver is not installed",
                       "install the 'postgres' extra (pip install '.[postgres]' in a clone)")
    try:
        with psycopg.connect(storage.postgres_url, autocommit=True,
                             connect_timeout=max(2, int(storage.connect_timeout + 0.999))) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            server = row[0] if row else "?"
            parts, checkpoints = _schema_state(conn)
    except psycopg.Error as exc:
        return Finding("database", subject, False, f"not reachable within {storage.connect_timeout:g}s "
                       f"({libpq_reason(exc, storage.postgres_url)})",
                       "check storage.url, the network and that the server is running")
    newer = [f"{name} v{found} (this DeerFlow knows v{known})" for name, found, known in parts
             if known is not None and found > known]
    if newer:
        return Finding("database", subject, False, f"schema newer than this DeerFlow: {', '.join(newer)}",
                       "upgrade DeerFlow on this machine to the version the other servers run")
    schema = ", ".join(f"{name} v{found}" for name, found, _ in parts) or "not set up yet (created on first start)"
    return Finding("database", subject, True, f"reachable (PostgreSQL {server.split()[0]}); schema: {schema}"
                   + (f"; checkpoints: {checkpoints}" if checkpoints else ""))


def _schema_state(conn: Any) -> tuple[list[tuple[str, int, int | None]], str | None]:
    """(part, recorded version, this code's version) per part, and LangGraph's checkpoint migrations."""
    from deerflow.persistence.pgsql import SCHEMA_TABLE
    from deerflow.persistence.store import MetadataStore
    from deerflow.scheduling.store import ScheduleStore

    known = {cls.schema_part: 1 + len(cls.migrations) for cls in (MetadataStore, ScheduleStore)}
    parts: list[tuple[str, int, int | None]] = []
    if conn.execute("SELECT to_regclass(%s)", (SCHEMA_TABLE,)).fetchone()[0] is not None:
        rows = conn.execute(f"SELECT part, version FROM {SCHEMA_TABLE} ORDER BY part").fetchall()
        parts = [(part, version, known.get(part)) for part, version in rows]
    checkpoints = None
    if conn.execute("SELECT to_regclass('checkpoint_migrations')").fetchone()[0] is not None:
        done = conn.execute("SELECT count(*) FROM checkpoint_migrations").fetchone()[0]
        checkpoints = f"{done} migration(s) applied"
    return parts, checkpoints


def check_config(config_path: str | None) -> tuple[Finding, LoadedConfig | None]:
    """Load the configuration; its finding and the loaded config (None when broken)."""
    try:
        loaded = load_config(config_path)
    except ConfigError as exc:
        return Finding("config", config_path or "config.yaml", False, str(exc),
                       "fix the file at the key the message names"), None
    where = str(loaded.path) if loaded.path else "(no file: built-in defaults)"
    return Finding("config", where, True, f"{len(loaded.config.models)} model(s) configured"), loaded


def check_sandbox(config: AppConfig) -> Finding:
    """Whether the configured sandbox provider can run on this machine (nothing is started)."""
    use = config.sandbox.use
    if use == "local":
        bash = "host bash allowed" if config.sandbox.allow_host_bash else "no host bash"
        return Finding("sandbox", "local", True, f"runs on the host ({bash})")
    if use == "bwrap":
        from deerflow.sandbox.execution.bwrap import find_bwrap

        found = find_bwrap()
        if found is None:
            return Finding("sandbox", "bwrap", False, "the bwrap executable was not found",
                           "install bubblewrap (apt-get install bubblewrap) or set sandbox.use: local")
        return Finding("sandbox", "bwrap", True, f"bubblewrap at {found}")
    if use == "docker":
        try:
            from deerflow.sandbox.docker.provider import connect_docker

            connect_docker()
        except ConfigError as exc:
            return Finding("sandbox", "docker", False, exc.problem, "start Docker or choose another sandbox.use")
        return Finding("sandbox", "docker", True, "the Docker engine answers")
    return Finding("sandbox", use, False, "unknown provider", "set sandbox.use to local, bwrap or docker")


def diagnose(config_path: str | None, home: HomePaths) -> list[Finding]:
    """Every check: config, storage, sandbox."""
    config_finding, loaded = check_config(config_path)
    config = loaded.config if loaded is not None else None
    findings = [config_finding, *check_storage(store_files(home, config))]
    if config is not None:
        database = check_storage_url(config.storage)
        findings += [database] if database is not None else []
        findings.append(check_sandbox(config))
    return findings


@dataclass(frozen=True)
class Repair:
    """A broken store file moved aside (``moved``: old path → new path) and re-created empty."""

    path: Path
    moved: list[tuple[Path, Path]]


def repair(path: Path, *, now: float | None = None) -> Repair:
    """Move the broken store file at ``path`` (and its ``-wal``/``-shm``) aside; create an empty database.

    Nothing is deleted: each file is renamed to ``NAME.broken-YYYYMMDD-HHMMSS``
    (a counter is added if that name exists).  Stop the servers and CLIs using
    this ``$DEERFLOW_HOME`` first: they keep the old file open.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    moved: list[tuple[Path, Path]] = []
    for companion in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if companion.exists() or companion.is_symlink():
            target = _free_name(companion.with_name(f"{companion.name}.broken-{stamp}"))
            companion.rename(target)
            moved.append((companion, target))
    ensure_wal_file(path)
    return Repair(path, moved)


def _free_name(candidate: Path) -> Path:
    n = 1
    found = candidate
    while found.exists() or found.is_symlink():
        found = candidate.with_name(f"{candidate.name}.{n}")
        n += 1
    return found


def repair_broken(findings: Sequence[Finding]) -> list[Repair]:
    """Repair every broken store file among ``findings``."""
    return [repair(Path(f.subject)) for f in findings if f.check == "storage" and not f.ok]


__all__ = ["Finding", "Repair", "StoreFile", "check_config", "check_sandbox", "check_storage",
           "check_storage_url", "diagnose",
           "repair", "repair_broken", "store_files"]

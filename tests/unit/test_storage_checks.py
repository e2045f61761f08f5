"""Broken store files are named, not crashed on; repairs rename and never delete."""

from __future__ import annotations

import sqlite3

import pytest

from deerflow.config.paths import HomePaths
from deerflow.doctor import Finding, check_storage, repair, store_files
from deerflow.persistence.sqlite import SqliteStore, StorageError, check_database, file_problem


class Notes(SqliteStore):
    schema = "CREATE TABLE IF NOT EXISTS notes (id TEXT PRIMARY KEY, body TEXT);"

    def add(self, note_id: str, body: str) -> None:
        with self._connect() as db:
            db.execute("INSERT INTO notes VALUES (?, ?)", (note_id, body))

    def count(self) -> int:
        with self._connect() as db:
            return db.execute("SELECT count(*) FROM notes").fetchone()[0]


def test_a_store_on_a_garbage_file_is_built_and_fails_on_use_with_the_path(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"\x00garbage" * 100)
    store = Notes(path)  # constructing never touches the file: a host still starts
    with pytest.raises(StorageError) as info:
        store.count()
    assert info.value.path == path and "not a SQLite database" in info.value.problem
    assert str(path) in str(info.value) and "deerflow doctor --repair" in str(info.value)
    assert path.read_bytes() == b"\x00garbage" * 100  # untouched


def test_constraint_errors_stay_what_they_are(tmp_path):
    store = Notes(tmp_path / "notes.db")
    store.add("a", "x")
    with pytest.raises(sqlite3.IntegrityError):
        store.add("a", "again")
    assert store.count() == 1


def test_file_problems_name_each_kind_of_breakage(tmp_path):
    assert file_problem(tmp_path / "absent.db") is None
    (tmp_path / "empty.db").touch()
    assert file_problem(tmp_path / "empty.db") is None
    (tmp_path / "dir.db").mkdir()
    assert file_problem(tmp_path / "dir.db") == "is a directory, not a database file"
    loop = tmp_path / "loop.db"
    loop.symlink_to(loop.name)
    assert "cannot be inspected" in (file_problem(loop) or "")
    real = tmp_path / "real.db"
    db = sqlite3.connect(real)
    db.execute("CREATE TABLE t (x)")
    db.executemany("INSERT INTO t VALUES (?)", [("y" * 1000,)] * 50)
    db.commit()
    db.close()
    assert check_database(real) is None
    real.write_bytes(real.read_bytes()[:5000])
    assert (file_problem(real) or "").startswith("is truncated")


def test_repair_moves_the_file_and_its_wal_aside_and_starts_an_empty_database(tmp_path):
    path = tmp_path / "deerflow.db"
    path.write_bytes(b"garbage")
    (tmp_path / "deerflow.db-wal").write_bytes(b"wal")
    first = repair(path, now=0)
    second_garbage = b"more garbage"
    path.write_bytes(second_garbage)
    second = repair(path, now=0)  # the same second: a counter keeps both
    assert [new.read_bytes() for _, new in first.moved] == [b"garbage", b"wal"]
    assert second.moved[0][1].read_bytes() == second_garbage
    assert second.moved[0][1] != first.moved[0][1]
    assert check_database(path) is None and Notes(path).count() == 0


def test_check_storage_reports_only_broken_files_as_broken(tmp_path):
    home = HomePaths(tmp_path)
    home.database.write_bytes(b"not sqlite at all" * 10)
    findings = check_storage(store_files(home, None))
    broken = [f for f in findings if not f.ok]
    assert [f.subject for f in broken] == [str(home.database)]
    assert isinstance(broken[0], Finding) and broken[0].line().startswith("BROKEN storage: ")
    assert all("absent" in f.detail for f in findings if f.ok)

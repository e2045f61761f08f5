"""The SQLite memory store of a new home opens when there is something to read or write (memory/lazy_store.py)."""

from __future__ import annotations

import sqlite3
from contextlib import ExitStack
from pathlib import Path

import pytest

from deerflow.config.storage import StorageConfig
from deerflow.memory.book import MemoryBook
from deerflow.memory.lazy_store import StoreOnFirstUse
from deerflow.memory.store import open_store
from deerflow.persistence.sqlite import StorageError


def test_reads_of_a_new_home_open_nothing_and_the_first_write_creates_the_store(tmp_path: Path) -> None:
    with ExitStack() as stack:
        store = open_store(StorageConfig(), home=tmp_path, stack=stack)
        assert isinstance(store, StoreOnFirstUse)
        book = MemoryBook(store, "alice")
        assert book.list() == [] and store.get(("x",), "k") is None and store.list_namespaces() == []
        assert not store.opened and not (tmp_path / "memory.db").exists()
        book.add("Prefers tea.")
        assert store.opened and (tmp_path / "memory.db").is_file()
    with ExitStack() as stack:  # the next host opens the file at once, and finds the fact
        again = open_store(StorageConfig(), home=tmp_path, stack=stack)
        assert not isinstance(again, StoreOnFirstUse)
        assert [f.text for f in MemoryBook(again, "alice").list()] == ["Prefers tea."]


def test_a_file_another_process_created_is_read(tmp_path: Path) -> None:
    with ExitStack() as stack, ExitStack() as other:
        lazy = open_store(StorageConfig(), home=tmp_path, stack=stack)
        assert MemoryBook(lazy, "alice").list() == []
        MemoryBook(open_store(StorageConfig(), home=tmp_path, stack=other), "alice").add("Lives in Lyon.")
        assert [f.text for f in MemoryBook(lazy, "alice").list()] == ["Lives in Lyon."]
        assert lazy.opened  # type: ignore[attr-defined]


def test_after_the_host_closes_the_store_refuses_use(tmp_path: Path) -> None:
    with ExitStack() as stack:
        store = open_store(StorageConfig(), home=tmp_path, stack=stack)
    with pytest.raises(sqlite3.ProgrammingError):
        MemoryBook(store, "alice").add("Too late.")


def test_a_broken_file_is_still_refused_when_the_host_opens(tmp_path: Path) -> None:
    (tmp_path / "memory.db").write_bytes(b"not a database" * 20)
    with ExitStack() as stack, pytest.raises(StorageError, match=r"memory\.db"):
        open_store(StorageConfig(), home=tmp_path, stack=stack)


async def test_async_reads_of_a_new_home_open_nothing(tmp_path: Path) -> None:
    with ExitStack() as stack:
        store = open_store(StorageConfig(), home=tmp_path, stack=stack)
        assert await store.asearch(("memories",)) == [] and await store.aget(("x",), "k") is None
        assert not (tmp_path / "memory.db").exists()

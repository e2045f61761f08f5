"""A thread's uploads listing is kept only while inotify reports nothing in the folder."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deerflow.agents.middlewares.uploads import UploadsMiddleware
from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.config.schema import AppConfig
from deerflow.runtime.context import RunContext
from deerflow.sandbox.files import upload_watch
from deerflow.sandbox.files.upload_watch import UploadWatch
from deerflow.sandbox.files.uploads import save_upload


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    paths = HomePaths(tmp_path / "home").thread("alice", "t1").ensure()
    probe = UploadWatch()
    probe.list(paths)
    kept = probe.unchanged(paths.root) is not None
    probe.close()
    if not kept:
        pytest.skip("the temp folder is not on a local filesystem with inotify: listings are never kept there")
    return paths


@pytest.fixture
def watch() -> Iterator[UploadWatch]:
    w = UploadWatch()
    yield w
    w.close()


def names(files: list[Any] | None) -> list[str] | None:
    return None if files is None else [f.name for f in files]


def test_a_listing_stands_until_the_folder_changes(watch: UploadWatch, thread: ThreadPaths) -> None:
    save_upload(thread, "a.csv", b"1")
    assert watch.unchanged(thread.root) is None  # never listed
    assert names(watch.list(thread)) == ["a.csv"]
    assert names(watch.unchanged(thread.root)) == ["a.csv"]
    assert names(watch.unchanged(thread.root)) == ["a.csv"]  # looking changes nothing


@pytest.mark.parametrize("change", [
    "upload", "write_in_place", "touch", "remove", "rename", "other_process", "hidden_temp_file",
])
def test_every_change_in_the_folder_voids_the_listing(watch: UploadWatch, thread: ThreadPaths, change: str) -> None:
    save_upload(thread, "a.csv", b"1")
    watch.list(thread)
    target = thread.uploads / "a.csv"
    if change == "upload":
        save_upload(thread, "b.csv", b"2")
    elif change == "write_in_place":
        with open(target, "r+b") as fh:
            fh.write(b"9")
    elif change == "touch":
        os.utime(target, (1, 1))
    elif change == "remove":
        target.unlink()
    elif change == "rename":
        target.rename(thread.uploads / "c.csv")
    elif change == "other_process":
        subprocess.run([sys.executable, "-c", f"open({str(thread.uploads / 'd.csv')!r}, 'w').write('x')"],
                       check=True)
    else:
        (thread.uploads / ".tmp-upload").write_bytes(b"")
    assert watch.unchanged(thread.root) is None


def test_a_change_made_while_the_folder_was_listed_voids_that_listing(watch: UploadWatch, thread: ThreadPaths,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing was read before the change, stored after it: it must not stand."""
    real = upload_watch.list_uploads

    def list_then_change(paths: ThreadPaths, **kwargs: Any) -> list[Any]:
        files = real(paths, **kwargs)
        save_upload(thread, "late.csv", b"x")
        assert watch.unchanged(thread.root) is None  # the loop drains the event before the listing is kept
        return files

    monkeypatch.setattr(upload_watch, "list_uploads", list_then_change)
    assert names(watch.list(thread)) == []
    monkeypatch.setattr(upload_watch, "list_uploads", real)
    assert watch.unchanged(thread.root) is None
    assert names(watch.list(thread)) == ["late.csv"]


def test_a_folder_swapped_for_a_link_to_a_host_folder_is_listed_again_and_shows_nothing(
        watch: UploadWatch, thread: ThreadPaths, tmp_path: Path) -> None:
    """The attack from a thread's folders: the kept listing belonged to the old folder (its watch
    sees it moved away); the new look refuses the link as a plain listing does."""
    host = tmp_path / "host-secrets"
    host.mkdir()
    (host / "id_rsa").write_text("key")
    save_upload(thread, "a.csv", b"1")
    watch.list(thread)
    thread.uploads.rename(thread.uploads.with_name("uploads.aside"))
    thread.uploads.symlink_to(host, target_is_directory=True)
    assert watch.unchanged(thread.root) is None
    assert watch.list(thread) == []
    assert watch.unchanged(thread.root) is None  # nothing watched through a link


def test_a_deleted_folder_is_watched_again_when_it_comes_back(watch: UploadWatch, thread: ThreadPaths) -> None:
    watch.list(thread)
    thread.uploads.rmdir()
    assert watch.unchanged(thread.root) is None
    assert watch.list(thread) == []
    thread.ensure()
    save_upload(thread, "back.csv", b"1")
    assert names(watch.list(thread)) == ["back.csv"]
    assert names(watch.unchanged(thread.root)) == ["back.csv"]


def _inotify_watches(watch: UploadWatch) -> int:
    fdinfo = Path(f"/proc/self/fdinfo/{watch._fd}").read_text()
    return sum(line.startswith("inotify wd:") for line in fdinfo.splitlines())


def test_beyond_the_limit_the_least_recently_listed_thread_loses_its_watch(tmp_path: Path) -> None:
    watch = UploadWatch(limit=2)
    try:
        home = HomePaths(tmp_path / "home")
        threads = [home.thread("alice", f"t{i}").ensure() for i in range(3)]
        for t in threads:
            watch.list(t)
        assert watch.unchanged(threads[0].root) is None
        assert watch.unchanged(threads[1].root) == [] and watch.unchanged(threads[2].root) == []
        assert _inotify_watches(watch) == 2
    finally:
        watch.close()


def test_a_queue_overflow_voids_every_listing(watch: UploadWatch, tmp_path: Path) -> None:
    home = HomePaths(tmp_path / "home")
    threads = [home.thread("alice", f"t{i}").ensure() for i in range(2)]
    for t in threads:
        watch.list(t)
    with watch._lock:
        watch._apply(struct.pack("iIII", -1, 0x4000, 0, 0))  # IN_Q_OVERFLOW, as the kernel reports it
    assert all(watch.unchanged(t.root) is None for t in threads)


def test_without_inotify_every_look_lists(thread: ThreadPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    watch = UploadWatch()
    monkeypatch.setattr(watch, "_start", lambda: False)
    save_upload(thread, "a.csv", b"1")
    assert names(watch.list(thread)) == ["a.csv"]
    assert watch.unchanged(thread.root) is None


def test_a_folder_on_a_network_filesystem_is_listed_at_every_look(watch: UploadWatch, thread: ThreadPaths,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer on another machine (a shared ``thread_files_root`` on NFS) raises no event here."""
    monkeypatch.setattr(upload_watch, "_LOCAL_FILESYSTEMS", frozenset({0x6969 + 1}))
    save_upload(thread, "a.csv", b"1")
    assert names(watch.list(thread)) == ["a.csv"]
    assert watch.unchanged(thread.root) is None


def test_model_calls_list_the_folder_only_after_it_changed(thread: ThreadPaths,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    watch = UploadWatch()
    monkeypatch.setattr("deerflow.agents.middlewares.uploads.UPLOAD_WATCH", watch)
    listed: list[str] = []
    real = watch.list
    monkeypatch.setattr(watch, "list", lambda paths: listed.append("list") or real(paths))
    ctx = RunContext(user_id="alice", thread_id="t1", run_id="r1", paths=thread, config=AppConfig())
    runtime: Any = SimpleNamespace(context=ctx)
    state: dict[str, Any] = {"messages": []}
    middleware = UploadsMiddleware()
    try:
        for _ in range(5):
            assert middleware.before_model(state, runtime) is None
        assert listed == ["list"]
        save_upload(thread, "mid-run.csv", b"1")
        update = middleware.before_model(state, runtime)
        assert update is not None and "mid-run.csv" in update["messages"][0].content
        assert listed == ["list", "list"]
    finally:
        watch.close()

"""Saving user uploads: names, unsafe destinations, size and count limits."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import IO, cast

import pytest

from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.sandbox.files.uploads import UploadError, list_uploads, save_upload


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    return HomePaths(tmp_path / "home").thread("alice", "t1").ensure()


def upload_dir_names(thread: ThreadPaths) -> list[str]:
    return sorted(p.name for p in thread.uploads.iterdir())


def test_save_and_list(thread: ThreadPaths) -> None:
    info = save_upload(thread, "survey results.csv", b"q,a\n1,yes\n")
    assert (thread.uploads / "survey results.csv").read_bytes() == b"q,a\n1,yes\n"
    assert info.virtual_path == "/mnt/user-data/uploads/survey results.csv"
    assert info.size == 10
    assert list_uploads(thread) == [info]


def test_stream_and_host_file_sources(thread: ThreadPaths, tmp_path: Path) -> None:
    big = os.urandom(300_000)
    save_upload(thread, "stream.bin", io.BytesIO(big))
    src = tmp_path / "local.txt"
    src.write_text("from disk")
    save_upload(thread, "copy.txt", src)
    assert (thread.uploads / "stream.bin").read_bytes() == big
    assert (thread.uploads / "copy.txt").read_text() == "from disk"
    assert [i.name for i in list_uploads(thread)] == ["copy.txt", "stream.bin"]


@pytest.mark.parametrize(
    "name",
    [
        "",
        "   ",
        ".",
        "..",
        "a/b.txt",
        "../x",
        "a\\b.txt",
        "a\x00b",
        "line\nbreak",
        ".bashrc",
        "x" * 300,
    ],
)
def test_bad_names_are_refused_and_nothing_is_written(thread: ThreadPaths, name: str) -> None:
    with pytest.raises(UploadError):
        save_upload(thread, name, b"data")
    assert upload_dir_names(thread) == []


def test_symlink_destination_is_refused(thread: ThreadPaths, tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("precious")
    os.symlink(target, thread.uploads / "report.txt")
    with pytest.raises(UploadError, match="symbolic link"):
        save_upload(thread, "report.txt", b"overwrite")
    assert target.read_text() == "precious"
    assert (thread.uploads / "report.txt").is_symlink()


def test_hard_linked_destination_is_refused(thread: ThreadPaths, tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("precious")
    os.link(target, thread.uploads / "report.txt")
    with pytest.raises(UploadError, match="hard-linked"):
        save_upload(thread, "report.txt", b"overwrite")
    assert target.read_text() == "precious"


@pytest.mark.parametrize("as_stream", [False, True])
def test_oversized_upload_keeps_the_existing_file_and_leaves_no_partial(
    thread: ThreadPaths, as_stream: bool
) -> None:
    save_upload(thread, "data.csv", b"old,content\n")
    payload = b"x" * 200_000
    with pytest.raises(UploadError, match="100,000 bytes"):
        save_upload(
            thread, "data.csv", io.BytesIO(payload) if as_stream else payload, max_bytes=100_000
        )
    assert (thread.uploads / "data.csv").read_bytes() == b"old,content\n"
    assert upload_dir_names(thread) == ["data.csv"]


def test_oversized_new_upload_leaves_nothing(thread: ThreadPaths) -> None:
    with pytest.raises(UploadError):
        save_upload(thread, "new.bin", b"x" * 11, max_bytes=10)
    assert upload_dir_names(thread) == []


def test_count_limit_counts_new_names_only(thread: ThreadPaths) -> None:
    save_upload(thread, "a.txt", b"1", max_files=2)
    save_upload(thread, "b.txt", b"2", max_files=2)
    with pytest.raises(UploadError, match="2 uploaded files"):
        save_upload(thread, "c.txt", b"3", max_files=2)
    save_upload(thread, "a.txt", b"replaced", max_files=2)
    assert (thread.uploads / "a.txt").read_bytes() == b"replaced"
    assert upload_dir_names(thread) == ["a.txt", "b.txt"]


def test_list_ignores_links_and_hidden_files(thread: ThreadPaths, tmp_path: Path) -> None:
    save_upload(thread, "real.txt", b"x")
    (thread.uploads / ".upload-leftover.part").write_bytes(b"partial")
    os.symlink(tmp_path, thread.uploads / "link")
    assert [i.name for i in list_uploads(thread)] == ["real.txt"]


def test_failing_source_leaves_no_partial_file(thread: ThreadPaths) -> None:
    class Broken(io.RawIOBase):
        def __init__(self) -> None:
            self.calls = 0

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            self.calls += 1
            if self.calls > 2:
                raise ConnectionResetError("client went away")
            return b"y" * 1000

    with pytest.raises(ConnectionResetError):
        save_upload(thread, "half.bin", cast("IO[bytes]", Broken()))
    assert upload_dir_names(thread) == []


@pytest.mark.parametrize("linked", ["uploads", "user-data"])
def test_an_uploads_folder_reached_through_a_link_is_neither_written_nor_listed(thread: ThreadPaths, tmp_path: Path,
                                                                                linked: str) -> None:
    """The uploads folder is opened without following links below the thread's root: a link in
    its place (or in place of user-data) never redirects a save or a listing elsewhere."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "uploads").mkdir(parents=True)
    (elsewhere / "uploads" / "theirs.txt").write_text("not the thread's")
    victim = thread.uploads if linked == "uploads" else thread.user_data
    if linked == "uploads":
        victim.rmdir()
        victim.symlink_to(elsewhere / "uploads")
    else:
        os.rename(victim, tmp_path / "old-user-data")
        victim.symlink_to(elsewhere)
    assert list_uploads(thread) == []
    with pytest.raises(UploadError, match="not a plain directory"):
        save_upload(thread, "mine.txt", b"data")
    assert sorted(p.name for p in (elsewhere / "uploads").iterdir()) == ["theirs.txt"]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["uploads"]  # nothing created through the link

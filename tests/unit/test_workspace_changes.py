"""Workspace change summaries: what a run created, modified and deleted, safely bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.sandbox.files.changes import (
    ChangeLimits,
    diff_snapshots,
    is_secret_name,
    looks_secret,
    take_snapshot,
)

WS = "/mnt/user-data/workspace"
OUT = "/mnt/user-data/outputs"


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    return HomePaths(tmp_path / "home").thread("alice", "t1").ensure()


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def summary_of(thread: ThreadPaths, change, limits: ChangeLimits | None = None):
    limits = limits or ChangeLimits()
    before = take_snapshot(thread, limits=limits)
    change()
    return diff_snapshots(before, take_snapshot(thread, previous=before, limits=limits), limits=limits)


def test_created_modified_deleted_with_diffs(thread: ThreadPaths) -> None:
    write(thread.workspace / "notes.md", "alpha\nbeta\n")
    write(thread.workspace / "old.txt", "bye\n")

    def run() -> None:
        write(thread.workspace / "notes.md", "alpha\nBETA\n")
        (thread.workspace / "old.txt").unlink()
        write(thread.outputs / "report.md", "# Report\n")

    s = summary_of(thread, run)
    assert [c.path for c in s.created] == [f"{OUT}/report.md"]
    assert [c.path for c in s.modified] == [f"{WS}/notes.md"]
    assert [c.path for c in s.deleted] == [f"{WS}/old.txt"]
    assert "-beta\n+BETA\n" in s.modified[0].diff
    assert "+# Report" in s.created[0].diff and "/dev/null" in s.created[0].diff
    assert s.to_dict()["counts"] == {"created": 1, "modified": 1, "deleted": 1}


def test_rewriting_identical_bytes_is_not_a_change(thread: ThreadPaths) -> None:
    f = write(thread.workspace / "same.txt", "x\n")
    s = summary_of(thread, lambda: (f.write_text("x\n"), os.utime(f, (1, 1))))
    assert s.empty


def test_uploads_and_tool_results_are_not_reported(thread: ThreadPaths) -> None:
    def run() -> None:
        write(thread.uploads / "data.csv", "a,b\n")
        write(thread.outputs / ".tool-results" / "grep-call_1.txt", "lots\n")

    assert summary_of(thread, run).empty


def test_diffs_are_bounded_per_file_and_in_total(thread: ThreadPaths) -> None:
    limits = ChangeLimits(diff_max_chars=500, total_diff_chars=800)

    def run() -> None:
        for name in ("a.txt", "b.txt", "c.txt"):
            write(thread.workspace / name, "".join(f"line {i}\n" for i in range(1000)))

    s = summary_of(thread, run, limits)
    a, b, c = s.created
    assert a.diff_truncated and len(a.diff) <= 500 and a.diff.endswith("\n")
    assert b.diff_truncated and len(a.diff) + len(b.diff) <= 800
    assert c.diff is None and "budget" in (c.note or "")


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("image.png", b"\x89PNG\r\n\x1a\n\x00\x00binary", "binary"),
        (".env", b"OPENAI_API_KEY=abc\n", "secret"),
        ("server.pem", b"cert\n", "secret"),
        ("id_rsa", b"key\n", "secret"),
        ("api_key.txt", b"value\n", "secret"),
        ("config.py", b"password = 'hunter2hunter2'\n", "secret"),
        ("notes.md", b"token sk-abcdefghijklmnopqrstuvwxyz123456\n", "secret"),
        ("deploy.txt", b"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n", "secret"),
    ],
)
def test_binary_and_secret_files_are_metadata_only(thread: ThreadPaths, name: str, content: bytes, kind: str) -> None:
    s = summary_of(thread, lambda: write(thread.workspace / name, content))
    (change,) = s.created
    assert change.kind == kind and change.diff is None and change.note
    assert change.size == len(content)
    dumped = json.dumps(s.to_dict())
    assert content.decode("latin-1").strip()[-8:] not in dumped  # no content leaks into the summary


def test_modified_secret_has_no_diff(thread: ThreadPaths) -> None:
    env = write(thread.workspace / ".env", "TOKEN=one\n")
    s = summary_of(thread, lambda: env.write_text("TOKEN=two-longer\n"))
    (change,) = s.modified
    assert change.kind == "secret" and change.diff is None
    assert "two-longer" not in json.dumps(s.to_dict())


def test_large_files_are_metadata_only_but_still_detected(thread: ThreadPaths) -> None:
    limits = ChangeLimits(hash_max_bytes=1000)
    big = write(thread.outputs / "big.log", "x" * 5000)
    s = summary_of(thread, lambda: big.write_text("y" * 6000), limits)
    (change,) = s.modified
    assert change.kind == "large" and change.diff is None
    assert (change.previous_size, change.size) == (5000, 6000)


def test_snapshot_reads_are_bounded_in_total(thread: ThreadPaths) -> None:
    limits = ChangeLimits(read_budget_bytes=250)
    for name in ("a.txt", "b.txt", "c.txt"):
        write(thread.workspace / name, "v" * 100)
    before = take_snapshot(thread, limits=limits)
    assert [f.kind for f in before.files.values()] == ["text", "text", "unscanned"]
    (thread.workspace / "c.txt").write_text("w" * 120)
    s = diff_snapshots(before, take_snapshot(thread, previous=before, limits=limits), limits=limits)
    (change,) = s.modified  # still detected, by size and time
    assert change.path == f"{WS}/c.txt" and change.diff is None


def test_text_over_the_diff_cap_is_reported_without_diff(thread: ThreadPaths) -> None:
    limits = ChangeLimits(diff_max_file_bytes=100)
    s = summary_of(thread, lambda: write(thread.workspace / "long.txt", "z\n" * 200), limits)
    (change,) = s.created
    assert change.kind == "text" and change.diff is None and "too large" in (change.note or "")


def test_symlinks_are_recorded_not_followed(thread: ThreadPaths, tmp_path: Path) -> None:
    outside = write(tmp_path / "outside.txt", "secret stuff\n")
    s = summary_of(thread, lambda: (thread.workspace / "link").symlink_to(outside))
    (change,) = s.created
    assert change.kind == "symlink" and change.diff is None
    assert "secret stuff" not in json.dumps(s.to_dict())


def test_file_cap_marks_the_summary_truncated(thread: ThreadPaths) -> None:
    for i in range(5):
        write(thread.workspace / f"f{i}.txt", "x")
    assert take_snapshot(thread, limits=ChangeLimits(max_files=3)).truncated


def test_secret_name_and_content_detection() -> None:
    assert is_secret_name("PROD.ENV") and is_secret_name(".env.local") and is_secret_name("aws_keys.json")
    assert not is_secret_name("report.md")
    assert looks_secret("AKIAABCDEFGHIJKLMNOP") and not looks_secret("the password field is empty")

"""grep and glob take the model's patterns on RE2: no pattern can stall a search."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths
from deerflow.sandbox.files import search
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.tools.errors import ToolFailure

HANG_GUARD_S = 10.0


@pytest.fixture
def vfs(tmp_path: Path) -> VirtualFS:
    paths = HomePaths(tmp_path / "home").thread("alice", "t1").ensure()
    (paths.workspace / "a.txt").write_text("a" * 28 + "!\n" + "a" * 5_000 + "!\nabcabc\n")
    (paths.workspace / ("x" * 200 + ".txt")).write_text("long name\n")
    return VirtualFS(paths)


def _finishes(fn) -> bool:
    done = threading.Event()
    threading.Thread(target=lambda: (fn(), done.set()), daemon=True).start()
    return done.wait(HANG_GUARD_S)


def test_catastrophic_pattern_finishes_and_matches_like_re(vfs: VirtualFS) -> None:
    assert _finishes(lambda: search.grep(vfs, "(a+)+$"))
    assert search.grep(vfs, "(a+)+$").matches == ()
    assert [m.line_number for m in search.grep(vfs, "(a+)+!$").matches] == [1, 2]


def test_glob_with_many_stars_finishes(vfs: VirtualFS) -> None:
    pattern = "*x" * 40 + "y"
    assert _finishes(lambda: search.glob(vfs, pattern))
    assert search.glob(vfs, pattern).matches == ()
    assert search.glob(vfs, "*x*x*.txt").matches


def test_backreference_is_refused_with_a_way_forward(vfs: VirtualFS) -> None:
    with pytest.raises(ToolFailure) as caught:
        search.grep(vfs, r"(abc)\1")
    assert caught.value.code == "bad_pattern"
    assert "backreferences" in caught.value.message and "literal=true" in caught.value.message


def test_case_insensitive_and_literal_still_work(vfs: VirtualFS) -> None:
    assert search.grep(vfs, "ABCABC", case_sensitive=False).matches
    assert search.grep(vfs, "a!", literal=True).matches
    assert not search.grep(vfs, "a.!", literal=True).matches

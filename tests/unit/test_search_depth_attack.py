"""glob and grep over a tree deeper than the walk goes: the model is told, not left to guess.

The walk stops at :data:`MAX_WALK_DEPTH` levels (the agent's own ``mkdir -p`` decides how deep a
thread's folders go); before, a file below that depth was silently missing from glob and grep,
so "no match" read as "not there".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths
from deerflow.sandbox.files import search
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.threadfs import MAX_WALK_DEPTH, remove_tree
from deerflow.tools.builtins.file_tools import render_glob, render_grep
from fixtures.deep_trees import deep_chain

DEPTH = MAX_WALK_DEPTH + 20


@pytest.fixture
def vfs(tmp_path: Path):
    paths = HomePaths(tmp_path / "home").thread("alice", "t1").ensure()
    (paths.workspace / "shallow.txt").write_text("needle\n")
    deep_chain(paths.workspace, DEPTH, folder="d", leaf="needle.txt", text="needle\n")
    yield VirtualFS(paths)
    remove_tree(paths.workspace / "d")  # pytest's clean-up recurses and fails on the chain


def test_glob_says_the_listing_stopped_at_the_depth_cap(vfs: VirtualFS) -> None:
    result = search.glob(vfs, "**/*.txt")
    assert result.matches == ("/mnt/user-data/workspace/shallow.txt",)  # the deep one is past the cap
    assert result.depth_limit == MAX_WALK_DEPTH
    assert f"truncated at depth {MAX_WALK_DEPTH}" in render_glob(result)


def test_grep_says_the_listing_stopped_at_the_depth_cap(vfs: VirtualFS) -> None:
    result = search.grep(vfs, "needle")
    assert [m.path for m in result.matches] == ["/mnt/user-data/workspace/shallow.txt"]
    assert result.depth_limit == MAX_WALK_DEPTH
    assert f"truncated at depth {MAX_WALK_DEPTH}" in render_grep(result)


def test_a_shallow_tree_has_no_such_note(tmp_path: Path) -> None:
    paths = HomePaths(tmp_path / "home").thread("alice", "t1").ensure()
    (paths.workspace / "a" / "b").mkdir(parents=True)
    (paths.workspace / "a" / "b" / "needle.txt").write_text("needle\n")
    vfs = VirtualFS(paths)
    assert search.glob(vfs, "**/*.txt").depth_limit is None
    assert "truncated" not in render_grep(search.grep(vfs, "needle"))

"""``remove_tree``: a thread's folder deleted whatever the agent made of it (depth, links)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from deerflow.threadfs import remove_tree
from fixtures.deep_trees import deep_chain


def test_a_1500_deep_tree_with_links_out_is_removed_and_nothing_outside_is_touched(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    root = tmp_path / "thread"
    root.mkdir()
    deep_chain(root, 1500, text="bottom")
    (root / "outputs").mkdir()
    (root / "outputs" / "report.md").write_text("hi")
    (root / "outputs" / "to-host").symlink_to(outside)  # a link to a host folder: removed, not followed
    (root / "to-file").symlink_to(outside / "keep.txt")
    os.mkfifo(root / "outputs" / "pipe")
    with pytest.raises(RecursionError):  # what the thread deletion used before
        shutil.rmtree(root)
    remove_tree(root)
    assert not os.path.lexists(root)
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "host file"


def test_a_link_where_the_folder_was_is_unlinked_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    root = tmp_path / "thread"
    root.symlink_to(outside)
    remove_tree(root)
    assert not os.path.lexists(root)
    assert (outside / "keep.txt").read_text() == "host file"


def test_a_missing_folder_is_nothing_to_do(tmp_path: Path) -> None:
    remove_tree(tmp_path / "never-made")
    remove_tree(tmp_path / "no-parent" / "either")

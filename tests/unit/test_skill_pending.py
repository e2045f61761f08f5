"""Frozen skill copies a user declined or never answered do not pile up in the thread folder."""

from __future__ import annotations

import os
import time
from pathlib import Path

from deerflow.skills.pending import PENDING_DIR, STALE_AFTER_SECONDS, sweep_stale


def _copy(root: Path, name: str, age: float) -> Path:
    holder = root / PENDING_DIR / name
    (holder / "helper").mkdir(parents=True)
    (holder / "helper" / "SKILL.md").write_text("---\nname: helper\n---\n")
    then = time.time() - age
    os.utime(holder, (then, then))
    return holder


def test_copies_older_than_a_day_are_swept_and_fresh_ones_kept(tmp_path: Path) -> None:
    old = _copy(tmp_path, "a" * 32, STALE_AFTER_SECONDS + 60)
    fresh = _copy(tmp_path, "b" * 32, 60)
    assert sweep_stale(tmp_path) == 1
    assert not old.exists() and fresh.is_dir()


def test_a_link_is_removed_as_a_name_and_its_target_survives(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (tmp_path / PENDING_DIR).mkdir()
    link = tmp_path / PENDING_DIR / ("c" * 32)
    link.symlink_to(outside, target_is_directory=True)
    then = time.time() - STALE_AFTER_SECONDS - 60
    os.utime(link, (then, then), follow_symlinks=False)
    foreign = tmp_path / PENDING_DIR / "not-ours"
    foreign.mkdir()
    os.utime(foreign, (then, then))
    assert sweep_stale(tmp_path) == 1
    assert not os.path.lexists(link) and (outside / "keep.txt").read_text() == "mine"
    assert foreign.is_dir()  # only names this module creates are touched


def test_no_pending_folder_is_nothing_to_do(tmp_path: Path) -> None:
    assert sweep_stale(tmp_path) == 0

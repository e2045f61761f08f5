"""Trees the agent shaped are cleaned up whatever their depth: a local sandbox's homes and a pending
skill copy held a 1,500-deep chain, and ``shutil.rmtree`` (``ignore_errors`` or not) raised
``RecursionError`` on it instead of removing it."""

from __future__ import annotations

import uuid
from pathlib import Path

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.skills.pending import PENDING_DIR, discard
from fixtures.deep_trees import deep_chain

DEPTH = 1500


def test_a_local_sandbox_home_with_a_deep_chain_and_a_link_out_is_removed_on_close(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    provider = LocalSandboxProvider()
    home = provider.home(ThreadPaths(tmp_path / "thread").ensure())
    deep_chain(home, DEPTH)
    (home / "out").symlink_to(outside)
    homes = home.parent
    provider.close()
    assert not homes.exists()
    assert (outside / "keep.txt").read_text() == "host file"


def test_discarding_a_pending_copy_with_a_deep_chain_removes_it(tmp_path: Path) -> None:
    snapshot = uuid.uuid4().hex
    held = tmp_path / PENDING_DIR / snapshot
    (held / "pkg").mkdir(parents=True)
    deep_chain(held / "pkg", DEPTH)
    discard(tmp_path, snapshot)
    assert not held.exists() and (tmp_path / PENDING_DIR).is_dir()

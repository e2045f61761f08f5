"""``SafeDir.rmtree``: a folder the agent shaped is removed whatever its depth, no link followed.

The agent's ``mkdir -p a/a/.../a`` 1500 levels deep is one command; the recursive ``rmtree``
raised ``RecursionError`` on it (which callers catching ``UnsafePath`` let escape), in the
middle of a kernel's or a projection's clean-up.  Both path resolvers are exercised.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deerflow.threadfs import SafeDir, UnsafePath, remove_tree
from fixtures.deep_trees import deep_chain
from fixtures.resolvers import resolver_fixture  # noqa: F401  (registers the fixture)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    return outside


def test_a_1600_deep_tree_is_removed_without_recursion(tmp_path: Path, host: Path, resolver: str) -> None:
    ws = tmp_path / "ws"
    (ws / "victim").mkdir(parents=True)
    deep_chain(ws / "victim", 1600)
    (ws / "victim" / "to-host").symlink_to(host)
    (ws / "victim" / "a" / "to-file").symlink_to(host / "keep.txt")
    os.mkfifo(ws / "victim" / "a" / "pipe")
    (ws / "sibling.txt").write_text("stays")
    try:
        with SafeDir.open(ws) as root:
            root.rmtree("victim")  # the recursive version raised RecursionError here
            assert root.kind("victim") is None
    finally:
        remove_tree(ws / "victim")  # pytest's own clean-up recurses and would fail on what is left
    assert sorted(p.name for p in ws.iterdir()) == ["sibling.txt"]
    assert sorted(p.name for p in host.iterdir()) == ["keep.txt"]
    assert (host / "keep.txt").read_text() == "host file"


def test_a_link_at_the_name_is_unlinked_and_a_link_on_the_way_refused(tmp_path: Path, host: Path,
                                                                      resolver: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "victim").symlink_to(host)
    (ws / "via").symlink_to(host)
    with SafeDir.open(ws) as root:
        root.rmtree("victim")
        assert root.kind("victim") is None
        with pytest.raises(UnsafePath) as info:
            root.rmtree("via/keep.txt")
        assert info.value.code in ("symlink", "not_dir")  # openat2 says ELOOP, the walk ENOTDIR
        root.rmtree("never-made")  # missing: nothing to do
        root.rmtree("never/made")
    assert (host / "keep.txt").read_text() == "host file"

"""SafeDir: the host never follows a link, never blocks on a FIFO, never writes through a planted name.

Every test runs twice: with ``openat2`` and with the ``O_NOFOLLOW`` walk that
replaces it on kernels without it.
"""

from __future__ import annotations

import contextlib
import os
import threading

import pytest

from deerflow.threadfs import MAX_WALK_DEPTH, SafeDir, UnsafePath, remove_tree
from fixtures.deep_trees import deep_chain
from fixtures.resolvers import resolver_fixture  # noqa: F401  (registers the fixture)


@pytest.fixture
def layout(tmp_path, resolver):
    """A thread root with a workspace, and a host canary outside it."""
    canary = tmp_path / "host" / "canary.txt"
    canary.parent.mkdir()
    canary.write_text("host secret\n")
    ws = tmp_path / "thread" / "workspace"
    ws.mkdir(parents=True)
    with SafeDir.open(ws, label="/mnt/user-data/workspace") as root:
        yield root, ws, canary


def test_reads_and_writes_regular_files(layout):
    root, ws, _ = layout
    root.write_bytes("a/b/c.txt", b"hello")
    assert (ws / "a" / "b" / "c.txt").read_bytes() == b"hello"
    assert root.read_bytes("a/b/c.txt") == b"hello"
    root.append_bytes("a/b/c.txt", b" world")
    assert root.read_text("a/b/c.txt") == "hello world"
    assert [e.name for e in root.scandir("a/b")] == ["c.txt"]
    assert [p for p, _ in root.walk()] == ["a", "a/b", "a/b/c.txt"]
    assert not [n for n in os.listdir(ws / "a" / "b") if n.endswith(".tmp")]


@pytest.mark.parametrize("op", ["read", "write", "append", "makedirs_parent"])
def test_symlink_at_the_exact_name_is_never_followed(layout, op):
    root, ws, canary = layout
    (ws / "out").mkdir()
    os.symlink(canary, ws / "out" / "x.txt")
    os.symlink(canary.parent, ws / "linkdir")
    with pytest.raises(UnsafePath) if op != "write" else _no_raise():
        if op == "read":
            root.read_bytes("out/x.txt")
        elif op == "write":
            root.write_bytes("out/x.txt", b"attacker")  # replaces the link, never writes through it
        elif op == "append":
            root.append_bytes("out/x.txt", b"attacker")
        else:
            root.write_bytes("linkdir/new.txt", b"attacker")
    assert canary.read_text() == "host secret\n"
    assert not (canary.parent / "new.txt").exists()
    if op == "write":
        assert (ws / "out" / "x.txt").read_bytes() == b"attacker" and not (ws / "out" / "x.txt").is_symlink()


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_fifo_is_refused_without_blocking(layout):
    root, ws, _ = layout
    os.mkfifo(ws / "pipe")
    done = threading.Event()
    errors: list[UnsafePath] = []

    def read():
        try:
            root.read_bytes("pipe")
        except UnsafePath as exc:
            errors.append(exc)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10), "read_bytes blocked on a FIFO"
    assert errors and errors[0].code == "not_regular"
    with pytest.raises(UnsafePath) as exc:
        root.append_bytes("pipe", b"x")
    assert exc.value.code == "not_regular"


def test_hard_link_is_refused(layout, tmp_path):
    root, ws, canary = layout
    os.link(canary, ws / "hl.txt")
    with pytest.raises(UnsafePath) as exc:
        root.read_bytes("hl.txt")
    assert exc.value.code == "hard_link"
    with pytest.raises(UnsafePath):
        root.append_bytes("hl.txt", b"x")
    root.write_bytes("hl.txt", b"new")  # replaced, not written through
    assert canary.read_text() == "host secret\n"


def test_mkdtemp_mkdir_and_open_new_never_take_an_existing_name_or_a_link_on_the_way(layout):
    root, ws, canary = layout
    names = {root.mkdtemp(".stage-", mode=0o755) for _ in range(5)}
    assert len(names) == 5 and all((ws / n).is_dir() and not (ws / n).is_symlink() for n in names)
    stage = names.pop()
    os.symlink(canary, ws / stage / "planted.txt")
    os.symlink(canary.parent, ws / stage / "linkdir")
    for rel, codes in (("planted.txt", {"exists"}), ("linkdir/new.txt", {"symlink", "not_dir"})):
        with pytest.raises(UnsafePath) as exc:  # (the O_NOFOLLOW walk meets the link as "not a directory")
            os.close(root.open_new(f"{stage}/{rel}"))
        assert exc.value.code in codes
    with pytest.raises(UnsafePath) as exc:
        root.mkdir(f"{stage}/planted.txt")
    assert exc.value.code == "exists"
    with pytest.raises(UnsafePath) as exc:
        root.mkdir(f"{stage}/linkdir/new")
    assert exc.value.code in {"symlink", "not_dir"}
    root.mkdir(f"{stage}/new")
    assert (ws / stage / "new").is_dir()
    fd = root.open_new(f"{stage}/fresh.txt")
    os.write(fd, b"ok")
    os.close(fd)
    assert (ws / stage / "fresh.txt").read_bytes() == b"ok"
    assert canary.read_text() == "host secret\n" and sorted(os.listdir(canary.parent)) == ["canary.txt"]


def test_a_library_tree_may_open_hard_linked_files(layout):
    root, ws, canary = layout
    os.link(canary, ws / "hl.txt")
    fd = root.open_file("hl.txt", hard_links_ok=True)
    os.close(fd)


def test_dotdot_and_absolute_paths_are_refused(layout):
    root, *_ = layout
    for bad in ("../x", "a/../../x", "/etc/passwd", "a\x00b"):
        with pytest.raises(UnsafePath) as exc:
            root.read_bytes(bad)
        assert exc.value.code == "bad_path"


def test_temp_names_are_unpredictable_and_exclusive(layout):
    root, ws, canary = layout
    # plant links at every name an attacker might guess: none is used
    for pid in range(1, 64):
        os.symlink(canary, ws / f".agent.ipynb.{pid}.tmp")
    root.write_text("agent.ipynb", "{}")
    assert canary.read_text() == "host secret\n"
    assert (ws / "agent.ipynb").read_text() == "{}"


def test_directory_swap_race_never_reaches_the_host(layout, tmp_path):
    """A thread swaps a real directory with a link to a host directory in a loop
    (renameat2 RENAME_EXCHANGE where available, else rename) while the host writes and reads."""
    root, ws, canary = layout
    host_dir = canary.parent
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("thread data")
    os.symlink(host_dir, ws / "swap")
    stop = threading.Event()
    exchange = _renameat2_exchange()

    def swapper():
        while not stop.is_set():
            exchange(str(ws / "d"), str(ws / "swap"))

    t = threading.Thread(target=swapper, daemon=True)
    t.start()
    seen = set()
    try:
        for i in range(300):
            with contextlib.suppress(UnsafePath):
                root.write_bytes(f"d/w{i}.txt", b"x")
            with contextlib.suppress(UnsafePath):
                seen.add(root.read_bytes("d/canary.txt"))
    finally:
        stop.set()
        t.join(10)
    assert b"host secret\n" not in seen
    assert sorted(os.listdir(host_dir)) == ["canary.txt"]


def _renameat2_exchange():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    rename_exchange = 2

    def exchange(a: str, b: str) -> None:
        libc.renameat2(-100, a.encode(), -100, b.encode(), rename_exchange)

    return exchange


def test_walk_of_a_1500_deep_chain_stops_at_the_cap_and_says_where(layout):
    root, ws, _ = layout
    deep_chain(ws, 1500)
    try:
        root.write_text("z.txt", "after the chain\n")
        paths = [p for p, _ in root.walk()]  # the recursive walk raised RecursionError here
        assert paths[0] == "a" and paths[-1] == "z.txt"  # the walk carried on past the chain
        assert len(paths) == MAX_WALK_DEPTH + 1
        too_deep: list[str] = []
        assert [p for p, _ in root.walk(on_too_deep=too_deep.append)] == paths
        assert too_deep == ["/".join(["a"] * MAX_WALK_DEPTH)]
        assert [p for p, _ in root.walk(max_depth=3)] == ["a", "a/a", "a/a/a", "z.txt"]
    finally:
        remove_tree(ws / "a")


def test_walk_order_is_depth_first_and_sorted(layout):
    root, _, _ = layout
    for rel in ("b/y.txt", "a/c/d.txt", "a/b.txt", "c.txt", "a/c/e/f.txt"):
        root.write_text(rel, "x")
    root.makedirs("a/empty")
    root.makedirs("skip/inner")
    got = [p for p, _ in root.walk(skip_dirs=frozenset({"skip"}))]
    assert got == ["a", "a/b.txt", "a/c", "a/c/d.txt", "a/c/e", "a/c/e/f.txt", "a/empty",
                   "b", "b/y.txt", "c.txt", "skip"]


def test_open_create_makes_missing_levels_without_following_a_planted_link(tmp_path, resolver):
    thread = tmp_path / "thread"
    thread.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    # a link at a level still to be made (dangling: the path through it does not exist yet)
    (thread / "user-data").symlink_to(outside / "new")
    with pytest.raises(UnsafePath) as exc:
        SafeDir.open(thread / "user-data" / "workspace", create=True)
    assert exc.value.code in ("symlink", "not_dir")
    assert os.listdir(outside) == []
    with SafeDir.open(tmp_path / "new" / "x" / "y", create=True, label="/mnt/y") as made:
        made.write_text("f.txt", "ok")
    assert (tmp_path / "new" / "x" / "y" / "f.txt").read_text() == "ok"

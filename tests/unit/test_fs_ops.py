"""File operations on the virtual filesystem: ranges, caps, atomic writes, search."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.sandbox.files import fs_ops, search
from deerflow.sandbox.files.read_marks import ReadMarks
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.tools.errors import ToolFailure
from fixtures.hang_guard import runs_to_the_end

WS = "/mnt/user-data/workspace"


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    return HomePaths(tmp_path / "home").thread("alice", "t1").ensure()


@pytest.fixture
def vfs(thread: ThreadPaths) -> VirtualFS:
    return VirtualFS(thread)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host directory next to the thread, holding a secret the agent must not reach."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("TOKEN=hunter2\n")
    return d


def failure(fn, *args, **kwargs) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        fn(*args, **kwargs)
    return info.value


# -- read -----------------------------------------------------------------------


def test_read_line_range_is_one_based_and_inclusive(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "f.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    ft = fs_ops.read_file(vfs, f"{WS}/f.txt", 2, 3)
    assert ft.text == "two\nthree\n"
    assert (ft.start_line, ft.end_line, ft.total_lines) == (2, 3, 5)
    assert ft.next_start_line == 4


def test_read_past_the_end_says_how_long_the_file_is(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "f.txt").write_text("a\nb\n")
    err = failure(fs_ops.read_file, vfs, f"{WS}/f.txt", 10)
    assert err.code == "bad_range"
    assert "2 lines" in err.message


def test_capped_read_can_be_continued_to_rebuild_the_file(
    vfs: VirtualFS, thread: ThreadPaths
) -> None:
    content = "".join(f"line {i:04d} " + "x" * 40 + "\n" for i in range(200))
    (thread.workspace / "big.txt").write_text(content)
    pieces: list[str] = []
    start: int | None = 1
    while start is not None:
        ft = fs_ops.read_file(vfs, f"{WS}/big.txt", start, max_chars=1000)
        assert len(ft.text) <= 1000
        pieces.append(ft.text)
        start = ft.next_start_line
    assert "".join(pieces) == content
    assert len(pieces) > 5


def test_binary_file_is_refused_with_a_pointer_to_python(
    vfs: VirtualFS, thread: ThreadPaths
) -> None:
    (thread.uploads / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    err = failure(fs_ops.read_file, vfs, "/mnt/user-data/uploads/img.png")
    assert err.code == "binary_file"
    assert "binary" in err.message
    assert "python" in err.message


def test_non_utf8_file_counts_as_binary(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    assert failure(fs_ops.read_file, vfs, f"{WS}/latin1.txt").code == "binary_file"


def test_read_missing_file_and_directory(vfs: VirtualFS) -> None:
    assert failure(fs_ops.read_file, vfs, f"{WS}/nope.txt").code == "not_found"
    assert failure(fs_ops.read_file, vfs, WS).code == "is_directory"


def test_read_records_a_mark_of_the_whole_file(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "f.txt").write_text("a\nb\nc\n")
    marks = ReadMarks(vfs.state_dir)
    ft = fs_ops.read_file(vfs, "f.txt", 1, 1, marks=marks)
    mark = marks.get(f"{WS}/f.txt")
    assert mark is not None
    assert mark.sha256 == ft.sha256
    assert not (thread.user_data / "sandbox-state").exists()  # never inside a mount


# -- write ----------------------------------------------------------------------


def test_write_creates_parent_directories(vfs: VirtualFS, thread: ThreadPaths) -> None:
    result = fs_ops.write_file(vfs, "/mnt/user-data/outputs/report/final.md", "# Done\n")
    assert (thread.outputs / "report" / "final.md").read_text() == "# Done\n"
    assert result.created
    assert result.path == "/mnt/user-data/outputs/report/final.md"


def test_append_adds_to_the_end(vfs: VirtualFS, thread: ThreadPaths) -> None:
    fs_ops.write_file(vfs, "log.txt", "first\n")
    result = fs_ops.write_file(vfs, "log.txt", "second\n", append=True)
    assert (thread.workspace / "log.txt").read_text() == "first\nsecond\n"
    assert result.appended
    assert not result.created


def test_oversized_write_is_refused_with_a_way_forward(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "keep.txt").write_text("original")
    err = failure(fs_ops.write_file, vfs, "keep.txt", "x" * 2001, max_bytes=2000)
    assert err.code == "too_large"
    assert "append" in err.message
    assert (thread.workspace / "keep.txt").read_text() == "original"


def test_write_leaves_no_temp_files_and_keeps_the_mode(vfs: VirtualFS, thread: ThreadPaths) -> None:
    script = thread.workspace / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    fs_ops.write_file(vfs, "run.sh", "echo bye\n")
    assert [p.name for p in thread.workspace.iterdir()] == ["run.sh"]
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert script.read_text() == "echo bye\n"


def test_write_into_a_directory_path_is_refused(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "d").mkdir()
    assert failure(fs_ops.write_file, vfs, "d", "x").code == "is_directory"
    (thread.workspace / "f").write_text("x")
    assert failure(fs_ops.write_file, vfs, "f/child.txt", "x").code == "bad_path"


def test_concurrent_appends_to_one_file_lose_nothing(vfs: VirtualFS, thread: ThreadPaths) -> None:
    def worker(n: int) -> None:
        for i in range(15):
            fs_ops.write_file(vfs, "shared.log", f"{n}-{i}\n", append=True)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = (thread.workspace / "shared.log").read_text().splitlines()
    assert sorted(lines) == sorted(f"{n}-{i}" for n in range(6) for i in range(15))


# -- str_replace ----------------------------------------------------------------


def test_str_replace_unique_match(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "c.py").write_text("x = 1\ny = 2\n")
    result = fs_ops.str_replace(vfs, "c.py", "y = 2", "y = 3")
    assert (thread.workspace / "c.py").read_text() == "x = 1\ny = 3\n"
    assert result.replacements == 1


def test_str_replace_without_match_says_zero(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "c.py").write_text("x = 1\n")
    err = failure(fs_ops.str_replace, vfs, "c.py", "z = 9", "z = 0")
    assert err.code == "no_match"
    assert "0 times" in err.message


def test_str_replace_with_two_matches_says_two_and_changes_nothing(
    vfs: VirtualFS, thread: ThreadPaths
) -> None:
    (thread.workspace / "c.py").write_text("x = 1\nx = 1\n")
    err = failure(fs_ops.str_replace, vfs, "c.py", "x = 1", "x = 2")
    assert err.code == "ambiguous_match"
    assert "2 times" in err.message
    assert "replace_all" in err.message
    assert (thread.workspace / "c.py").read_text() == "x = 1\nx = 1\n"


def test_str_replace_all(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "c.py").write_text("a a a\n")
    result = fs_ops.str_replace(vfs, "c.py", "a", "b", replace_all=True)
    assert (thread.workspace / "c.py").read_text() == "b b b\n"
    assert result.replacements == 3


def test_str_replace_in_uploads_is_refused(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.uploads / "d.csv").write_text("a,b\n")
    err = failure(fs_ops.str_replace, vfs, "/mnt/user-data/uploads/d.csv", "a", "z")
    assert err.code == "read_only"
    assert (thread.uploads / "d.csv").read_text() == "a,b\n"


# -- ls -------------------------------------------------------------------------


def test_ls_shows_two_levels(vfs: VirtualFS, thread: ThreadPaths) -> None:
    deep = thread.workspace / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "deep.txt").write_text("x")
    (thread.workspace / "a" / "top.txt").write_text("hello")
    listing = fs_ops.ls(vfs, WS)
    paths = {e.path: e for e in listing.entries}
    assert set(paths) == {f"{WS}/a", f"{WS}/a/b", f"{WS}/a/top.txt"}
    assert paths[f"{WS}/a/top.txt"].size == 5


def test_ls_caps_entries(vfs: VirtualFS, thread: ThreadPaths) -> None:
    for i in range(12):
        (thread.workspace / f"f{i:02d}").write_text("")
    listing = fs_ops.ls(vfs, WS, max_entries=10)
    assert len(listing.entries) == 10
    assert listing.truncated


def test_ls_of_user_data_lists_the_mounts(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.uploads / "d.csv").write_text("x")
    listing = fs_ops.ls(vfs, "/mnt/user-data")
    paths = [e.path for e in listing.entries]
    assert "/mnt/user-data/uploads" in paths
    assert "/mnt/user-data/uploads/d.csv" in paths
    assert "/mnt/user-data/outputs" in paths


# -- glob and grep --------------------------------------------------------------


@pytest.fixture
def project(thread: ThreadPaths, outside: Path) -> Path:
    ws = thread.workspace
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("import os\nTOKEN = 'local'\n")
    (ws / "src" / "pkg" / "util.py").write_text("def helper():\n    return 1\n")
    (ws / "README.md").write_text("Token usage\n")
    (ws / "blob.bin").write_bytes(b"TOKEN\x00\x01\x02")
    os.symlink(outside, ws / "escape-dir")
    os.symlink(outside / "secret.txt", ws / "escape.txt")
    return ws


def test_glob_recursive_and_top_level(vfs: VirtualFS, project: Path) -> None:
    assert search.glob(vfs, "**/*.py").matches == (f"{WS}/src/main.py", f"{WS}/src/pkg/util.py")
    assert search.glob(vfs, "*.md").matches == (f"{WS}/README.md",)
    assert search.glob(vfs, f"{WS}/src/*.py").matches == (f"{WS}/src/main.py",)


def test_glob_skips_symlinks_leaving_the_sandbox(vfs: VirtualFS, project: Path) -> None:
    result = search.glob(vfs, "**/*")
    assert not any("escape" in m or "secret" in m for m in result.matches)
    assert result.skipped_links == 2


def test_glob_caps_results(vfs: VirtualFS, thread: ThreadPaths) -> None:
    for i in range(8):
        (thread.workspace / f"{i}.txt").write_text("")
    result = search.glob(vfs, "*.txt", max_results=5)
    assert len(result.matches) == 5
    assert result.truncated


def test_grep_finds_lines_and_skips_binary_and_escaping_links(
    vfs: VirtualFS, project: Path
) -> None:
    result = search.grep(vfs, "TOKEN")
    assert [(m.path, m.line_number) for m in result.matches] == [(f"{WS}/src/main.py", 2)]
    assert result.skipped_binary == 1
    assert result.skipped_links == 2


def test_grep_options(vfs: VirtualFS, project: Path) -> None:
    insensitive = search.grep(vfs, "token", case_sensitive=False)
    assert {m.path for m in insensitive.matches} == {f"{WS}/src/main.py", f"{WS}/README.md"}
    assert search.grep(vfs, "token", case_sensitive=False, glob="*.md").matches[0].path == (
        f"{WS}/README.md"
    )
    assert len(search.grep(vfs, "helper()", literal=True).matches) == 1
    assert failure(search.grep, vfs, "helper(").code == "bad_pattern"


def test_grep_caps_matches(vfs: VirtualFS, thread: ThreadPaths) -> None:
    (thread.workspace / "many.txt").write_text("hit\n" * 50)
    result = search.grep(vfs, "hit", max_matches=10)
    assert len(result.matches) == 10
    assert result.truncated


def test_a_huge_sparse_file_is_refused_without_being_read(tmp_path: Path, thread: ThreadPaths) -> None:
    """The sandboxed code makes a 1 TiB file in no time (sparse: no disk), text at its head so it
    passes the binary sniff.  read_file read it as one line and write_file/str_replace read it
    whole: the host process ran out of memory.  Run in a child held to 3 GiB of address space,
    so the old code fails with a MemoryError instead of taking the machine down."""
    huge = thread.workspace / "huge.txt"
    with open(huge, "wb") as out:
        out.write(b"a" * 10_000)
        out.truncate(1 << 40)
    assert runs_to_the_end(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        from deerflow.config.paths import HomePaths
        from deerflow.errors import ToolFailure
        from deerflow.sandbox.files import fs_ops
        from deerflow.sandbox.files.read_marks import ReadMarks
        from deerflow.sandbox.files.virtual_paths import VirtualFS
        vfs = VirtualFS(HomePaths(__import__("pathlib").Path({str(tmp_path / "home")!r})).thread("alice", "t1"))
        path = "/mnt/user-data/workspace/huge.txt"
        calls = [lambda: fs_ops.read_file(vfs, path, 1, 2), lambda: fs_ops.write_file(vfs, path, "x"),
                 lambda: fs_ops.write_file(vfs, path, "x", append=True), lambda: fs_ops.str_replace(vfs, path, "a", "b"),
                 lambda: fs_ops.write_file(vfs, path, "x", marks=ReadMarks(vfs.state_dir))]
        for call in calls:
            try:
                call()
            except ToolFailure as exc:
                assert exc.code == "too_large" and "python or bash tool" in exc.message, exc.message
            else:
                raise AssertionError("read a 1 TiB file")
    """)
    assert huge.stat().st_size == 1 << 40  # untouched


def test_a_file_growing_past_the_bound_while_read_stops_there(vfs: VirtualFS, thread: ThreadPaths,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fs_ops, "MAX_FILE_BYTES", 100)
    (thread.workspace / "log.txt").write_text("line\n" * 20)
    assert fs_ops.read_file(vfs, "log.txt").total_lines == 20  # exactly at the bound: read
    (thread.workspace / "log.txt").write_text("x" * 101)
    assert failure(fs_ops.read_file, vfs, "log.txt").code == "too_large"
    assert failure(fs_ops.str_replace, vfs, "log.txt", "x", "y").code == "too_large"

"""Translation, containment and masking of the agent's virtual paths."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.tools.errors import ToolFailure


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    return HomePaths(tmp_path / "home").thread("alice", "t1").ensure()


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    (root / "report").mkdir(parents=True)
    (root / "report" / "SKILL.md").write_text("# Report\n")
    return root


@pytest.fixture
def vfs(thread: ThreadPaths, skills: Path) -> VirtualFS:
    return VirtualFS(thread, skills_root=skills)


def refused(vfs: VirtualFS, path: str, *, write: bool = False) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        vfs.locate(path, write=write)
    return info.value


def test_each_mount_maps_to_its_host_directory(
    vfs: VirtualFS, thread: ThreadPaths, skills: Path
) -> None:
    assert vfs.locate("/mnt/user-data/workspace/a.txt", write=True).host == thread.workspace / "a.txt"
    assert vfs.locate("/mnt/user-data/outputs/r.md", write=True).host == thread.outputs / "r.md"
    assert vfs.locate("/mnt/user-data/uploads/d.csv", write=False).host == thread.uploads / "d.csv"
    assert vfs.locate("/mnt/skills/report/SKILL.md", write=False).host == skills / "report/SKILL.md"
    assert vfs.locate("/mnt/acp-workspace/x", write=False).host == thread.acp_workspace / "x"


def test_relative_paths_start_at_the_workspace(vfs: VirtualFS, thread: ThreadPaths) -> None:
    rp = vfs.locate("notes/a.md", write=True)
    assert rp.host == thread.workspace / "notes" / "a.md"
    assert rp.virtual == "/mnt/user-data/workspace/notes/a.md"


@pytest.mark.parametrize(
    "path",
    [
        "/mnt/user-data/workspace/../../etc/passwd",
        "/mnt/user-data/workspace/a/../b.txt",  # even when it would stay inside
        "../outputs/x",
    ],
)
def test_dotdot_is_refused(vfs: VirtualFS, path: str) -> None:
    assert refused(vfs, path).code == "bad_path"


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "/mnt/user-data/workspace2/x", "/mnt/user-data", "/mnt/skillsX/a", "/"],
)
def test_paths_outside_the_mounts_are_refused(vfs: VirtualFS, tmp_path: Path, path: str) -> None:
    failure = refused(vfs, path)
    assert failure.code == "path_outside_mounts"
    assert "/mnt/user-data/workspace" in failure.message  # tells the model where it may go
    assert str(tmp_path) not in failure.message


def touched(vfs: VirtualFS, path: str, *, write: bool) -> ToolFailure:
    """The failure of a real read or write of ``path`` (it must fail)."""
    action = (lambda: vfs.write_bytes(path, b"attacker")) if write else (lambda: vfs.read_bytes(path))
    with pytest.raises(ToolFailure) as info:
        action()
    return info.value


def test_symlink_to_etc_is_refused_without_naming_the_target(
    vfs: VirtualFS, thread: ThreadPaths, tmp_path: Path
) -> None:
    os.symlink("/etc", thread.workspace / "etc")
    for write in (False, True):
        failure = touched(vfs, "/mnt/user-data/workspace/etc/passwd", write=write)
        assert failure.code == "symlink_escape"
        assert str(tmp_path) not in failure.message
        assert "/etc/passwd" not in failure.message.replace("/workspace/etc/passwd", "")


def test_dangling_symlink_pointing_outside_is_replaced_not_written_through(
    vfs: VirtualFS, thread: ThreadPaths, tmp_path: Path
) -> None:
    target = tmp_path / "outside" / "new.txt"
    target.parent.mkdir()
    os.symlink(target, thread.workspace / "dangling")
    assert touched(vfs, "/mnt/user-data/workspace/dangling", write=False).code == "symlink_escape"
    vfs.write_bytes("/mnt/user-data/workspace/dangling", b"mine")
    assert not target.exists()
    assert (thread.workspace / "dangling").read_bytes() == b"mine"


def test_symlink_cannot_turn_a_read_only_mount_writable(
    vfs: VirtualFS, thread: ThreadPaths
) -> None:
    (thread.uploads / "data.csv").write_text("a,b\n")
    os.symlink(thread.uploads, thread.workspace / "up")
    failure = touched(vfs, "/mnt/user-data/workspace/up/data.csv", write=True)
    assert failure.code == "symlink_escape"
    assert (thread.uploads / "data.csv").read_text() == "a,b\n"


def test_symlinks_are_never_followed_by_the_host(vfs: VirtualFS, thread: ThreadPaths) -> None:
    """Even a link inside its own mount: the agent's code may use it, host-side tools do not."""
    (thread.workspace / "real.txt").write_text("x")
    os.symlink(thread.workspace / "real.txt", thread.workspace / "alias.txt")
    rp = vfs.locate("/mnt/user-data/workspace/alias.txt", write=True)
    assert rp.virtual == rp.canonical == "/mnt/user-data/workspace/alias.txt"
    assert touched(vfs, "/mnt/user-data/workspace/alias.txt", write=False).code == "symlink_escape"
    assert vfs.read_bytes("/mnt/user-data/workspace/real.txt")[1] == b"x"


def test_open_dir_never_goes_through_a_link_on_the_way(vfs: VirtualFS, thread: ThreadPaths, tmp_path: Path) -> None:
    """A folder the agent names is opened part by part: ``link/pkg`` with ``link`` pointing out of
    the thread (another user's folder) is refused, though ``ResolvedPath.host`` would reach it."""
    outside = tmp_path / "elsewhere" / "pkg"
    outside.mkdir(parents=True)
    (outside / "SKILL.md").write_text("secret")
    os.symlink(outside.parent, thread.workspace / "link")
    (thread.workspace / "real" / "pkg").mkdir(parents=True)
    with pytest.raises(ToolFailure) as info:
        vfs.open_dir("/mnt/user-data/workspace/link/pkg")
    assert info.value.code == "symlink_escape" and str(tmp_path) not in info.value.message
    rp, opened = vfs.open_dir("/mnt/user-data/workspace/real/pkg")
    with opened:
        assert rp.rel == "real/pkg" and opened.scandir() == []
    rp, opened = vfs.open_dir("/mnt/user-data/workspace")
    with opened:
        assert [e.name for e in opened.scandir()] == ["link", "real"]


@pytest.mark.parametrize(
    "path", ["/mnt/user-data/uploads/d.csv", "/mnt/skills/report/SKILL.md", "/mnt/acp-workspace/x"]
)
def test_read_only_mounts_refuse_writes_and_point_elsewhere(vfs: VirtualFS, path: str) -> None:
    vfs.locate(path, write=False)
    failure = refused(vfs, path, write=True)
    assert failure.code == "read_only"
    assert "/mnt/user-data/outputs" in failure.message


def test_skills_are_not_mounted_without_a_root(thread: ThreadPaths) -> None:
    failure = refused(VirtualFS(thread), "/mnt/skills/report/SKILL.md")
    assert failure.code == "path_outside_mounts"
    assert "not mounted" in failure.message


def test_host_path_inside_a_mount_is_mapped(vfs: VirtualFS, thread: ThreadPaths) -> None:
    rp = vfs.locate(str(thread.outputs / "report.md"), write=True)
    assert rp.host == thread.outputs / "report.md"
    assert rp.virtual == "/mnt/user-data/outputs/report.md"


def test_host_path_outside_the_mounts_is_refused_and_masked(
    vfs: VirtualFS, thread: ThreadPaths, tmp_path: Path
) -> None:
    failure = refused(vfs, str(thread.root / "sandbox-state" / "read-marks.json"))
    assert failure.code == "path_outside_mounts"
    assert str(tmp_path) not in failure.message


def test_to_virtual(vfs: VirtualFS, thread: ThreadPaths) -> None:
    assert vfs.to_virtual(thread.uploads / "d.csv") == "/mnt/user-data/uploads/d.csv"
    assert vfs.to_virtual(thread.workspace) == "/mnt/user-data/workspace"
    with pytest.raises(ToolFailure):
        vfs.to_virtual(thread.root / "elsewhere")


def test_mask_rewrites_every_known_host_root(
    vfs: VirtualFS, thread: ThreadPaths, skills: Path, tmp_path: Path
) -> None:
    text = (
        f'File "{thread.workspace}/run.py", line 3\n'
        f"wrote {thread.outputs}/report.md\n"
        f"cwd={thread.workspace}\n"
        f"skill {skills}/report/SKILL.md\n"
        f"state {thread.root}/sandbox-state\n"
        f"db {tmp_path / 'home'}/deerflow.db\n"
        f"The workspace is {thread.workspace}. Home is {tmp_path / 'home'}.\n"
    )
    masked = vfs.mask(text)
    assert str(tmp_path) not in masked
    assert '"/mnt/user-data/workspace/run.py"' in masked
    assert "wrote /mnt/user-data/outputs/report.md" in masked
    assert "cwd=/mnt/user-data/workspace\n" in masked
    assert "skill /mnt/skills/report/SKILL.md" in masked
    assert "The workspace is /mnt/user-data/workspace. Home is" in masked


def test_mask_does_not_treat_a_sibling_as_the_mount(vfs: VirtualFS, thread: ThreadPaths) -> None:
    masked = vfs.mask(f"{thread.workspace}2/x")
    assert "/mnt/user-data/workspace2/x" in masked  # still masked, but not as the workspace
    assert "/mnt/user-data/workspace/" not in masked


def test_mask_knows_the_real_path_behind_a_symlinked_home(tmp_path: Path) -> None:
    (tmp_path / "real-home").mkdir()
    os.symlink(tmp_path / "real-home", tmp_path / "home-link")
    thread = HomePaths(tmp_path / "home-link").thread("alice", "t1").ensure()
    vfs = VirtualFS(thread)
    real_ws = Path(os.path.realpath(thread.workspace))
    assert vfs.mask(f"{real_ws}/a.txt") == "/mnt/user-data/workspace/a.txt"
    assert vfs.locate(f"{real_ws}/a.txt", write=True).virtual == "/mnt/user-data/workspace/a.txt"


_SEGMENTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "mnt",
        "user-data",
        "workspace",
        "workspace2",
        "uploads",
        "outputs",
        "skills",
        "etc",
        "passwd",
        "out",
        "in",
        "loop",
        "a.txt",
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segments=st.lists(_SEGMENTS, max_size=7), absolute=st.booleans(), write=st.booleans())
def test_any_accepted_path_stays_inside_a_mount(
    vfs: VirtualFS,
    thread: ThreadPaths,
    tmp_path: Path,
    segments: list[str],
    absolute: bool,
    write: bool,
) -> None:
    ws = thread.workspace
    for name, target in (("out", Path("/etc")), ("in", thread.uploads), ("loop", ws)):
        if not (ws / name).is_symlink():  # an earlier example may have replaced it with a file
            if (ws / name).is_dir():
                shutil.rmtree(ws / name)
            (ws / name).unlink(missing_ok=True)
            os.symlink(target, ws / name)
    path = ("/" if absolute else "") + "/".join(segments)
    try:
        rp = vfs.locate(path, write=write)
    except ToolFailure as failure:
        message = failure.message
    else:
        message = ""
    if message:
        assert str(tmp_path) not in message
        return
    assert rp.host.is_relative_to(rp.mount.host) and ".." not in rp.host.parts
    assert not write or rp.mount.writable
    try:  # whatever links lie on the way, the host never reads or writes through them
        if write:
            vfs.write_bytes(path, b"x")
        else:
            data = vfs.read_bytes(path)[1]
            assert b"root:" not in data
    except ToolFailure:
        pass
    assert not (thread.uploads / "x").exists()

"""The file tools as the model meets them: invoked with a ToolRuntime, text out.

These check what the model sees: containment errors that never show host
paths, masked output, and the read-before-write gate across tool calls.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.sandbox.files.uploads import save_upload
from deerflow.tools.builtins.file_tools import FILE_READ_TOOLS, FILE_WRITE_TOOLS, tool_group
from deerflow.tools.builtins.uploads_tool import list_uploaded_files
from deerflow.tools.errors import ToolFailure
from fixtures.tool_runtime import make_runtime

# langchain serialises tool input (including the injected runtime) for callbacks.
pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")

WS = "/mnt/user-data/workspace"
TOOLS = {t.name: t for t in [*FILE_READ_TOOLS, *FILE_WRITE_TOOLS, list_uploaded_files]}


@pytest.fixture
def thread(tmp_path: Path) -> ThreadPaths:
    return HomePaths(tmp_path / "home").thread("alice", "t1").ensure()


@pytest.fixture
def call(thread: ThreadPaths):
    runtime = make_runtime(thread)

    def invoke(name: str, **args: Any) -> str:
        message = TOOLS[name].invoke(
            {"type": "tool_call", "name": name, "args": {**args, "runtime": runtime}, "id": "t1"}
        )
        return message.content

    return invoke


def refused(call, name: str, **args: Any) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        call(name, **args)
    return info.value


# -- the contract the model sees --------------------------------------------------


def test_runtime_is_hidden_from_the_model_and_groups_are_set() -> None:
    for t in TOOLS.values():
        schema = t.tool_call_schema
        assert isinstance(schema, type)
        assert issubclass(schema, BaseModel)
        assert "runtime" not in schema.model_json_schema()["properties"]
    assert {t.name: tool_group(t) for t in FILE_READ_TOOLS + FILE_WRITE_TOOLS} == {
        "ls": "file:read",
        "read_file": "file:read",
        "glob": "file:read",
        "grep": "file:read",
        "write_file": "file:write",
        "str_replace": "file:write",
    }
    assert "/mnt/user-data" in TOOLS["ls"].description


# -- containment ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/mnt/user-data/workspace/../../etc/passwd", "bad_path"),
        ("/mnt/user-data/workspace2/x", "path_outside_mounts"),
        ("/etc/passwd", "path_outside_mounts"),
    ],
)
def test_read_outside_the_sandbox_is_refused(call, tmp_path: Path, path: str, code: str) -> None:
    err = refused(call, "read_file", path=path)
    assert err.code == code
    assert "root:" not in err.message
    assert str(tmp_path) not in err.message


@pytest.fixture
def etc_link(thread: ThreadPaths) -> str:
    os.symlink("/etc", thread.workspace / "sys")
    return f"{WS}/sys"


def test_read_through_a_symlink_to_etc_is_refused(call, etc_link: str, tmp_path: Path) -> None:
    err = refused(call, "read_file", path=f"{etc_link}/passwd")
    assert err.code == "symlink_escape"
    assert str(tmp_path) not in err.message


def test_write_through_a_symlink_to_etc_is_refused(call, etc_link: str, tmp_path: Path) -> None:
    probe = Path("/etc/deerflow-containment-probe")
    try:
        err = refused(call, "write_file", path=f"{etc_link}/{probe.name}", content="pwned")
        assert err.code == "symlink_escape"
        assert str(tmp_path) not in err.message
        assert not probe.exists()
    finally:
        probe.unlink(missing_ok=True)  # tests run as root here: never leave /etc dirty


def test_overwrite_through_a_symlink_leaves_the_target_unchanged(
    call, thread: ThreadPaths, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("original")
    os.symlink(outside, thread.workspace / "out")
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("write_file", {"path": f"{WS}/out/secret.txt", "content": "pwned"}),
        ("write_file", {"path": f"{WS}/out/secret.txt", "content": "pwned", "append": True}),
        (
            "str_replace",
            {"path": f"{WS}/out/secret.txt", "old_str": "original", "new_str": "pwned"},
        ),
    ]
    for tool, args in attempts:
        err = refused(call, tool, **args)
        assert err.code == "symlink_escape"
        assert str(tmp_path) not in err.message
    assert (outside / "secret.txt").read_text() == "original"


def test_ls_of_a_symlink_to_etc_is_refused(call, etc_link: str, tmp_path: Path) -> None:
    err = refused(call, "ls", path=etc_link)
    assert err.code == "symlink_escape"
    assert str(tmp_path) not in err.message


def test_grep_in_a_symlink_to_etc_is_refused(call, etc_link: str, tmp_path: Path) -> None:
    err = refused(call, "grep", pattern="root", path=etc_link)
    assert err.code == "symlink_escape"
    assert str(tmp_path) not in err.message


def test_grep_and_glob_across_the_workspace_skip_the_outward_link(
    call, thread: ThreadPaths, etc_link: str
) -> None:
    (thread.workspace / "notes.txt").write_text("root cause found\n")
    grep_out = call("grep", pattern="root")
    assert f"{WS}/notes.txt:1: root cause found" in grep_out
    assert "/sys/" not in grep_out
    assert "root:x" not in grep_out
    assert "outside the sandbox skipped" in grep_out
    glob_out = call("glob", pattern="**/*")
    assert f"{WS}/notes.txt" in glob_out
    assert "passwd" not in glob_out
    assert f"{etc_link}/" not in glob_out


# -- masking --------------------------------------------------------------------------


def test_host_paths_in_file_content_are_masked(call, thread: ThreadPaths, tmp_path: Path) -> None:
    (thread.workspace / "trace.log").write_text(
        f'File "{thread.workspace}/run.py", line 1\nsaved {thread.outputs}/fig.png\n'
    )
    out = call("read_file", path="trace.log")
    assert str(tmp_path) not in out
    assert f'File "{WS}/run.py"' in out
    assert "saved /mnt/user-data/outputs/fig.png" in out
    grep_out = call("grep", pattern="saved")
    assert str(tmp_path) not in grep_out


def test_read_file_notes_how_to_continue(call, thread: ThreadPaths) -> None:
    (thread.workspace / "f.txt").write_text("".join(f"{i}\n" for i in range(1, 11)))
    out = call("read_file", path="f.txt", start_line=3, end_line=4)
    assert out.startswith("3\n4\n")
    assert "start_line=5" in out


def test_ls_renders_a_tree(call, thread: ThreadPaths) -> None:
    (thread.workspace / "data").mkdir()
    (thread.workspace / "data" / "a.csv").write_text("x" * 2048)
    out = call("ls", path=WS)
    assert out.splitlines() == [f"{WS}/", "  data/", "    a.csv (2.0 KB)"]


# -- read before write ---------------------------------------------------------------


def test_new_files_need_no_read(call, thread: ThreadPaths) -> None:
    call("write_file", path="/mnt/user-data/outputs/report.md", content="# R\n")
    assert (thread.outputs / "report.md").read_text() == "# R\n"


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"content": "new"}),
        ("write_file", {"content": "more", "append": True}),
        ("str_replace", {"old_str": "draft", "new_str": "final"}),
    ],
)
def test_changing_an_unread_file_is_blocked(
    call, thread: ThreadPaths, tool: str, args: dict[str, Any]
) -> None:
    (thread.workspace / "plan.md").write_text("draft")
    err = refused(call, tool, path="plan.md", **args)
    assert err.code == "read_before_write"
    assert "read it first" in err.message.lower()
    assert (thread.workspace / "plan.md").read_text() == "draft"


def test_external_change_after_the_read_blocks_the_write(call, thread: ThreadPaths) -> None:
    (thread.workspace / "plan.md").write_text("draft")
    call("read_file", path="plan.md")
    (thread.workspace / "plan.md").write_text("edited by the user")
    err = refused(call, "write_file", path="plan.md", content="agent version")
    assert err.code == "read_before_write"
    assert "read it again" in err.message.lower()
    assert (thread.workspace / "plan.md").read_text() == "edited by the user"


def test_read_allows_one_change_and_writes_do_not_refresh_the_mark(
    call, thread: ThreadPaths
) -> None:
    (thread.workspace / "plan.md").write_text("step one\n")
    call("read_file", path=f"{WS}/plan.md")
    call("str_replace", path="plan.md", old_str="one", new_str="two")
    assert refused(call, "write_file", path="plan.md", content="x").code == "read_before_write"
    call("read_file", path="plan.md")
    call("write_file", path="plan.md", content="step three\n", append=True)
    assert (thread.workspace / "plan.md").read_text() == "step two\nstep three\n"


def test_marks_belong_to_one_thread(tmp_path: Path) -> None:
    home = HomePaths(tmp_path / "home")
    a, b = home.thread("alice", "a").ensure(), home.thread("alice", "b").ensure()
    for paths in (a, b):
        (paths.workspace / "f.txt").write_text("same")

    def invoke(paths: ThreadPaths, name: str, **args: Any) -> str:
        runtime = make_runtime(paths)
        return (
            TOOLS[name]
            .invoke(
                {
                    "type": "tool_call",
                    "name": name,
                    "id": "t1",
                    "args": {**args, "runtime": runtime},
                }
            )
            .content
        )

    invoke(a, "read_file", path="f.txt")
    with pytest.raises(ToolFailure):
        invoke(b, "write_file", path="f.txt", content="x")
    invoke(a, "write_file", path="f.txt", content="x")
    assert (b.workspace / "f.txt").read_text() == "same"


def test_the_mark_store_is_out_of_the_agents_reach(call, thread: ThreadPaths) -> None:
    (thread.workspace / "f.txt").write_text("x")
    call("read_file", path="f.txt")
    marks = next(thread.root.rglob("read-marks.json"))
    assert not marks.is_relative_to(thread.user_data)
    assert refused(call, "read_file", path=str(marks)).code == "path_outside_mounts"


# -- uploads and skills ---------------------------------------------------------------


def test_uploads_are_listed_and_read_only(call, thread: ThreadPaths) -> None:
    assert "No files" in call("list_uploaded_files")
    save_upload(thread, "survey.csv", b"q,a\n1,yes\n")
    listing = call("list_uploaded_files")
    assert "/mnt/user-data/uploads/survey.csv (10 bytes" in listing
    assert call("read_file", path="/mnt/user-data/uploads/survey.csv") == "q,a\n1,yes\n"
    err = refused(call, "write_file", path="/mnt/user-data/uploads/survey.csv", content="x")
    assert err.code == "read_only"


def test_skills_mount_comes_from_the_runtime_services(thread: ThreadPaths, tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    (skills / "report").mkdir(parents=True)
    (skills / "report" / "SKILL.md").write_text("# How to write a report\n")
    runtime = make_runtime(thread, skills_root=str(skills))
    read = TOOLS["read_file"].invoke(
        {
            "type": "tool_call",
            "name": "read_file",
            "id": "t1",
            "args": {"path": "/mnt/skills/report/SKILL.md", "runtime": runtime},
        }
    )
    assert read.content == "# How to write a report\n"
    with pytest.raises(ToolFailure) as info:
        TOOLS["write_file"].invoke(
            {
                "type": "tool_call",
                "name": "write_file",
                "id": "t1",
                "args": {"path": "/mnt/skills/report/SKILL.md", "content": "x", "runtime": runtime},
            }
        )
    assert info.value.code == "read_only"

"""``deerflow export|artifacts|threads``: the zip is written whole or not at all, and a path that
cannot be written, an unknown thread or folder is one line that leaves the file there as it was."""

from __future__ import annotations

import zipfile

import pytest

from deerflow.client import DeerFlowClient
from fixtures.cli_calls import assert_refused, leftovers, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture
def thread(deerflow_home) -> str:
    """A thread with one uploaded file (no run: an export reads the folders, not the history)."""
    with DeerFlowClient() as client:
        thread_id = client.create_thread()
        client.upload(thread_id, b"region,growth\nnorth,3\n", "sales.csv")
    return thread_id


def test_export_writes_the_zip_and_replaces_an_older_one(capsys, thread, tmp_path):
    target = tmp_path / "old.zip"
    target.write_bytes(b"an older export")
    code, out, err = run_cli(capsys, "export", thread, "--folders", "uploads", "--out", str(target))
    assert code == 0, err
    assert out.startswith(f"wrote {target}: 1 file(s)")
    assert zipfile.ZipFile(target).namelist() == ["uploads/sales.csv"]
    assert leftovers(tmp_path) == []


def test_a_path_that_cannot_be_written_is_one_line_and_nothing_is_left(capsys, thread, tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    for target, reason in ((folder, "it is a directory"), (blocker / "x.zip", "Not a directory"),
                           (tmp_path / "missing" / "x.zip", "No such file or directory")):
        assert_refused(run_cli(capsys, "export", thread, "--folders", "uploads", "--out", str(target)),
                       f"cannot write {target}", reason)
    assert list(folder.iterdir()) == [] and blocker.read_text() == "mine"
    assert leftovers(tmp_path) == [] and not (tmp_path / "missing").exists()


def test_an_unknown_thread_or_folder_leaves_the_existing_file_alone(capsys, thread, tmp_path):
    target = tmp_path / "keep.zip"
    target.write_bytes(b"an older export")
    assert_refused(run_cli(capsys, "export", "no-such-thread", "--out", str(target)), "unknown thread")
    assert_refused(run_cli(capsys, "export", thread, "--folders", "outputs,../..", "--out", str(target)),
                   "cannot export '../..'")
    assert_refused(run_cli(capsys, "export", "../../etc", "--out", str(target)))
    assert target.read_bytes() == b"an older export" and leftovers(tmp_path) == []


def test_threads_and_artifacts(capsys, thread):
    code, out, _ = run_cli(capsys, "threads")
    assert code == 0 and out.startswith(thread)
    code, out, _ = run_cli(capsys, "artifacts", thread)
    assert code == 0 and out == ""  # nothing presented yet
    assert_refused(run_cli(capsys, "artifacts", "nope"), "unknown thread 'nope'")

"""``DeerFlowClient.export`` to a path: the file is replaced whole, or left exactly as it was."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.errors import NotFoundError, UserError
from deerflow.runs import thread_files
from deerflow.runs.thread_files import ExportTooLarge

pytestmark = pytest.mark.integration

OLDER = b"an older export the user kept"


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.fixture
def client(deerflow_home: Path):
    with DeerFlowClient() as client:
        yield client


@pytest.fixture
def thread(client: DeerFlowClient) -> str:
    thread_id = client.create_thread()
    client.upload(thread_id, b"a,b\n1,2\n" * 50, "data.csv")
    return thread_id


def test_an_export_that_fails_midway_leaves_the_older_file_as_it_was(client, thread, tmp_path, monkeypatch):
    target = tmp_path / "out.zip"
    target.write_bytes(OLDER)
    real = thread_files.write_export
    # the real writer, with a bound the upload is over: it fails after it has started the archive
    monkeypatch.setattr(thread_files, "write_export", lambda root, folders, out, _max: real(root, folders, out, 10))
    with pytest.raises(ExportTooLarge):
        client.export(thread, target, folders=("uploads",))
    assert target.read_bytes() == OLDER
    assert _leftovers(tmp_path) == []


def test_a_successful_export_replaces_the_older_file_whole(client, thread, tmp_path):
    target = tmp_path / "out.zip"
    target.write_bytes(OLDER)
    done = client.export(thread, target, folders=("uploads",))
    with zipfile.ZipFile(target) as archive:
        assert archive.namelist() == done.files == ["uploads/data.csv"]
    assert _leftovers(tmp_path) == []


def test_refused_exports_touch_nothing(client, thread, tmp_path):
    target = tmp_path / "out.zip"
    target.write_bytes(OLDER)
    with pytest.raises(NotFoundError):
        client.export("no-such-thread", target)
    with pytest.raises(UserError, match="cannot export"):
        client.export(thread, target, folders=("skills",))
    with pytest.raises(UserError, match="cannot write"):
        client.export(thread, tmp_path / "missing" / "out.zip", folders=("uploads",))
    assert target.read_bytes() == OLDER
    assert _leftovers(tmp_path) == []

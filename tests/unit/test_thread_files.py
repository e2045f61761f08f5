"""ThreadFiles: the one host-side service for a thread's uploads and artifacts (issue 21).

Real files under a temporary DEERFLOW_HOME; the run manager is replaced by the two lookups
ThreadFiles asks of it (``ThreadLookup``), so each test says which threads exist for whom.
"""

from __future__ import annotations

import asyncio
import io
import os
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest

from deerflow.config.paths import HomePaths
from deerflow.config.schema import UploadsConfig
from deerflow.errors import NotFoundError, UserError
from deerflow.persistence.offloop import OFF_LOOP
from deerflow.runs.thread_files import (
    ARTIFACT_MAX_BYTES,
    ArtifactNotFound,
    ArtifactTooLarge,
    ExportTooLarge,
    ThreadFiles,
    UploadRejected,
)
from deerflow.sandbox.files.virtual_paths import OUTPUTS, UPLOADS, VirtualFS

SECRET = "s3cret-canary-value"


class Threads:
    """Threads by (user, id), with the state the agent left (``artifacts``)."""

    def __init__(self, **artifacts: list[str]) -> None:
        self.artifacts = {("alice", thread): paths for thread, paths in artifacts.items()}

    async def athread(self, thread_id: str, user_id: str) -> Any:
        if (user_id, thread_id) not in self.artifacts:
            raise NotFoundError(f"no thread {thread_id!r}")
        return thread_id

    async def thread_values(self, thread_id: str, user_id: str) -> dict[str, Any]:
        await self.athread(thread_id, user_id)
        return {"artifacts": self.artifacts[(user_id, thread_id)]}


def files(tmp_path: Path, *, max_file_bytes: int = 1000, max_files: int = 3, **artifacts: list[str]) -> ThreadFiles:
    return ThreadFiles(HomePaths(tmp_path / "home"), Threads(**artifacts),
                       lambda: UploadsConfig(max_file_bytes=max_file_bytes, max_files=max_files))


def outputs(tmp_path: Path, thread: str = "t1") -> Path:
    path = HomePaths(tmp_path / "home").thread("alice", thread).ensure().outputs
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_an_upload_is_listed_and_readable_by_the_agent_path(tmp_path: Path) -> None:
    service = files(tmp_path, t1=[])
    info = asyncio.run(service.upload("alice", "t1", "data.csv", b"a,b\n1,2\n"))
    assert (info.name, info.virtual_path, info.size) == ("data.csv", f"{UPLOADS}/data.csv", 8)
    listed = asyncio.run(service.list_uploads("alice", "t1"))
    assert [u.name for u in listed] == ["data.csv"]
    assert (HomePaths(tmp_path / "home").thread("alice", "t1").uploads / "data.csv").read_bytes() == b"a,b\n1,2\n"


def test_uploads_take_streams_and_host_files(tmp_path: Path) -> None:
    service = files(tmp_path, t1=[])
    source = tmp_path / "notes.txt"
    source.write_bytes(b"hello")
    assert asyncio.run(service.upload("alice", "t1", "notes.txt", source)).size == 5
    assert asyncio.run(service.upload("alice", "t1", "s.bin", io.BytesIO(b"xyz"))).size == 3


@pytest.mark.parametrize(("name", "data", "reason"), [
    ("big.bin", b"x" * 1001, "larger than the upload limit"),
    ("../escape.txt", b"x", "path separator"),
    (".hidden", b"x", "starts with a dot"),
])
def test_a_refused_upload_is_a_user_error_naming_the_file_and_saves_nothing(tmp_path: Path, name: str,
                                                                             data: bytes, reason: str) -> None:
    service = files(tmp_path, t1=[])
    with pytest.raises(UploadRejected) as refused:
        asyncio.run(service.upload("alice", "t1", name, data))
    assert isinstance(refused.value, UserError) and refused.value.code == "upload_rejected"
    assert str(refused.value).startswith(f"upload {name!r} rejected: ") and reason in refused.value.reason
    assert asyncio.run(service.list_uploads("alice", "t1")) == []
    assert not (tmp_path / "home" / "escape.txt").exists()


def test_the_file_count_limit_is_read_at_each_call(tmp_path: Path) -> None:
    limits = UploadsConfig(max_file_bytes=1000, max_files=1)
    service = ThreadFiles(HomePaths(tmp_path / "home"), Threads(t1=[]), lambda: limits)
    asyncio.run(service.upload("alice", "t1", "a.txt", b"a"))
    with pytest.raises(UploadRejected, match="maximum"):
        asyncio.run(service.upload("alice", "t1", "b.txt", b"b"))
    limits = UploadsConfig(max_file_bytes=1000, max_files=2)  # an edited config applies at the next call
    assert asyncio.run(service.upload("alice", "t1", "b.txt", b"b")).name == "b.txt"


def test_every_operation_refuses_a_thread_that_is_not_the_callers(tmp_path: Path) -> None:
    service = files(tmp_path, t1=[])
    for call in (service.list_uploads("bob", "t1"), service.upload("bob", "t1", "a.txt", b"a"),
                 service.read_artifact("bob", "t1", "a.md"), service.artifacts("alice", "other")):
        with pytest.raises(NotFoundError):
            asyncio.run(call)
    assert not HomePaths(tmp_path / "home").thread("bob", "t1").root.exists()


def test_an_artifact_is_read_by_virtual_path_or_by_name(tmp_path: Path) -> None:
    (outputs(tmp_path) / "report.md").write_bytes(b"# Report\n")
    service = files(tmp_path, t1=[f"{OUTPUTS}/report.md"])
    for path in (f"{OUTPUTS}/report.md", "report.md"):
        artifact = asyncio.run(service.read_artifact("alice", "t1", path))
        assert (artifact.path, artifact.name, artifact.data) == (f"{OUTPUTS}/report.md", "report.md", b"# Report\n")


def test_a_planted_link_a_fifo_or_a_path_outside_outputs_is_not_found(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    out = outputs(tmp_path)
    (out / "link.txt").symlink_to(secret)
    os.mkfifo(out / "pipe")
    (out / "sub").mkdir()
    service = files(tmp_path, t1=[])
    asyncio.run(service.upload("alice", "t1", "in.txt", b"mine"))
    for path in ("link.txt", "pipe", "sub", f"{UPLOADS}/in.txt", "/etc/passwd", "../uploads/in.txt", "missing.md"):
        with pytest.raises(ArtifactNotFound) as refused:
            asyncio.run(service.read_artifact("alice", "t1", path))
        assert refused.value.code == "not_found" and SECRET not in str(refused.value), path


def test_the_artifact_list_has_sizes_and_survives_odd_entries(tmp_path: Path) -> None:
    out = outputs(tmp_path)
    (out / "chart.png").write_bytes(b"\x89PNG" + b"0" * 6)
    (out / "link.txt").symlink_to(tmp_path)
    presented = [f"{OUTPUTS}/chart.png", f"{OUTPUTS}/gone.csv", f"{OUTPUTS}/link.txt", "/etc/passwd"]
    listed = asyncio.run(files(tmp_path, t1=presented).artifacts("alice", "t1"))
    assert [(a.name, a.mime_type, a.size) for a in listed] == [
        ("chart.png", "image/png", 10), ("gone.csv", "text/csv", None), ("link.txt", "text/plain", None),
        ("passwd", None, None)]


def test_the_http_layer_maps_the_typed_errors_in_its_one_table() -> None:
    from deerflow_jupyter.handlers.base import error_response

    assert error_response(UploadRejected("a.txt", "too big")) == (422, "upload 'a.txt' rejected: too big")
    assert error_response(ArtifactNotFound("/mnt/user-data/outputs/x is not an output file"))[0] == 404
    assert error_response(ArtifactTooLarge("/mnt/user-data/outputs/x is larger than 10 bytes"))[0] == 413


def test_an_artifact_past_the_bound_is_refused_not_read_whole(tmp_path: Path) -> None:
    out = outputs(tmp_path)
    (out / "big.bin").write_bytes(b"x" * 2048)
    service = files(tmp_path, t1=[])
    with pytest.raises(ArtifactTooLarge) as refused:
        asyncio.run(service.read_artifact("alice", "t1", "big.bin", max_bytes=1024))
    assert refused.value.code == "too_large" and "1024 bytes" in str(refused.value)
    assert str(tmp_path) not in str(refused.value)
    assert asyncio.run(service.read_artifact("alice", "t1", "big.bin", max_bytes=4096)).data == b"x" * 2048


def test_every_read_is_bounded_by_default(tmp_path: Path) -> None:
    # the agent leaves a file just past the default bound (sparse: it costs no disk); neither
    # the async read nor the chat's blocking one reads it into memory
    with open(outputs(tmp_path) / "huge.bin", "wb") as huge:
        huge.truncate(ARTIFACT_MAX_BYTES + 1)
    service = files(tmp_path, t1=[])
    with pytest.raises(ArtifactTooLarge):
        asyncio.run(service.read_artifact("alice", "t1", "huge.bin"))
    with pytest.raises(ArtifactTooLarge):
        service.read_artifact_blocking("alice", "t1", "huge.bin")


def test_several_uploads_look_the_thread_up_once(tmp_path: Path) -> None:
    threads = Threads(t1=[])
    lookups: list[tuple[str, str]] = []
    lookup = threads.athread

    async def counted(thread_id: str, user_id: str) -> Any:
        lookups.append((thread_id, user_id))
        return await lookup(thread_id, user_id)

    threads.athread = counted  # type: ignore[method-assign]
    service = ThreadFiles(HomePaths(tmp_path / "home"), threads, lambda: UploadsConfig(max_file_bytes=100, max_files=5))
    saved = asyncio.run(service.upload_all("alice", "t1", [("a.txt", b"a"), ("b.txt", io.BytesIO(b"bb"))]))
    assert [(u.name, u.size) for u in saved] == [("a.txt", 1), ("b.txt", 2)]
    assert lookups == [("t1", "alice")]
    with pytest.raises(NotFoundError):
        asyncio.run(service.upload_all("bob", "t1", [("c.txt", b"c")]))
    assert not HomePaths(tmp_path / "home").thread("bob", "t1").root.exists()


def _export(service: ThreadFiles, **kwargs: Any) -> tuple[Any, dict[str, bytes]]:
    buffer = io.BytesIO()
    done = asyncio.run(asyncio.wait_for(service.export("alice", "t1", buffer, **kwargs), 60))  # hang guard
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        return done, {name: archive.read(name) for name in archive.namelist()}


def test_an_export_zips_the_regular_files_of_the_chosen_folders(tmp_path: Path) -> None:
    service = files(tmp_path, t1=[])
    (outputs(tmp_path) / "sub").mkdir()
    (outputs(tmp_path) / "report.md").write_text("# r")
    (outputs(tmp_path) / "sub" / "data.csv").write_text("a\n")
    asyncio.run(service.upload("alice", "t1", "in.txt", b"given"))
    done, content = _export(service)
    assert content == {"outputs/report.md": b"# r", "outputs/sub/data.csv": b"a\n"}
    assert (done.files, done.skipped, done.size) == (["outputs/report.md", "outputs/sub/data.csv"], [], 5)
    _, both = _export(service, folders=["outputs", "uploads", "workspace"])  # an empty workspace: nothing
    assert set(both) == {"outputs/report.md", "outputs/sub/data.csv", "uploads/in.txt"}


def test_an_export_neither_follows_nor_waits_on_what_the_sandbox_planted(tmp_path: Path) -> None:
    """Links (to a host secret, to a folder outside), a FIFO nobody writes, a hard link to a host
    file, and a whole folder swapped for a link: each is skipped and named; none is read."""
    service = files(tmp_path, t1=[])
    secret = tmp_path / "host-secret.txt"
    secret.write_text(SECRET)
    out = outputs(tmp_path)
    (out / "ok.txt").write_text("fine")
    (out / "secret-link.txt").symlink_to(secret)
    (out / "dir-link").symlink_to(tmp_path)
    os.mkfifo(out / "pipe")
    os.link(secret, out / "hard.txt")
    uploads = HomePaths(tmp_path / "home").thread("alice", "t1").uploads
    if uploads.is_dir():
        uploads.rmdir()
    uploads.symlink_to(tmp_path)  # the uploads folder itself replaced by a link
    done, content = _export(service, folders=["outputs", "uploads"])
    assert content == {"outputs/ok.txt": b"fine"}
    assert SECRET.encode() not in b"".join(content.values())
    assert sorted(s.split(":")[0] for s in done.skipped) == [
        "outputs/dir-link", "outputs/hard.txt", "outputs/pipe", "outputs/secret-link.txt", "uploads"]


def test_an_export_over_its_bound_is_a_typed_error_and_unknown_folders_are_refused(tmp_path: Path) -> None:
    service = files(tmp_path, t1=[])
    (outputs(tmp_path) / "big.bin").write_bytes(b"x" * 100)
    with pytest.raises(ExportTooLarge):
        _export(service, max_bytes=99)
    with pytest.raises(UserError, match="cannot export 'skills'"):
        _export(service, folders=["skills"])
    with pytest.raises(NotFoundError):
        asyncio.run(service.export("mallory", "t1", io.BytesIO()))


def test_an_export_of_a_thread_without_folders_is_an_empty_archive(tmp_path: Path) -> None:
    done, content = _export(files(tmp_path, t1=[]), folders=["outputs", "workspace", "uploads"])
    assert (content, done.files, done.skipped) == ({}, [], [])


def test_an_opened_artifact_streams_from_its_descriptor(tmp_path: Path) -> None:
    out = outputs(tmp_path)
    (out / "data.csv").write_bytes(b"a,b\n" * 1000)
    service = files(tmp_path, t1=[])

    async def download() -> tuple[int, bytes]:
        with await service.open_artifact("alice", "t1", "data.csv") as reader:
            (out / "data.csv").rename(out / "moved.csv")  # a swap after the open changes nothing sent
            (out / "data.csv").symlink_to("/etc/passwd")
            return reader.size, b"".join([c async for c in reader.chunks(chunk=1000)])

    assert asyncio.run(download()) == (4000, b"a,b\n" * 1000)


@pytest.mark.parametrize("plant", ["link", "fifo", "dir", "outside"])
def test_only_a_regular_output_file_opens(tmp_path: Path, plant: str) -> None:
    out = outputs(tmp_path)
    target = "x"
    if plant == "link":
        (out / "x").symlink_to("/etc/passwd")
    elif plant == "fifo":
        os.mkfifo(out / "x")  # opened non-blocking: refused, never waited on
    elif plant == "dir":
        (out / "x").mkdir()
    else:
        target = f"{UPLOADS}/x"
    with pytest.raises(ArtifactNotFound):
        asyncio.run(files(tmp_path, t1=[]).open_artifact("alice", "t1", target))
    with pytest.raises(NotFoundError):
        asyncio.run(files(tmp_path, t1=[]).open_artifact("bob", "t1", "x"))


def test_an_open_whose_caller_went_away_closes_its_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled while the open runs in its thread (held there by an Event, not by luck of timing):
    the descriptor it opens after its caller left is closed, never leaked."""
    (outputs(tmp_path) / "x").write_bytes(b"x")
    service = files(tmp_path, t1=[])
    entered, release = threading.Event(), threading.Event()
    opened: list[int] = []
    real = VirtualFS.open_output

    def held(self: VirtualFS, path: str) -> Any:
        entered.set()
        release.wait(20)
        located, fd = real(self, path)
        opened.append(fd)
        return located, fd

    monkeypatch.setattr(VirtualFS, "open_output", held)

    async def abandon() -> None:
        opening = asyncio.ensure_future(service.open_artifact("alice", "t1", "x"))
        async with asyncio.timeout(20):  # a hang guard
            while not entered.is_set():
                await asyncio.sleep(0.01)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        release.set()
        async with asyncio.timeout(20):  # the abandoned open ends (and closes what it opened)
            while not opened or OFF_LOOP.stuck():
                await asyncio.sleep(0.01)

    try:
        asyncio.run(abandon())
    finally:
        release.set()
    try:  # closed (its number may since name another file, never this one)
        still = os.readlink(f"/proc/self/fd/{opened[0]}")
    except OSError:
        still = ""
    assert not still.endswith("/outputs/x")
